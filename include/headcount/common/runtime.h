// Process-wide runtime set-up: thread counts, the BLAS check, device choice.
#pragma once

#include <torch/types.h>

#include <string>

#include "headcount/common/config.h"

namespace headcount::runtime {

struct BlasInfo {
  std::string library;  // the shared object that provides BLAS (resolved path)
  std::string vendor;   // "OpenBLAS ...", "reference BLAS", ...
  double gflops = 0;    // measured single-precision matmul speed
  bool slow = false;    // below what any optimised BLAS reaches on one core
};

int num_cores();
// LibTorch intra-op threads for the config: threads.intra_op when positive, one per core for 0;
// for -1 (auto) one per core when the matrix products run in bf16 (oneDNN runs them on LibTorch's
// threads; experiments/bf16), else one (OpenBLAS's own threads run the fp32 products;
// experiments/threads).
int intra_op_threads(const ThreadsConfig& threads, bool bf16);
// Sets LibTorch intra-/inter-op threads and OpenBLAS threads from the config (0 = one per core),
// then checks the BLAS once per process and warns loudly when it is a slow (reference) one.
void apply_threads(const ThreadsConfig& threads, bool bf16 = false);
// Identifies the BLAS and times a float matmul (a few tens of milliseconds).
BlasInfo probe_blas();

// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from the CPU's model number when
// it is loaded. A CPU newer than the OpenBLAS build gets a generic pre-AVX2 fallback: Debian 12's
// 0.3.21 runs Intel family 6 model 207 (a 5th-generation Xeon) on its Prescott (SSE3) kernels, at
// 64 instead of 290 GFLOP/s, and a training step at 40% of the speed (experiments/blas-kernels).
//
// The kernel set OpenBLAS should be told to use (OPENBLAS_CORETYPE), or "" to keep its choice:
// `chosen` is the set OpenBLAS picked (openblas_get_corename(), any case; "" for another BLAS),
// `cpu` the CPU's features (as the operating system enables them). A fallback without AVX2 on a
// CPU with AVX2 and FMA is replaced by "SkylakeX" where the CPU has AVX-512 F/CD/BW/DQ/VL, else
// "Haswell". A user's OPENBLAS_CORETYPE is never replaced (restart_with_better_blas_kernels).
struct CpuVectorFeatures {
  bool avx2_fma = false;
  bool avx512_skx = false;  // AVX-512 F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use
};
std::string better_openblas_coretype(const std::string& chosen, const CpuVectorFeatures& cpu);
// This CPU's features (GCC's __builtin_cpu_supports).
CpuVectorFeatures cpu_vector_features();
// The kernel set the loaded OpenBLAS runs ("" when the BLAS is not OpenBLAS).
std::string openblas_corename();
// Called first in main(): when OpenBLAS has fallen back to kernels the CPU outgrew (above), sets
// OPENBLAS_CORETYPE and re-executes the program with the same arguments (OpenBLAS reads it only
// when it is loaded). Returns only when nothing needed changing or the re-execution failed. The
// restarted process finds the variable set and keeps it, so this happens at most once; processes
// it starts (sweeps, launch) inherit it.
void restart_with_better_blas_kernels(char** argv);
// What restart_with_better_blas_kernels did, for `bench blas` and the logs: "" when nothing, else
// "OpenBLAS chose its Prescott kernels for this CPU, which it does not recognise;
// OPENBLAS_CORETYPE=SkylakeX set by headcount".
std::string blas_kernel_note();
// Warns loudly (once per process) when the BLAS is slow. Free when OpenBLAS is loaded; otherwise
// it times a small matmul. Every command calls it at start-up.
void warn_if_slow_blas();
// OpenBLAS's own thread count (nothing for another BLAS).
void set_blas_threads(int n);
// Keeps freed memory in the process for reuse instead of returning it to the operating system
// (glibc: no mmap'd chunks, no trimming of the heap). A training step frees and re-allocates the
// same large tensors every step (64 MB of logits, 8 MB FFN activations); served by fresh mmaps
// each time, every page is faulted in again, which costs more than the arithmetic on virtual
// machines with slow page faults (experiments/bench-vs-pytorch/README.md has the measurement).
// The resident size then stays at its peak, as with PyTorch's GPU caching allocator.
// HEADCOUNT_RETURN_MEMORY=1 keeps glibc's defaults. Returns whether the settings were applied.
bool keep_freed_memory();
// "auto" picks CUDA when LibTorch sees a GPU, else the CPU. A CUDA device on a machine without
// one is an error.
torch::Device resolve_device(const std::string& name);

}  // namespace headcount::runtime
