#include "headcount/common/runtime.h"

#include <dlfcn.h>

#include <link.h>
#include <malloc.h>
#include <strings.h>
#include <unistd.h>
#include <cstdlib>

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <mutex>

#include "headcount/common/check.h"
#include "headcount/common/log.h"

namespace headcount::runtime {
namespace {

// Below this a BLAS is not optimised: a reference BLAS reaches a few GFLOP/s, OpenBLAS (and any
// tuned BLAS) tens to hundreds (`headcount bench blas`).
constexpr double kSlowGflops = 15.0;

// The shared object that provides `sgemm_`, i.e. the BLAS LibTorch's matmuls end up in.
std::string sgemm_provider() {
  void* sym = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info;
  if (!sym || !dladdr(sym, &info) || !info.dli_fname) return "";
  char resolved[PATH_MAX];
  if (realpath(info.dli_fname, resolved)) return resolved;
  return info.dli_fname;
}

bool is_openblas(const std::string& library) {
  return library.find("openblas") != std::string::npos;
}

}  // namespace

bool keep_freed_memory() {
  if (const char* v = std::getenv("HEADCOUNT_RETURN_MEMORY"); v && *v && std::string(v) != "0")
    return false;
#ifdef __GLIBC__
  // Every chunk from the heap (not from mmap), and a heap that never shrinks: freed blocks are
  // reused by the next allocation of a similar size without faulting pages in again.
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1 &&
         mallopt(M_TOP_PAD, 64 << 20) == 1;
#else
  return false;
#endif
}

int num_cores() {
  // A launcher that starts several processes on one machine gives each its share.
  if (const char* share = std::getenv("HEADCOUNT_NUM_CORES")) {
    const int v = std::atoi(share);
    if (v > 0) return v;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

BlasInfo probe_blas() {
  BlasInfo info;
  info.library = sgemm_provider();
  using ConfigFn = char* (*)();
  const auto config = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (is_openblas(info.library)) {
    info.vendor = config ? std::string("OpenBLAS (") + config() + ")" : "OpenBLAS";
  } else if (info.library.find("/blas/") != std::string::npos) {
    info.vendor = "reference BLAS (netlib)";
  } else if (info.library.find("mkl") != std::string::npos) {
    info.vendor = "Intel MKL";
  } else {
    info.vendor = info.library.empty() ? "unknown (no sgemm_ found)" : "unknown";
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

namespace {

// The marker a restarted process finds: the kernel set OpenBLAS had chosen before the restart.
constexpr const char* kRestartMarker = "HEADCOUNT_OPENBLAS_FALLBACK";

}  // namespace

std::string better_openblas_coretype(const std::string& chosen, const CpuVectorFeatures& cpu) {
  if (!cpu.avx2_fma) return "";
  // OpenBLAS's x86-64 kernel sets without AVX2: what it falls back to for a CPU it does not know.
  static const char* const kPreAvx2[] = {"prescott",  "core2",        "penryn",      "dunnington",
                                         "nehalem",   "atom",         "sandybridge", "barcelona",
                                         "bobcat",    "bulldozer",    "piledriver",  "steamroller",
                                         "opteron",   "opteron_sse3", "katmai",      "coppermine",
                                         "northwood", "banias",       "generic"};
  const bool fallback = std::any_of(std::begin(kPreAvx2), std::end(kPreAvx2), [&](const char* k) {
    return strcasecmp(chosen.c_str(), k) == 0;
  });
  if (!fallback) return "";
  return cpu.avx512_skx ? "SkylakeX" : "Haswell";
}

CpuVectorFeatures cpu_vector_features() {
  CpuVectorFeatures f;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512_skx = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
#endif
  return f;
}

std::string openblas_corename() {
  using NameFn = char* (*)();
  const auto fn = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!fn || !is_openblas(sgemm_provider())) return "";
  const char* name = fn();
  return name ? name : "";
}

void restart_with_better_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // the user's choice, or ours after a restart
  const std::string chosen = openblas_corename();
  const std::string better = better_openblas_coretype(chosen, cpu_vector_features());
  if (better.empty()) return;
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  setenv(kRestartMarker, chosen.c_str(), 1);
  execv("/proc/self/exe", argv);
  // Not restarted (no /proc): go on with OpenBLAS's choice, and say so.
  const int err = errno;
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kRestartMarker);
  log::warn(
      "OpenBLAS runs its {} kernels on this CPU, which supports {} ones; restarting with "
      "OPENBLAS_CORETYPE={} failed ({}). Set OPENBLAS_CORETYPE={} yourself for ~2x faster "
      "fp32 training.",
      chosen, better, better, std::strerror(err), better);
}

std::string blas_kernel_note() {
  const char* fallback = std::getenv(kRestartMarker);
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  if (!fallback || !core) return "";
  return fmt::format(
      "OpenBLAS chose its {} kernels for this CPU, which it does not recognise; "
      "OPENBLAS_CORETYPE={} set by headcount",
      fallback, core);
}

int intra_op_threads(const ThreadsConfig& threads, bool bf16) {
  if (threads.intra_op > 0) return threads.intra_op;
  if (threads.intra_op == 0) return num_cores();
  // bf16 products run in oneDNN on LibTorch's threads: as many as the BLAS budget (a sweep or
  // launch gives each process its share of the cores there), else one per core.
  if (bf16) return threads.blas > 0 ? threads.blas : num_cores();
  return 1;
}

void apply_threads(const ThreadsConfig& threads, bool bf16) {
  const int intra = intra_op_threads(threads, bf16);
  at::set_num_threads(intra);
  static std::once_flag inter_once;
  std::call_once(inter_once, [&] {
    // Inter-op threads can be set only once per process, before any inter-op work.
    try {
      at::set_num_interop_threads(threads.inter_op);
    } catch (const c10::Error&) {
    }
  });
  set_blas_threads(threads.blas > 0 ? threads.blas : num_cores());
  warn_if_slow_blas();
}

void set_blas_threads(int n) {
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
}

void warn_if_slow_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (is_openblas(sgemm_provider())) return;  // optimised: nothing to time
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
