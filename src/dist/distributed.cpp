#include "headcount/dist/distributed.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/version.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

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

// Holds the Gloo group by its own type: LibTorch 1.13's ProcessGroupGloo derives from
// c10d::ProcessGroup, 2.x's from c10d::Backend; both offer the collectives used here.
class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::Store> store,
                   c10::intrusive_ptr<c10d::ProcessGroupGloo> group, int rank, int world)
      : store_(std::move(store)), group_(std::move(group)), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void allreduce_sum(std::vector<torch::Tensor>& tensors) override {
    run("all-reduce", [&] { return group_->allreduce(tensors); });
  }
  void broadcast(torch::Tensor& tensor, int root) override {
    std::vector<torch::Tensor> t = {tensor};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    run("broadcast", [&] { return group_->broadcast(t, o); });
  }
  void barrier() override {
    run("barrier", [&] { return group_->barrier(); });
  }

 private:
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
  static std::string first_line(const std::string& s) {
    const size_t nl = s.find('\n');
    return nl == std::string::npos ? s : s.substr(0, nl);
  }
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  int rank_, world_;
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

std::shared_ptr<Communicator> connect(const Environment& e, const torch::Device& device,
                                      std::chrono::seconds timeout) {
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
            std::string(ex.what()).substr(0, std::string(ex.what()).find('\n')));
  }
  if (device.is_cuda()) {
    HC_FAIL(
        "distributed training on CUDA needs LibTorch built with NCCL; this build offers Gloo "
        "only: use device: cpu, or build headcount against the official CUDA LibTorch");
  }
  auto options = c10d::ProcessGroupGloo::Options::create(
      std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
  const bool loopback = e.master_addr == "127.0.0.1" || e.master_addr == "localhost";
  options->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                      : c10d::ProcessGroupGloo::createDefaultDevice());
  options->threads = 1;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  try {
    group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, e.rank, e.world_size, options);
  } catch (const std::exception& ex) {
    HC_FAIL("distributed: cannot set up the Gloo group (rank {} of {}): {}", e.rank, e.world_size,
            std::string(ex.what()).substr(0, std::string(ex.what()).find('\n')));
  }
  return std::make_shared<GlooCommunicator>(store, group, e.rank, e.world_size);
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
