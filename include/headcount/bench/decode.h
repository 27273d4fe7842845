// `bench decode`: sentences per second on the dev set of a checkpoint's data config, for each beam
// size; with a pruned checkpoint to compare (and the full model with the same heads masked),
// measured alternately, against the speed-up their FLOPs predict, with each row's dev BLEU (the
// speed must come at equal quality).
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "headcount/common/precision.h"
#include "headcount/data/vocab.h"
#include "headcount/model/transformer.h"
#include "headcount/run/checkpoint.h"

namespace headcount::bench {

struct DecodeBenchOptions {
  std::string checkpoint;
  std::vector<std::string> sets;  // overrides of the checkpoint's config (device, decode.*, ...)
  std::string compare;            // a pruned checkpoint to compare with
  std::string mask_from;          // a prune run whose removed heads are masked in the full model
  int sentences = 0;              // 0: the whole dev set
  std::vector<int> beams = {1, 4};
  int repeats = 3;
  std::vector<std::string> precisions;  // empty: decode.precision of the checkpoint's config
};

// One model measured: the full checkpoint, the pruned one, or the full one with heads masked.
struct DecodeVariant {
  std::string name;
  run::CheckpointInfo info;
  model::Transformer model{nullptr};
  std::map<std::pair<int, int64_t>, torch::Tensor> masks;  // (type, layer) -> head scale
};

// A row of the table: one variant in one precision.
struct DecodeRow {
  size_t variant = 0;
  size_t precision = 0;
  std::string name;
};

// Everything loaded before the clock runs.
struct DecodeBench {
  DecodeBenchOptions options;
  run::CheckpointInfo info;  // of the full checkpoint, with the overrides applied
  torch::Device device{torch::kCPU};
  std::vector<DecodeVariant> variants;
  std::vector<std::vector<int>> ids;  // the dev sentences measured, as subword ids
  std::vector<int64_t> src_len;       // their lengths with EOS
  std::vector<std::string> refs;      // their first references
  std::vector<PrecisionChoice> choices;
  std::vector<int> intra_op_threads;  // per choice
  std::vector<DecodeRow> rows;
  std::unique_ptr<data::Vocab> tgt_vocab;
};

DecodeBench prepare_decode_bench(const DecodeBenchOptions& o);

struct DecodeRowResult {
  std::string name;
  std::string heads;                                     // the variant's architecture summary
  double sentences_per_s = 0, slowest = 0, fastest = 0;  // median, min, max over the repeats
  double measured = 0;                                   // speed-up over the first row
  double predicted = 0;                                  // the speed-up the FLOPs predict
  double bleu = 0;
};

// Every row `options.repeats` times, alternating; the first row is the base of the speed-ups.
std::vector<DecodeRowResult> measure_beam(DecodeBench& b, int beam);

}  // namespace headcount::bench
