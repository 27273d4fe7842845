#include "headcount/common/runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <mutex>

#include "headcount/common/check.h"
#include "headcount/common/log.h"

namespace headcount::runtime {
namespace {

// Below this a BLAS is not optimised: the reference BLAS reaches ~3-4 GFLOP/s here, OpenBLAS
// ~60 on one core and ~130 on two.
constexpr double kSlowGflops = 15.0;

std::string loaded_library_path(const char* name_part) {
  struct Search {
    const char* part;
    std::string found;
  } search{name_part, ""};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name && std::strstr(info->dlpi_name, s->part)) {
          s->found = info->dlpi_name;
          return 1;
        }
        return 0;
      },
      &search);
  if (search.found.empty()) return "";
  char resolved[PATH_MAX];
  if (realpath(search.found.c_str(), resolved)) return resolved;
  return search.found;
}

}  // namespace

int num_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

BlasInfo probe_blas() {
  BlasInfo info;
  info.library = loaded_library_path("libblas");
  if (info.library.empty()) info.library = loaded_library_path("openblas");
  using ConfigFn = char* (*)();
  if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    info.vendor = std::string("OpenBLAS ") + fn();
  } else if (info.library.find("/blas/") != std::string::npos) {
    info.vendor = "reference BLAS (netlib)";
  } else {
    info.vendor = "unknown";
  }
  torch::NoGradGuard no_grad;
  const int64_t n = 384;
  auto a = torch::randn({n, n});
  auto b = torch::randn({n, n});
  auto c = torch::mm(a, b);  // warm-up
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    c = torch::mm(a, b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  info.gflops = 2.0 * n * n * n / best / 1e9;
  info.slow = info.gflops < kSlowGflops;
  return info;
}

void apply_threads(const ThreadsConfig& threads) {
  const int intra = threads.intra_op > 0 ? threads.intra_op : num_cores();
  at::set_num_threads(intra);
  static std::once_flag inter_once;
  std::call_once(inter_once, [&] {
    // Inter-op threads can be set only once per process, before any inter-op work.
    try {
      at::set_num_interop_threads(threads.inter_op);
    } catch (const c10::Error&) {
    }
  });
  if (threads.blas > 0) {
    using SetFn = void (*)(int);
    if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
      fn(threads.blas);
    }
  }
  static std::once_flag blas_once;
  std::call_once(blas_once, [] {
    const BlasInfo b = probe_blas();
    log::debug("BLAS: {} ({}), {:.1f} GFLOP/s", b.vendor, b.library, b.gflops);
    if (b.slow) {
      log::warn(
          "slow BLAS: {:.1f} GFLOP/s from {} ({}). Training will run ~40x slower than it should. "
          "Install an optimised BLAS: 'apt-get install libopenblas0-pthread' (it takes over "
          "libblas.so.3), or select it with 'update-alternatives --config "
          "libblas.so.3-x86_64-linux-gnu'.",
          b.gflops, b.vendor, b.library.empty() ? "libblas.so.3" : b.library);
    }
  });
}

torch::Device resolve_device(const std::string& name) {
  if (name == "auto")
    return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::kCPU;
  if (name == "cpu") return torch::kCPU;
  HC_CHECK(torch::cuda::is_available(),
           "device '{}' requested but LibTorch sees no CUDA device (this LibTorch {} CUDA); use "
           "device: auto or cpu",
           name, torch::cuda::is_available() ? "has" : "may lack");
  return torch::Device(name);
}

}  // namespace headcount::runtime
