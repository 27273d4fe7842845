// What the benchmarks print: each result as text (or one JSON line), so that the command line
// only prints it. Every text ends with a newline.
#pragma once

#include <string>
#include <vector>

#include "headcount/bench/decode.h"
#include "headcount/bench/train.h"

namespace headcount::bench {

// Plain against gated steps, timed alternately (`steps` pairs).
std::string gated_summary(const TrainBenchResult& r, int steps);
std::string train_json(const TrainBenchResult& r);
// The timed steps' median against the FLOPs and the matmul peak measured on the device.
std::string train_text(const TrainBenchOptions& a, const TrainBenchResult& r);
std::string decode_setup_text(const DecodeBench& b);
// One beam size's table (it starts with an empty line).
std::string decode_beam_table(int beam, const std::vector<DecodeRowResult>& rows);

}  // namespace headcount::bench
