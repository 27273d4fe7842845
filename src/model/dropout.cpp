#include "headcount/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <mutex>

namespace headcount::model {
namespace {

uint64_t draw_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

// The mask of element i is a function of (seed, i) alone: a counter-based generator, so the
// mask is drawn in parallel, in vector registers, and drawn again in the backward pass instead of
// being stored. The hash is Wellons' "lowbias32" (two multiply-xorshift rounds; bias 0.17) on
// the counter plus the seed's low half, with the high half mixed in between the rounds.
__attribute__((always_inline)) inline uint32_t draw(uint32_t key_lo, uint32_t key_hi, uint32_t i) {
  uint32_t x = i + key_lo;
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= key_hi;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// bf16 <-> fp32 on the raw 16 bits, in a form the compiler vectorises: widening is a shift;
// narrowing rounds to nearest even (NaN stays a quiet NaN), as LibTorch's cast does.
__attribute__((always_inline)) inline float load(const float* p, int64_t i) {
  return p[i];
}
__attribute__((always_inline)) inline float load(const c10::BFloat16* p, int64_t i) {
  const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
__attribute__((always_inline)) inline void store(float* p, int64_t i, float v) {
  p[i] = v;
}
__attribute__((always_inline)) inline void store(c10::BFloat16* p, int64_t i, float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(nan ? 0x7fc0u : rounded);
}

struct Mask {
  uint64_t seed;
  uint32_t threshold;  // element i is kept when draw(i) < threshold
  float scale;         // 1 / (1 - p)
};

// out[i] = float(in[i]) * (kept(i) ? scale : 0) for i in [begin, end), computed in fp32 and
// stored as Out.
template <typename In, typename Out>
__attribute__((always_inline)) inline void masked_scale_body(const In* in, Out* out, int64_t begin,
                                                             int64_t end, const Mask& m) {
  const uint32_t lo = static_cast<uint32_t>(m.seed);
  const uint32_t threshold = m.threshold;
  const float scale = m.scale;
  // The counter is 32 bits: each 2^32 elements (a tensor that large) get another key.
  for (int64_t seg = begin; seg < end;) {
    const int64_t seg_end = std::min(end, ((seg >> 32) + 1) << 32);
    const uint32_t hi =
        static_cast<uint32_t>(m.seed >> 32) + static_cast<uint32_t>(seg >> 32) * 0x9e3779b9U;
    for (int64_t i = seg; i < seg_end; ++i) {
      const float keep = draw(lo, hi, static_cast<uint32_t>(i)) < threshold ? scale : 0.0f;
      store(out, i, load(in, i) * keep);
    }
    seg = seg_end;
  }
}

template <typename In, typename Out>
void masked_scale_generic(const In* in, Out* out, int64_t begin, int64_t end, const Mask& m) {
  masked_scale_body(in, out, begin, end, m);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HC_DROPOUT_AVX2 1
template <typename In, typename Out>
__attribute__((target("avx2,fma"))) void masked_scale_avx2(const In* in, Out* out, int64_t begin,
                                                           int64_t end, const Mask& m) {
  masked_scale_body(in, out, begin, end, m);
}
#endif

bool cpu_has_avx2() {
#ifdef HC_DROPOUT_AVX2
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
const bool kAvx2 = cpu_has_avx2();

template <typename In, typename Out>
void masked_scale(const In* in, Out* out, int64_t n, const Mask& m) {
  at::parallel_for(0, n, 1 << 15, [&](int64_t begin, int64_t end) {
#ifdef HC_DROPOUT_AVX2
    if (kAvx2) return masked_scale_avx2(in, out, begin, end, m);
#endif
    masked_scale_generic(in, out, begin, end, m);
  });
}

// The mask of dropout probability p in (0, 1) drawn from `seed`; the keep probability 1 - p is
// quantised to 2^-32.
Mask mask_of(uint64_t seed, double p) {
  const double keep = std::ldexp(1.0 - p, 32);
  return {seed, static_cast<uint32_t>(std::min(keep, 4294967295.0)),
          static_cast<float>(1.0 / (1.0 - p))};
}

// A fresh mask: its seed is one draw from LibTorch's default generator.
Mask new_mask(double p) {
  return mask_of(draw_seed(), p);
}

// out (dtype out_dtype) = in * mask, for fp32 or bf16 contiguous tensors.
torch::Tensor apply_mask(const torch::Tensor& in_any, at::ScalarType out_dtype, const Mask& m) {
  const auto in = in_any.contiguous();
  auto out = torch::empty(in.sizes(), in.options().dtype(out_dtype));
  const int64_t n = in.numel();
  const bool in_bf16 = in.scalar_type() == torch::kBFloat16;
  const bool out_bf16 = out_dtype == torch::kBFloat16;
  if (in_bf16 && out_bf16) {
    masked_scale(in.data_ptr<c10::BFloat16>(), out.data_ptr<c10::BFloat16>(), n, m);
  } else if (in_bf16) {
    masked_scale(in.data_ptr<c10::BFloat16>(), out.data_ptr<float>(), n, m);
  } else if (out_bf16) {
    masked_scale(in.data_ptr<float>(), out.data_ptr<c10::BFloat16>(), n, m);
  } else {
    masked_scale(in.data_ptr<float>(), out.data_ptr<float>(), n, m);
  }
  return out;
}

// Forward: one pass that draws the mask and multiplies (bf16 in, fp32 out under mixed precision);
// the mask is not stored: the backward pass draws it again from the seed, and the gradient
// (grad * mask in fp32, rounded to the input's dtype) is one pass too.
struct DropoutFn : torch::autograd::Function<DropoutFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               double p) {
    const Mask m = new_mask(p);
    ctx->saved_data["seed"] = static_cast<int64_t>(m.seed);
    ctx->saved_data["p"] = p;
    ctx->saved_data["dtype"] = static_cast<int64_t>(x.scalar_type());
    return apply_mask(x, torch::kFloat32, m);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const Mask m = mask_of(static_cast<uint64_t>(ctx->saved_data["seed"].toInt()),
                           ctx->saved_data["p"].toDouble());
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    auto g = grads[0];
    if (!g.defined()) return {torch::Tensor(), torch::Tensor()};
    if (g.scalar_type() != torch::kFloat32 && g.scalar_type() != torch::kBFloat16)
      g = g.to(torch::kFloat32);
    return {apply_mask(g, dtype, m), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (p >= 1.0) return x * 0.0;
  if (!x.device().is_cpu()) return torch::dropout(x, p, true);
  // fp32 and bf16 (CPU mixed precision) take the fused path; a bf16 input comes out in fp32:
  // 1 / (1 - p) rounded to bf16 would bias every kept element (1.109375 for p = 0.1, 0.16% low).
  // Its outputs go into the fp32 residual stream (or the next product, which autocast casts back).
  if (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kBFloat16)
    return DropoutFn::apply(x, p);
  // Other dtypes (double): the same mask as an fp32 tensor, by LibTorch's multiplication.
  const Mask m = new_mask(p);
  return x *
         apply_mask(torch::ones(x.sizes(), x.options().dtype(torch::kFloat32)), torch::kFloat32, m);
}

}  // namespace headcount::model
