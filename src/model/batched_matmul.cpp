#include "headcount/model/batched_matmul.h"

#include <torch/autograd.h>

#include <ATen/Parallel.h>

#include <vector>

namespace headcount::model {
namespace {

// One matrix: C [M x N] (row-major, contiguous) = A [M x K] (element (i, k) at
// a[i * a_row + k * a_col]) times Bp [K x N] (packed row-major). A register block of R rows x 16
// columns is accumulated over all of K before it is stored; GCC's vector extensions keep it
// portable (eight-wide AVX registers in the AVX2/FMA build, pairs of SSE registers otherwise).
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));

__attribute__((always_inline)) inline v8 load8(const float* p) {
  return *reinterpret_cast<const v8u*>(p);
}
__attribute__((always_inline)) inline void store8(float* p, v8 v) {
  *reinterpret_cast<v8u*>(p) = v;
}

template <int R>
__attribute__((always_inline)) inline void gemm_rows(int64_t N, int64_t K, const float* a,
                                                     int64_t a_row, int64_t a_col, const float* bp,
                                                     float* c) {
  int64_t j = 0;
  for (; j + 16 <= N; j += 16) {
    v8 lo[R], hi[R];
    for (int r = 0; r < R; ++r) lo[r] = hi[r] = v8{};
    for (int64_t k = 0; k < K; ++k) {
      const v8 b0 = load8(bp + k * N + j), b1 = load8(bp + k * N + j + 8);
      for (int r = 0; r < R; ++r) {
        const float av = a[r * a_row + k * a_col];
        lo[r] += av * b0;
        hi[r] += av * b1;
      }
    }
    for (int r = 0; r < R; ++r) {
      store8(c + r * N + j, lo[r]);
      store8(c + r * N + j + 8, hi[r]);
    }
  }
  for (; j + 8 <= N; j += 8) {
    v8 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = v8{};
    for (int64_t k = 0; k < K; ++k) {
      const v8 b0 = load8(bp + k * N + j);
      for (int r = 0; r < R; ++r) acc[r] += a[r * a_row + k * a_col] * b0;
    }
    for (int r = 0; r < R; ++r) store8(c + r * N + j, acc[r]);
  }
  for (; j < N; ++j) {
    for (int r = 0; r < R; ++r) {
      float sum = 0.f;
      for (int64_t k = 0; k < K; ++k) sum += a[r * a_row + k * a_col] * bp[k * N + j];
      c[r * N + j] = sum;
    }
  }
}

__attribute__((always_inline)) inline void gemm_body(int64_t M, int64_t N, int64_t K,
                                                     const float* a, int64_t a_row, int64_t a_col,
                                                     const float* bp, float* c) {
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) gemm_rows<4>(N, K, a + i * a_row, a_row, a_col, bp, c + i * N);
  for (; i < M; ++i) gemm_rows<1>(N, K, a + i * a_row, a_row, a_col, bp, c + i * N);
}

void gemm_generic(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_row, int64_t a_col,
                  const float* bp, float* c) {
  gemm_body(M, N, K, a, a_row, a_col, bp, c);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HC_HAVE_AVX2_CLONE 1
__attribute__((target("avx2,fma"))) void gemm_avx2(int64_t M, int64_t N, int64_t K, const float* a,
                                                   int64_t a_row, int64_t a_col, const float* bp,
                                                   float* c) {
  gemm_body(M, N, K, a, a_row, a_col, bp, c);
}
#endif

using GemmFn = void (*)(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                        float*);

GemmFn pick_gemm() {
#ifdef HC_HAVE_AVX2_CLONE
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return gemm_avx2;
#endif
  return gemm_generic;
}

const GemmFn kGemm = pick_gemm();

// a, b as 4-D views [P, Q, M, K] and [P, Q, K, N] (equal P, Q); any strides.
torch::Tensor bmm_kernel(const torch::Tensor& a_in, const torch::Tensor& b_in) {
  const bool three = a_in.dim() == 3;
  const auto a = three ? a_in.unsqueeze(0) : a_in;
  const auto b = three ? b_in.unsqueeze(0) : b_in;
  const int64_t P = a.size(0), Q = a.size(1), M = a.size(2), K = a.size(3), N = b.size(3);
  auto c = torch::empty({P, Q, M, N}, a.options());
  if (c.numel() == 0) return three ? c.squeeze(0) : c;
  if (K == 0) return three ? c.zero_().squeeze(0) : c.zero_();
  const float* ap = a.data_ptr<float>();
  const float* bptr = b.data_ptr<float>();
  float* cp = c.data_ptr<float>();
  const int64_t as0 = a.stride(0), as1 = a.stride(1), a_row = a.stride(2), a_col = a.stride(3);
  const int64_t bs0 = b.stride(0), bs1 = b.stride(1), b_row = b.stride(2), b_col = b.stride(3);
  // Batches are independent: split them over LibTorch's intra-op threads (one by default).
  at::parallel_for(0, P * Q, 16, [&](int64_t begin, int64_t end) {
    // B is used in place when it is already packed (row-major, rows back to back); otherwise
    // copied into that layout once per matrix.
    const bool packed_already = b_col == 1 && b_row == N;
    std::vector<float> packed(packed_already ? 0 : static_cast<size_t>(K * N));
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t p = idx / Q, q = idx % Q;
      const float* bm = bptr + p * bs0 + q * bs1;
      const float* bp = bm;
      if (!packed_already) {
        float* dst = packed.data();
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = 0; j < N; ++j) dst[k * N + j] = bm[k * b_row + j * b_col];
        bp = dst;
      }
      kGemm(M, N, K, ap + p * as0 + q * as1, a_row, a_col, bp, cp + idx * M * N);
    }
  });
  return three ? c.squeeze(0) : c;
}

struct BatchedMatmulFn : torch::autograd::Function<BatchedMatmulFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                               const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return bmm_kernel(a, b);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& a = saved[0];
    const auto& b = saved[1];
    const auto& g = grads[0];
    torch::Tensor ga, gb;
    if (ctx->needs_input_grad(0)) ga = bmm_kernel(g, b.transpose(-2, -1));  // dA = dC B^T
    if (ctx->needs_input_grad(1)) gb = bmm_kernel(a.transpose(-2, -1), g);  // dB = A^T dC
    return {ga, gb};
  }
};

}  // namespace

bool batched_matmul_fast_path(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.device().is_cpu() || !b.device().is_cpu()) return false;
  if (a.scalar_type() != torch::kFloat32 || b.scalar_type() != torch::kFloat32) return false;
  if (a.dim() != b.dim() || a.dim() < 3 || a.dim() > 4) return false;
  if (a.size(-1) != b.size(-2)) return false;
  for (int64_t d = 0; d + 2 < a.dim(); ++d)
    if (a.size(d) != b.size(d)) return false;
  return true;
}

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (!batched_matmul_fast_path(a, b)) return torch::matmul(a, b);
  if (torch::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad()))
    return BatchedMatmulFn::apply(a, b);
  return bmm_kernel(a, b);
}

}  // namespace headcount::model
