#include "headcount/common/provenance.h"

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "headcount/common/runtime.h"
#include "headcount_build_info.h"

namespace headcount::provenance {

std::string commit() {
  return HEADCOUNT_GIT_COMMIT;
}

namespace {

// The value of the first "KEY : value" line of /proc/cpuinfo.
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    std::string v = line.substr(colon + 1);
    const auto first = v.find_first_not_of(' ');
    return first == std::string::npos ? "" : v.substr(first);
  }
  return "";
}

}  // namespace

std::string cpu_model() {
  return cpuinfo_field("model name");
}

std::string cpu_flags() {
  std::istringstream flags(cpuinfo_field("flags"));
  std::set<std::string> have;
  for (std::string f; flags >> f;) have.insert(f);
  std::string out;
  for (const char* f : {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    if (have.count(f)) out += (out.empty() ? "" : " ") + std::string(f);
  return out;
}

std::string gpu_names() {
  if (!torch::cuda::is_available()) return "";
  std::string names;
  // LibTorch's C++ API has no device name without the CUDA headers; nvidia-smi has it.
  if (FILE* p = popen("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null", "r")) {
    std::array<char, 256> buf{};
    while (fgets(buf.data(), buf.size(), p)) {
      std::string line = buf.data();
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      if (!line.empty()) names += (names.empty() ? "" : ", ") + line;
    }
    pclose(p);
  }
  if (names.empty()) names = fmt::format("{} CUDA device(s)", torch::cuda::device_count());
  return names;
}

const nlohmann::json& record() {
  static const nlohmann::json r = [] {
    std::array<char, 256> host{};
    gethostname(host.data(), host.size() - 1);
    return nlohmann::json{{"commit", commit()},        {"headcount_version", HEADCOUNT_VERSION},
                          {"libtorch", TORCH_VERSION}, {"cpu", cpu_model()},
                          {"cpu_flags", cpu_flags()},  {"cores", runtime::num_cores()},
                          {"gpu", gpu_names()},        {"host", std::string(host.data())}};
  }();
  return r;
}

std::string describe(const nlohmann::json& r) {
  if (!r.is_object()) return "unrecorded";
  const auto s = [&](const char* k) {
    return r.contains(k) && r[k].is_string() ? r[k].get<std::string>() : std::string();
  };
  std::string machine = s("cpu").empty() ? "unknown CPU" : s("cpu");
  if (!s("cpu_flags").empty()) machine += " (" + s("cpu_flags") + ")";
  if (!s("gpu").empty()) machine += ", " + s("gpu");
  return fmt::format("commit {}, {}, LibTorch {}", s("commit").empty() ? "?" : s("commit"), machine,
                     s("libtorch").empty() ? "?" : s("libtorch"));
}

}  // namespace headcount::provenance
