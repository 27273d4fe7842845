#include "headcount/run/average.h"

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/model/transformer.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"

namespace headcount::run {

namespace {

using Weights = std::vector<std::pair<std::string, torch::Tensor>>;

std::string shape(const torch::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

// That `info` is a checkpoint of the same model as `first`: architecture, vocabularies, weights.
void check_same_model(const CheckpointInfo& first, const CheckpointInfo& info) {
  HC_CHECK(info.architecture == first.architecture,
           "{} has heads {} (enc/dec/enc-dec), {} has {}: only checkpoints of one model (the "
           "same architecture) can be averaged",
           info.dir.string(), info.architecture.summary(), first.dir.string(),
           first.architecture.summary());
  const std::pair<fs::path, fs::path> vocabs[] = {{first.vocab.src_model, info.vocab.src_model},
                                                  {first.vocab.tgt_model, info.vocab.tgt_model}};
  for (const auto& [a, b] : vocabs)
    HC_CHECK(io::read_file(a) == io::read_file(b),
             "{} has another vocabulary than {} ({} differs from {}): its token ids mean other "
             "pieces, so its weights cannot be averaged with the others",
             info.dir.string(), first.dir.string(), b.string(), a.string());
}

// Adds `weights` (of checkpoint `dir`) to `sums`, which the first checkpoint's weights started;
// names, shapes and non-floating tensors must match theirs.
void accumulate(Weights& sums, const Weights& weights, const fs::path& dir, const fs::path& first) {
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& [name, t] : weights) by_name[name] = &t;
  HC_CHECK(by_name.size() == sums.size(), "{} holds {} weight tensors, {} holds {}", dir.string(),
           by_name.size(), first.string(), sums.size());
  for (auto& [name, sum] : sums) {
    const auto it = by_name.find(name);
    HC_CHECK(it != by_name.end(), "{} has no weight {} (which {} has)", dir.string(), name,
             first.string());
    const torch::Tensor& t = *it->second;
    HC_CHECK(t.sizes() == sum.sizes(), "{}: weight {} has shape {}, {} has {}", dir.string(), name,
             shape(t), first.string(), shape(sum));
    if (torch::isFloatingType(t.scalar_type())) {
      sum.add_(t.to(torch::kDouble));
    } else {
      HC_CHECK(torch::equal(t, sum),
               "{}: weight {} ({}) differs from {}'s and is not a "
               "floating-point tensor, which averaging could not mean",
               dir.string(), name, std::string(c10::toString(t.scalar_type())), first.string());
    }
  }
}

}  // namespace

AveragedCheckpoint average_checkpoints(const std::vector<fs::path>& checkpoints,
                                       const fs::path& out) {
  HC_CHECK(!checkpoints.empty(), "no checkpoints to average");
  std::error_code ec;
  HC_CHECK(!fs::exists(out, ec) || fs::is_empty(out, ec),
           "{} exists and is not empty: refusing to overwrite it", out.string());
  std::vector<CheckpointInfo> infos;
  for (const auto& dir : checkpoints) {
    for (const auto& seen : infos)
      HC_CHECK(!fs::equivalent(seen.dir, dir, ec), "{} is given twice: each checkpoint counts once",
               dir.string());
    require_ungated(dir, "averaging");
    infos.push_back(read_checkpoint_info(dir));
    check_same_model(infos.front(), infos.back());
  }
  torch::NoGradGuard no_grad;
  const fs::path first = infos.front().dir;
  Weights sums = load_weights_file(CheckpointFolder{first}.weights());
  std::map<std::string, torch::ScalarType> types;
  for (auto& [name, t] : sums) {
    types[name] = t.scalar_type();
    if (torch::isFloatingType(t.scalar_type())) t = t.to(torch::kDouble).clone();
  }
  for (size_t i = 1; i < infos.size(); ++i)
    accumulate(sums, load_weights_file(CheckpointFolder{infos[i].dir}.weights()), infos[i].dir,
               first);
  const double n = static_cast<double>(infos.size());
  for (auto& [name, t] : sums)
    if (torch::isFloatingType(types[name])) t = (t / n).to(types[name]);

  AveragedCheckpoint result;
  size_t newest = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    result.steps.push_back(infos[i].state.step);
    if (infos[i].state.step >= infos[newest].state.step) newest = i;
  }
  const CheckpointInfo& base = infos[newest];
  auto model = model::Transformer(base.config.model, base.architecture, base.src_vocab_size,
                                  base.tgt_vocab_size);
  model::load_weights(*model, sums, "the averaged weights");
  nlohmann::json record = {{"averaged", nlohmann::json::array()}};
  for (const auto& info : infos)
    record["averaged"].push_back(
        {{"checkpoint", fs::absolute(info.dir).lexically_normal().string()},
         {"step", info.state.step}});
  save_checkpoint(out, model, nullptr, base.state, base.config, base.vocab,
                  [&](const fs::path& tmp) {
                    io::write_file_atomic(tmp / "averaged.json", record.dump(2) + "\n");
                  });
  result.architecture = base.architecture;
  result.step = base.state.step;
  return result;
}

std::vector<fs::path> last_step_checkpoints(const fs::path& run_dir, int count) {
  HC_CHECK(count >= 1, "--last must be at least 1 (got {})", count);
  const RunFolder run{run_dir};
  std::vector<int64_t> steps = run.checkpoint_steps();
  std::sort(steps.begin(), steps.end());
  HC_CHECK(static_cast<int>(steps.size()) >= count,
           "{} keeps {} step-N checkpoint(s) in {}, fewer than the {} asked for (a run keeps the "
           "newest train.keep_last of them)",
           run_dir.string(), steps.size(), run.checkpoints().string(), count);
  std::vector<fs::path> dirs;
  for (size_t i = steps.size() - static_cast<size_t>(count); i < steps.size(); ++i)
    dirs.push_back(run.step_checkpoint(steps[i]));
  return dirs;
}

}  // namespace headcount::run
