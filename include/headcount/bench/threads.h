// `bench threads`: one training step (forward, backward, Adam) of LibTorch's own nn::Transformer
// at the shapes of `bench train`, under each intra-op x BLAS thread setting.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace headcount::bench {

struct ThreadsOptions {
  int d_model = 256;
  int layers = 6;
  int heads = 8;
  int tokens = 2048;
  int repeats = 3;
};

struct ThreadSetting {
  int intra = 1, blas = 1;
  std::vector<double> rates;  // target tokens/s, one per repeat
};

struct ThreadsResult {
  int64_t tokens_per_step = 0;
  std::vector<ThreadSetting> settings;
};

// Settings alternate within every repeat so that machine noise hits them alike; `measured` hears
// of each measurement as it is made (repeat from 1).
ThreadsResult bench_threads(const ThreadsOptions& o,
                            const std::function<void(int repeat, const ThreadSetting&)>& measured);

}  // namespace headcount::bench
