// Data-parallel training over PyTorch's own distributed engine, c10d: a TCPStore rendezvous and a
// Gloo process group (CPU; NCCL when LibTorch has it and the device is CUDA). The environment is
// read exactly as torchrun sets it (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), with
// Slurm's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID as a fallback, so `torchrun --no-python`,
// `srun` and `headcount launch` all start the same `headcount train` / `prune`.
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
  bool distributed() const { return world_size > 1; }
};

// Reads the environment; a malformed variable is a clear error naming it.
Environment environment_from_env();

// A process group for one training run: collectives on tensors of this process's device.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place; sums across ranks.
  virtual void allreduce_sum(std::vector<torch::Tensor>& tensors) = 0;
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;
};

// Rendezvous through a TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 serves it) and a Gloo (CPU)
// or NCCL (CUDA) group. Waits at most `timeout` for the peers, and for any collective.
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
