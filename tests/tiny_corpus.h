// A tiny synthetic parallel corpus (numbers spelled in Spanish -> English) and a config for it:
// whole training and pruning runs in seconds.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "headcount/train/trainer.h"
#include "test_util.h"

namespace headcount {

inline const char* const kEs[] = {"cero",  "uno",  "dos",   "tres", "cuatro",
                                  "cinco", "seis", "siete", "ocho", "nueve"};
inline const char* const kEn[] = {"zero", "one", "two",   "three", "four",
                                  "five", "six", "seven", "eight", "nine"};

inline std::pair<std::vector<std::string>, std::vector<std::string>> number_pairs(int n,
                                                                                  int offset) {
  std::vector<std::string> es, en;
  for (int i = 0; i < n; ++i) {
    const int v = 100000 + ((i + offset) * 7919) % 900000;  // six digits: six words
    std::string a, b;
    for (char c : std::to_string(v)) {
      a += std::string(a.empty() ? "" : " ") + kEs[c - '0'];
      b += std::string(b.empty() ? "" : " ") + kEn[c - '0'];
    }
    es.push_back(a);
    en.push_back(b);
  }
  return {es, en};
}

// A small model with every attention type and several heads: 2+2 layers of 4 heads, d=32,
// FFN 64, no dropout.
inline ModelConfig small_model_config() {
  ModelConfig c;
  c.d_model = 32;
  c.ffn_dim = 64;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.heads = 4;
  c.dropout = 0.0;
  return c;
}

// Writes the corpus into `dir` and returns a config for it.
inline Config tiny_run_config(const testing::TempDir& dir, int train_pairs) {
  auto [es, en] = number_pairs(train_pairs, 0);
  auto [des, den] = number_pairs(8, 0);  // dev: sentences seen in training
  io::write_lines_atomic(dir / "train.es", es);
  io::write_lines_atomic(dir / "train.en", en);
  io::write_lines_atomic(dir / "dev.es", des);
  io::write_lines_atomic(dir / "dev.en", den);
  io::write_lines_atomic(dir / "test.es", des);
  io::write_lines_atomic(dir / "test.en", den);
  Config c;
  // Tests run two at a time (ctest -j2): one BLAS thread each keeps them from spinning against
  // each other; one LibTorch thread each for the same reason (bf16 would otherwise take one per
  // core).
  c.threads.blas = 1;
  c.threads.intra_op = 1;
  c.data.prepare = "none";
  c.data.dir = dir.path().string();
  c.data.test_extra_refs = {};
  c.vocab.size = 40;
  c.vocab.byte_fallback = false;
  c.vocab.cache_dir = (dir / "vocab").string();
  c.model.d_model = 32;
  c.model.ffn_dim = 64;
  c.model.encoder_layers = 1;
  c.model.decoder_layers = 1;
  c.model.heads = 2;
  c.model.dropout = 0.0;
  c.train.max_tokens = 256;
  c.train.lr = 3e-3;
  c.train.warmup_steps = 20;
  c.train.max_steps = 300;
  c.train.eval_every = 100;
  c.train.log_every = 10;
  c.train.patience = 0;
  c.train.label_smoothing = 0.0;
  c.decode.beam = 2;
  return c;
}

// Trains tiny_run_config(dir, 64) for `steps` steps into dir/run and returns its last checkpoint;
// `adjust` may change the config first (device, precision).
inline std::filesystem::path train_tiny_model(const testing::TempDir& dir, int steps,
                                              const std::function<void(Config&)>& adjust = {}) {
  Config c = tiny_run_config(dir, 64);
  c.train.max_steps = steps;
  c.train.eval_every = steps;
  if (adjust) adjust(c);
  train::TrainOptions o;
  o.run_dir = dir / "run";
  train::train_command(c, o);
  return dir / "run" / "checkpoints" / "last";
}

}  // namespace headcount
