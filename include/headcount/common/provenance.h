// Where and with what a result was made: every run's summary.json and every evaluation record it,
// so that a table can say on which machine, commit, LibTorch and precision each row was produced
// and does not set figures of different machines side by side unawares.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace headcount::provenance {

// The commit the binary was built from ("1a2b3c4", "1a2b3c4+changes" when tracked files differed
// from it, "unknown" outside a git checkout).
std::string commit();
// The CPU's model name as /proc/cpuinfo gives it (its first "model name"), "" when unknown.
std::string cpu_model();
// The CPU flags that decide headcount's speed and precision choices, among avx2, avx512f,
// avx512_bf16 and amx_bf16, space-separated.
std::string cpu_flags();
// The CUDA devices' names (nvidia-smi), "" without CUDA.
std::string gpu_names();
// {"commit", "headcount_version", "libtorch", "cpu", "cpu_flags", "cores", "gpu", "host"}: what
// summary.json and eval-*.json carry as "provenance" (computed once per process).
const nlohmann::json& record();
// "commit 1a2b3c4, AMD EPYC 9R14 (avx2 avx512f avx512_bf16), LibTorch 1.13.1" from a record.
std::string describe(const nlohmann::json& record);

}  // namespace headcount::provenance
