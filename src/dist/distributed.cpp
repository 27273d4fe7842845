#include "headcount/dist/distributed.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/version.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

// CMake defines these from what the LibTorch in use offers: Gloo's headers (Debian's LibTorch has
// them; the official wheels ship none) and NCCL (the official CUDA LibTorch). Without the
// definitions (an older build folder), the Gloo-only build of before.
#ifndef HEADCOUNT_WITH_GLOO
#define HEADCOUNT_WITH_GLOO 1
#endif
#ifndef HEADCOUNT_WITH_NCCL
#define HEADCOUNT_WITH_NCCL 0
#endif
#if HEADCOUNT_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if HEADCOUNT_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <csignal>
#include <cstdlib>
#include <optional>

#include "headcount/common/check.h"
#include "headcount/common/log.h"

namespace headcount::dist {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, const std::string& value, int min_value) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  HC_CHECK(used == value.size() && v >= min_value,
           "environment variable {}='{}': expected an integer of at least {}", name, value,
           min_value);
  return v;
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

// Holds a process group by its own type: LibTorch 1.13's ProcessGroupGloo derives from
// c10d::ProcessGroup, 2.x's groups from c10d::Backend; all offer the collectives used here.
// NCCL reduces CUDA tensors only: a group with a `staging` device carries other tensors (the
// trainer's token and loss sums, which live on the CPU) there and back.
template <typename Group>
class GroupCommunicator : public Communicator {
 public:
  GroupCommunicator(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<Group> group,
                    int rank, int world, std::optional<torch::Device> staging = std::nullopt)
      : store_(std::move(store)),
        group_(std::move(group)),
        rank_(rank),
        world_(world),
        staging_(staging) {}
  ~GroupCommunicator() override { shut_down(*group_); }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void allreduce_sum(std::vector<torch::Tensor>& tensors) override {
    // One collective per tensor: each tensor is summed across ranks on its own.
    for (auto& t : tensors) {
      std::vector<torch::Tensor> one = {staged(t)};
      run("all-reduce", [&] { return group_->allreduce(one); });
      if (!one[0].is_same(t)) t.copy_(one[0]);
    }
  }
  void broadcast(torch::Tensor& tensor, int root) override {
    std::vector<torch::Tensor> one = {staged(tensor)};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    run("broadcast", [&] { return group_->broadcast(one, o); });
    if (!one[0].is_same(tensor)) tensor.copy_(one[0]);
  }
  void barrier() override {
    c10d::BarrierOptions o;
    // NCCL's barrier is an all-reduce on a GPU: this process's, not one it would guess.
    if (staging_) o.device_ids = {staging_->index()};
    run("barrier", [&] { return group_->barrier(o); });
  }

 private:
  torch::Tensor staged(const torch::Tensor& t) const {
    return staging_ && t.device() != *staging_ ? t.to(*staging_) : t;
  }
  template <typename F>
  void run(const char* what, F&& start) {
    try {
      auto work = start();
      work->wait();
    } catch (const std::exception& e) {
      HC_FAIL(
          "distributed {} failed on rank {} of {}: a peer stopped or cannot be reached "
          "({}). Resume from the last checkpoint (any number of processes works)",
          what, rank_, world_, first_line(e.what()));
    }
  }
  template <typename G>
  static void shut_down(G& /*group*/) {}
#if HEADCOUNT_WITH_NCCL && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))
  // NCCL's communicators are flushed and destroyed before the group goes (2.4 and later warn
  // about a group destroyed without it).
  static void shut_down(c10d::ProcessGroupNCCL& group) {
    try {
      group.shutdown();
    } catch (const std::exception& e) {
      log::debug("distributed: NCCL shutdown: {}", first_line(e.what()));
    }
  }
#endif
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<Group> group_;
  int rank_, world_;
  std::optional<torch::Device> staging_;
};

}  // namespace

Environment environment_from_env() {
  Environment e;
  if (const auto ws = env("WORLD_SIZE")) {
    e.source = "torchrun";
    e.world_size = env_int("WORLD_SIZE", *ws, 1);
    const auto r = env("RANK");
    HC_CHECK(r.has_value(), "WORLD_SIZE={} is set but RANK is not (set both, as torchrun does)",
             e.world_size);
    e.rank = env_int("RANK", *r, 0);
    if (const auto lr = env("LOCAL_RANK")) e.local_rank = env_int("LOCAL_RANK", *lr, 0);
  } else if (const auto n = env("SLURM_NTASKS")) {
    e.source = "slurm";
    e.world_size = env_int("SLURM_NTASKS", *n, 1);
    const auto r = env("SLURM_PROCID");
    HC_CHECK(r.has_value(), "SLURM_NTASKS={} is set but SLURM_PROCID is not", e.world_size);
    e.rank = env_int("SLURM_PROCID", *r, 0);
    if (const auto lr = env("SLURM_LOCALID")) e.local_rank = env_int("SLURM_LOCALID", *lr, 0);
  }
  HC_CHECK(e.rank < e.world_size, "rank {} is not below the world size {} (from {} variables)",
           e.rank, e.world_size, e.source);
  if (const auto a = env("MASTER_ADDR")) e.master_addr = *a;
  if (const auto p = env("MASTER_PORT")) e.master_port = env_int("MASTER_PORT", *p, 1);
  HC_CHECK(e.master_port < 65536, "MASTER_PORT={}: expected a TCP port below 65536", e.master_port);
  if (e.distributed() && e.source == "slurm" && !env("MASTER_ADDR")) {
    log::warn(
        "Slurm: MASTER_ADDR is not set; using {} (set it to the first node of the job, e.g. "
        "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1))",
        e.master_addr);
  }
  return e;
}

std::string backend_for(const torch::Device& device) {
  if (device.is_cuda()) return HEADCOUNT_WITH_NCCL ? "nccl" : "";
  if (device.is_cpu()) return HEADCOUNT_WITH_GLOO ? "gloo" : "";
  return "";
}

torch::Device process_device(const torch::Device& device, const Environment& env,
                             int64_t cuda_devices) {
  if (!device.is_cuda() || !env.distributed()) return device;
  HC_CHECK(!device.has_index(),
           "device: {} puts every process of a data-parallel run on one GPU; use device: cuda "
           "(each process takes the GPU of its local rank, cuda:LOCAL_RANK)",
           device.str());
  // One visible GPU per process: the launcher chose it (srun --gpus-per-task=1, or
  // CUDA_VISIBLE_DEVICES per process).
  if (cuda_devices == 1) return torch::Device(torch::kCUDA, 0);
  HC_CHECK(env.local_rank < cuda_devices,
           "local rank {} ({} environment) but this process sees {} CUDA device(s): start at most "
           "one process per GPU on each machine",
           env.local_rank, env.source, cuda_devices);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
}

namespace {

// The process group's backend for `device`; refused before the rendezvous where this build has
// none: every rank fails alike and at once, instead of waiting for peers that fail too.
std::string checked_backend(const torch::Device& device) {
  const std::string backend = backend_for(device);
  if (!backend.empty()) return backend;
  const std::string offers = HEADCOUNT_WITH_NCCL && HEADCOUNT_WITH_GLOO ? "Gloo and NCCL"
                             : HEADCOUNT_WITH_NCCL                      ? "NCCL (CUDA) only"
                             : HEADCOUNT_WITH_GLOO                      ? "Gloo (CPU) only"
                                                                        : "neither Gloo nor NCCL";
  if (device.is_cuda()) {
    HC_FAIL(
        "distributed training on CUDA needs a LibTorch built with NCCL (the official CUDA "
        "LibTorch); this build offers {}: use device: cpu",
        offers);
  }
  HC_FAIL(
      "distributed training on {} needs LibTorch's Gloo process group, whose headers this "
      "LibTorch lacks (the official wheels ship none); this build offers {}{}",
      device.str(), offers,
      HEADCOUNT_WITH_NCCL ? ": use device: cuda (one GPU per process)"
                          : ": build headcount against Debian's libtorch-dev for CPU training");
}

// The TCPStore every rank meets at (rank 0 serves it).
c10::intrusive_ptr<c10d::Store> rendezvous(const Environment& e, std::chrono::seconds timeout) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(e.master_port);
  so.isServer = e.rank == 0;
  so.numWorkers = static_cast<std::size_t>(e.world_size);
  so.waitWorkers = true;
  so.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  // 2.4 made libuv the default backend; builds without libuv (Debian's) refuse it. The classic
  // backend serves a handful of processes as well.
  so.useLibUV = false;
#endif
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(e.master_addr, so);
  } catch (const std::exception& ex) {
    HC_FAIL("distributed rendezvous failed (rank {} of {}, TCPStore at {}:{}, timeout {} s): {}",
            e.rank, e.world_size, e.master_addr, e.master_port, timeout.count(),
            first_line(ex.what()));
  }
  return store;
}

[[noreturn]] void fail_group(const std::string& backend, const Environment& e,
                             const std::exception& ex) {
  HC_FAIL("distributed: cannot set up the {} group (rank {} of {}): {}", backend, e.rank,
          e.world_size, first_line(ex.what()));
}

#if HEADCOUNT_WITH_NCCL
std::shared_ptr<Communicator> nccl_communicator(const std::string& backend,
                                                const c10::intrusive_ptr<c10d::Store>& store,
                                                const Environment& e, const torch::Device& device,
                                                std::chrono::milliseconds ms) {
  HC_CHECK(device.has_index(), "distributed: NCCL needs this process's GPU, not {}", device.str());
  // The current device is where NCCL puts its communicator and streams, and where "cuda"
  // without an index lands: this rank's GPU, not cuda:0 for every rank.
  c10::cuda::set_device(device.index());
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = ms;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group;
  try {
    group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, e.rank, e.world_size, options);
  } catch (const std::exception& ex) {
    fail_group(backend, e, ex);
  }
  return std::make_shared<GroupCommunicator<c10d::ProcessGroupNCCL>>(store, group, e.rank,
                                                                     e.world_size, device);
}
#endif

#if HEADCOUNT_WITH_GLOO
std::shared_ptr<Communicator> gloo_communicator(const std::string& backend,
                                                const c10::intrusive_ptr<c10d::Store>& store,
                                                const Environment& e,
                                                std::chrono::milliseconds ms) {
  auto options = c10d::ProcessGroupGloo::Options::create(ms);
  const bool loopback = e.master_addr == "127.0.0.1" || e.master_addr == "localhost";
  options->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                      : c10d::ProcessGroupGloo::createDefaultDevice());
  options->threads = 1;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  try {
    group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, e.rank, e.world_size, options);
  } catch (const std::exception& ex) {
    fail_group(backend, e, ex);
  }
  return std::make_shared<GroupCommunicator<c10d::ProcessGroupGloo>>(store, group, e.rank,
                                                                     e.world_size);
}
#endif

}  // namespace

std::shared_ptr<Communicator> connect(const Environment& e, const torch::Device& device,
                                      std::chrono::seconds timeout) {
  const std::string backend = checked_backend(device);
  // A peer that dies leaves its sockets closed: the store's and Gloo's next write to them would
  // raise SIGPIPE and kill this process silently (as a Python process, which ignores SIGPIPE,
  // never is). Ignored, the write fails with EPIPE, which the group reports as an error naming
  // the peer (see GroupCommunicator). Only a distributed run ignores it: elsewhere `| head`
  // should still end headcount.
  std::signal(SIGPIPE, SIG_IGN);
  const c10::intrusive_ptr<c10d::Store> store = rendezvous(e, timeout);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
#if HEADCOUNT_WITH_NCCL
  if (device.is_cuda()) return nccl_communicator(backend, store, e, device, ms);
#endif
#if HEADCOUNT_WITH_GLOO
  return gloo_communicator(backend, store, e, ms);
#else
  (void)ms;
  HC_FAIL("distributed: no process group for {} in this build", device.str());
#endif
}

int64_t allreduce_gradients(Communicator& comm, const std::vector<torch::Tensor>& params,
                            int64_t bucket_bytes) {
  int64_t sent = 0;
  std::vector<torch::Tensor> bucket;
  int64_t bucket_size = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<torch::Tensor> flat;
    for (auto& g : bucket) flat.push_back(g.reshape(-1));
    std::vector<torch::Tensor> one = {torch::cat(flat)};
    comm.allreduce_sum(one);
    int64_t offset = 0;
    for (auto& g : bucket) {
      const int64_t n = g.numel();
      g.copy_(one[0].narrow(0, offset, n).view_as(g));
      offset += n;
    }
    sent += one[0].numel() * static_cast<int64_t>(one[0].element_size());
    bucket.clear();
    bucket_size = 0;
  };
  for (const auto& p : params) {
    auto& grad = const_cast<torch::Tensor&>(p).mutable_grad();
    if (!grad.defined()) grad = torch::zeros_like(p);
    // Tensors of another dtype start their own bucket (one cat per dtype).
    if (!bucket.empty() && bucket.front().scalar_type() != grad.scalar_type()) flush();
    bucket.push_back(grad);
    bucket_size += grad.numel() * static_cast<int64_t>(grad.element_size());
    if (bucket_size >= bucket_bytes) flush();
  }
  flush();
  return sent;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  HC_CHECK(fd >= 0, "cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  HC_CHECK(ok, "cannot find a free TCP port on 127.0.0.1");
  return ntohs(addr.sin_port);
}

}  // namespace headcount::dist
