// Batched matrix product for attention's many small matrices (B x H matrices of T x Dh).
//
// LibTorch 1.13's CPU bmm multiplies such batches one matrix at a time through the full operator
// dispatch (three `select`s, `resolve_conj` and a BLAS call per matrix): in a d=256 training step
// it took ~29% of the time for ~2% of the FLOPs. This product walks the batch itself with a
// register-blocked kernel (AVX2/FMA when the processor has them, chosen at run time), takes
// transposed views without copying them, and has its own backward (dA = dC B^T, dB = A^T dC).
// Off the CPU, for other dtypes or shapes, it is torch::matmul.
#pragma once

#include <torch/types.h>

namespace headcount::model {

// a [..., M, K] @ b [..., K, N] -> [..., M, N]; the leading (batch) sizes of a and b must be
// equal (one or two of them) for the fast path; anything else goes to torch::matmul.
torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

// Whether batched_matmul(a, b) takes the CPU kernel (for tests and benchmarks).
bool batched_matmul_fast_path(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace headcount::model
