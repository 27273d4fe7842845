// Numeric precision of training and decoding: fp32, or bf16 mixed precision.
//
// bf16 mixed precision (train.precision / decode.precision: bf16) keeps what needs the range and
// the mantissa in fp32 and runs the matrix products in bf16:
//   bf16: the linear layers' products (projections, feed-forward, output layer), forward and
//         backward, through LibTorch's autocast (on the CPU, oneDNN's bf16 kernels).
//   fp32: the weights (master copies), gradients as accumulated into .grad, Adam's state and the
//         checkpoints; embeddings and positions, the residual stream, layer norm, the attention
//         scores, softmax and head mixing (headcount's attention kernel), the Hard-Concrete gates
//         and the L0 penalty, the loss (log-softmax, label smoothing) and its gradient, the
//         gradient norm.
// On CUDA the same scope is LibTorch's CUDA autocast (its own fp32 list: softmax, log-softmax,
// layer norm).
//
// `auto` picks bf16 where the hardware computes in bf16 natively: a CPU with avx512_bf16 or AMX
// (and a LibTorch with oneDNN), or a CUDA device; otherwise fp32. `bf16` on a CPU without native
// bf16 arithmetic is an error (emulated bf16 is slower than fp32). HEADCOUNT_CPU_BF16=0 makes
// headcount treat the CPU as one without (to test that path, or to keep fp32 under `auto`).
#pragma once

#include <torch/types.h>

#include <string>

namespace headcount {

enum class Precision { kFp32, kBf16 };

struct PrecisionChoice {
  Precision precision = Precision::kFp32;
  std::string reason;  // why, for the log and summary.json ("auto: this CPU has avx512_bf16")
  bool bf16() const { return precision == Precision::kBf16; }
  std::string name() const { return bf16() ? "bf16" : "fp32"; }
};

// What the CPU offers for bf16 arithmetic: "avx512_bf16", "amx_bf16", "avx512_bf16+amx_bf16", or
// "" when it has none (or HEADCOUNT_CPU_BF16=0, or LibTorch lacks oneDNN).
std::string cpu_native_bf16();

// Resolves `requested` (auto | fp32 | bf16) for `device`; `key` names the config key in errors
// ("train.precision"). Throws headcount::Error for bf16 where it cannot run natively.
PrecisionChoice resolve_precision(const std::string& requested, const torch::Device& device,
                                  const std::string& key);

// Mixed precision for the code inside it (a forward pass, a decoding): LibTorch's autocast for
// the device, to bf16. Does nothing for fp32. Nested scopes are fine; the outermost clears
// autocast's cache of cast weights when it ends.
class PrecisionScope {
 public:
  PrecisionScope(const PrecisionChoice& choice, const torch::Device& device);
  PrecisionScope(bool bf16, const torch::Device& device);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool was_enabled_ = false;
  at::ScalarType old_dtype_ = at::kBFloat16;
};

// Whether a bf16 autocast scope is active for CPU tensors (the attention kernel then keeps its
// scores, softmax and head mixing in fp32).
bool cpu_autocast_active();

}  // namespace headcount
