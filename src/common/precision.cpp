#include "headcount/common/precision.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <cstdlib>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "headcount/common/check.h"

// LibTorch 2.4 replaced the per-device autocast functions with ones that take the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define HC_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace headcount {
namespace {

bool autocast_enabled(bool cuda) {
#ifdef HC_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

void set_autocast(bool cuda, bool enabled, at::ScalarType dtype) {
#ifdef HC_AUTOCAST_BY_DEVICE_TYPE
  const auto type = cuda ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (cuda) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

at::ScalarType autocast_dtype(bool cuda) {
#ifdef HC_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

bool bf16_hidden_by_environment() {
  const char* v = std::getenv("HEADCOUNT_CPU_BF16");
  return v && std::string(v) == "0";
}

}  // namespace

std::string cpu_native_bf16() {
  if (bf16_hidden_by_environment()) return "";
  if (!at::hasMKLDNN()) return "";  // LibTorch's bf16 CPU products go through oneDNN
  std::string found;
#if defined(__x86_64__) && defined(__GNUC__)
  // AVX-512 state enabled by the operating system (checked by GCC's own CPU model).
  if (!__builtin_cpu_supports("avx512f")) return "";
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) found = "avx512_bf16";
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)))
    found += found.empty() ? "amx_bf16" : "+amx_bf16";
#endif
  return found;
}

PrecisionChoice resolve_precision(const std::string& requested, const torch::Device& device,
                                  const std::string& key) {
  PrecisionChoice c;
  if (requested == "fp32") {
    c.reason = key + ": fp32";
    return c;
  }
  HC_CHECK(requested == "bf16" || requested == "auto", "{}: expected auto, fp32 or bf16, got '{}'",
           key, requested);
  if (device.is_cuda()) {
    c.precision = Precision::kBf16;
    c.reason = fmt::format("{}: {} on CUDA (autocast)", key, requested);
    return c;
  }
  const std::string native = device.is_cpu() ? cpu_native_bf16() : "";
  if (requested == "bf16") {
    HC_CHECK(!native.empty(),
             "{}: bf16 needs native bf16 arithmetic (a CPU with avx512_bf16 or AMX, and a LibTorch "
             "with oneDNN), which {} lacks{}; use fp32 or auto",
             key, device.is_cpu() ? "this CPU" : device.str(),
             bf16_hidden_by_environment() ? " (HEADCOUNT_CPU_BF16=0 hides it)" : "");
    c.precision = Precision::kBf16;
    c.reason = fmt::format("{}: bf16 (this CPU has {})", key, native);
    return c;
  }
  if (native.empty()) {
    c.reason = fmt::format("{}: auto -> fp32 (no native bf16 arithmetic on this {})", key,
                           device.is_cpu() ? "CPU" : "device");
  } else {
    c.precision = Precision::kBf16;
    c.reason = fmt::format("{}: auto -> bf16 (this CPU has {})", key, native);
  }
  return c;
}

PrecisionScope::PrecisionScope(const PrecisionChoice& choice, const torch::Device& device)
    : PrecisionScope(choice.bf16(), device) {}

PrecisionScope::PrecisionScope(bool bf16, const torch::Device& device) {
  if (!bf16) return;
  active_ = true;
  cuda_ = device.is_cuda();
  was_enabled_ = autocast_enabled(cuda_);
  old_dtype_ = autocast_dtype(cuda_);
  set_autocast(cuda_, true, at::kBFloat16);
  at::autocast::increment_nesting();
}

PrecisionScope::~PrecisionScope() {
  if (!active_) return;
  // The outermost scope drops the bf16 copies of the weights that autocast cached.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(cuda_, was_enabled_, old_dtype_);
}

bool cpu_autocast_active() {
  return autocast_enabled(false) && autocast_dtype(false) == at::kBFloat16;
}

}  // namespace headcount
