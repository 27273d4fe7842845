// Data-parallel training over PyTorch's own distributed engine, c10d: a TCPStore rendezvous and a
// process group, Gloo on the CPU (where LibTorch ships Gloo's headers: Debian's does, the official
// wheels do not) and NCCL on CUDA (where LibTorch was built with it: the official CUDA LibTorch),
// one GPU per process. The environment is read exactly as torchrun sets it (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), with Slurm's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID
// as a fallback, so `torchrun --no-python`, `srun` and `headcount launch` all start the same
// `headcount train` / `prune`.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace headcount::dist {

struct Environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source;  // "torchrun", "slurm" or "" (one process)
  // A group is formed for several processes, and for one that a launcher started as a group of
  // one (torchrun's or `launch`'s WORLD_SIZE=1, as PyTorch's DDP does); Slurm's SLURM_NTASKS=1 is
  // any single-task job, not a request for a group.
  bool distributed() const { return world_size > 1 || source == "torchrun"; }
};

// Reads the environment; a malformed variable is a clear error naming it.
Environment environment_from_env();

// A process group for one training run: collectives on tensors of this process's device (CPU
// tensors too where the group is NCCL's: they travel through the GPU).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place; each tensor is summed across ranks.
  virtual void allreduce_sum(std::vector<torch::Tensor>& tensors) = 0;
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;
};

// The process group this build offers for tensors on `device`: "gloo" (CPU), "nccl" (CUDA), or
// "" where it has none (distributed training on that device is then refused).
std::string backend_for(const torch::Device& device);

// The device one process of a data-parallel run trains on, given the device its config resolved
// to (runtime::resolve_device) and `cuda_devices`, the GPUs this process sees: on CUDA one GPU per
// process, cuda:LOCAL_RANK, or cuda:0 where each process sees only its own (srun
// --gpus-per-task=1, CUDA_VISIBLE_DEVICES per process); the CPU, and a single process, unchanged.
// A GPU named in the config (cuda:N) would hold every process: an error, as is a local rank
// without a GPU of its own.
torch::Device process_device(const torch::Device& device, const Environment& env,
                             int64_t cuda_devices);

// Rendezvous through a TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 serves it) and a Gloo (CPU)
// or NCCL (CUDA) group; for NCCL, `device` (from process_device) becomes this process's current
// CUDA device. Waits at most `timeout` for the peers, and for any collective. A device whose
// group this build lacks is a clear error before the rendezvous.
std::shared_ptr<Communicator> connect(const Environment& env, const torch::Device& device,
                                      std::chrono::seconds timeout);

// Sums the gradients of `params` across ranks in buckets of about `bucket_bytes` (one all-reduce
// per bucket, not one per tensor). Parameters without a gradient get zeros first, so that every
// rank sends the same layout. Returns the bytes this rank sent into all-reduce.
int64_t allreduce_gradients(Communicator& comm, const std::vector<torch::Tensor>& params,
                            int64_t bucket_bytes = 25 << 20);

// A free TCP port on 127.0.0.1 (for `headcount launch`).
int free_port();

}  // namespace headcount::dist
