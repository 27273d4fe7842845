#include "headcount/run/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <sstream>

#include <ATen/core/ivalue.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/run_guard.h"

namespace headcount::run {

namespace {
constexpr int kFormatVersion = 1;

fs::path temp_sibling(const fs::path& dst) {
  return dst.parent_path() / fmt::format(".{}.tmp.{}", dst.filename().string(), getpid());
}
}  // namespace

nlohmann::json TrainState::to_json() const {
  return {{"step", step},
          {"epoch", epoch},
          {"batch_in_epoch", batch_in_epoch},
          {"best_score", best_score},
          {"best_step", best_step},
          {"evals_without_improvement", evals_without_improvement},
          {"elapsed_seconds", elapsed_seconds},
          {"target_tokens", target_tokens}};
}

TrainState TrainState::from_json(const nlohmann::json& j) {
  TrainState s;
  s.step = j.at("step").get<int64_t>();
  s.epoch = j.at("epoch").get<int64_t>();
  s.batch_in_epoch = j.at("batch_in_epoch").get<int64_t>();
  s.best_score = j.at("best_score").get<double>();
  s.best_step = j.at("best_step").get<int64_t>();
  s.evals_without_improvement = j.at("evals_without_improvement").get<int64_t>();
  s.elapsed_seconds = j.at("elapsed_seconds").get<double>();
  s.target_tokens = j.at("target_tokens").get<int64_t>();
  return s;
}

namespace {

// torch::pickle_save's archive (the zip format of Python's torch.save) without the type tags it
// adds to dicts (torch.jit._pickle.restore_type_tag): PyTorch 2.6's torch.load, which only
// unpickles tensors and plain containers by default (weights_only=True), refuses those tags.
std::vector<char> pickle_untagged(const c10::IValue& value) {
  std::vector<char> pickle_bytes;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t size) {
        pickle_bytes.insert(pickle_bytes.end(), bytes, bytes + size);
      },
      nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> archive;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t size) {
    const char* p = static_cast<const char*>(bytes);
    archive.insert(archive.end(), p, p + size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickle_bytes.data(), pickle_bytes.size(),
                                     pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return archive;
}

}  // namespace

void save_weights(const fs::path& file,
                  const std::vector<std::pair<std::string, torch::Tensor>>& weights) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : weights) dict.insert(name, t.detach().to(torch::kCPU).contiguous());
  const std::vector<char> bytes = pickle_untagged(dict);
  io::write_file_atomic(file, std::string(bytes.begin(), bytes.end()));
}

std::vector<std::pair<std::string, torch::Tensor>> load_weights_file(const fs::path& file) {
  const std::string bytes = io::read_file(file);
  c10::IValue value;
  try {
    value = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const std::exception& e) {
    HC_FAIL("{}: not a readable weights file (corrupt or truncated?)", file.string());
  }
  HC_CHECK(value.isGenericDict(), "{}: expected a dict of name -> tensor", file.string());
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : value.toGenericDict()) {
    HC_CHECK(item.key().isString() && item.value().isTensor(),
             "{}: expected a dict of name -> tensor", file.string());
    out.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return out;
}

void save_rng_state(const fs::path& file) {
  c10::Dict<std::string, at::Tensor> dict;
  auto gen = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    dict.insert("cpu", gen.get_state());
  }
  const std::vector<char> bytes = pickle_untagged(dict);
  io::write_file_atomic(file, std::string(bytes.begin(), bytes.end()));
}

void load_rng_state(const fs::path& file) {
  const std::string bytes = io::read_file(file);
  c10::IValue value;
  try {
    value = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const std::exception&) {
    HC_FAIL("{}: corrupt random-state file", file.string());
  }
  HC_CHECK(value.isGenericDict(), "{}: corrupt random-state file", file.string());
  auto dict = value.toGenericDict();
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(dict.at("cpu").toTensor());
}

void replace_directory(const fs::path& tmp, const fs::path& dst) {
  std::error_code ec;
  if (!fs::exists(dst, ec)) {
    fs::rename(tmp, dst, ec);
    HC_CHECK(!ec, "cannot move {} to {}: {}", tmp.string(), dst.string(), ec.message());
    return;
  }
  if (renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) != 0) {
    // Without RENAME_EXCHANGE (some file systems): move the old one aside first.
    const fs::path old =
        dst.parent_path() / fmt::format(".{}.old.{}", dst.filename().string(), getpid());
    fs::rename(dst, old, ec);
    HC_CHECK(!ec, "cannot move {} aside: {}", dst.string(), ec.message());
    fs::rename(tmp, dst, ec);
    HC_CHECK(!ec, "cannot move {} to {}: {}", tmp.string(), dst.string(), ec.message());
    fs::remove_all(old, ec);
    return;
  }
  io::crash_point("checkpoint.swapped");
  fs::remove_all(tmp, ec);  // now holds the old contents
}

namespace {

// The vocabulary files a checkpoint carries, by name in vocab/.
std::vector<std::pair<fs::path, std::string>> vocab_entries(const data::VocabFiles& vocab) {
  if (vocab.joint) return {{vocab.src_model, "joint.model"}};
  return {{vocab.src_model, "src.model"}, {vocab.tgt_model, "tgt.model"}};
}

// Runs `write` on the temporary folder `tmp`; on any failure (a full disk, a file too large, a
// LibTorch error) removes `tmp` and reports one error naming `dir` and the cause.
void write_or_clean_up(const fs::path& tmp, const fs::path& dir,
                       const std::function<void()>& write) {
  const auto clean = [&] {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  };
  try {
    write();
  } catch (const Error& e) {
    clean();
    HC_FAIL("cannot write checkpoint {}: {}", dir.string(), e.what());
  } catch (const c10::Error& e) {
    clean();
    HC_FAIL("cannot write checkpoint {}: {}", dir.string(), e.what_without_backtrace());
  } catch (const fs::filesystem_error& e) {
    clean();
    HC_FAIL("cannot write checkpoint {}: {}: {}", dir.string(), e.path1().string(),
            e.code().message());
  } catch (const std::exception& e) {
    clean();
    HC_FAIL("cannot write checkpoint {}: {}", dir.string(), e.what());
  }
}

}  // namespace

void save_checkpoint(const fs::path& dir, model::Transformer& model,
                     torch::optim::Optimizer* optimizer, const TrainState& state,
                     const Config& config, const data::VocabFiles& vocab,
                     const std::function<void(const fs::path&)>& extra) {
  fs::create_directories(dir.parent_path());
  const fs::path tmp = temp_sibling(dir);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  write_or_clean_up(tmp, dir, [&] {
    fs::create_directories(tmp / "vocab");
    save_weights(tmp / "model.pt", model::named_weights(*model));
    if (optimizer) {
      // Serialised in memory, then written like every other file: LibTorch's file writer ends a
      // failed write (ENOSPC) in std::terminate from a destructor.
      std::ostringstream bytes;
      torch::save(*optimizer, bytes);
      io::write_file_atomic(tmp / "optimizer.pt", bytes.str());
      save_rng_state(tmp / "rng.pt");
    }
    io::write_file_atomic(tmp / "state.json", state.to_json().dump(2) + "\n");
    io::write_file_atomic(tmp / "architecture.json",
                          model->architecture().to_json().dump(2) + "\n");
    save_config(config, tmp / "config.yaml");
    nlohmann::json hashes = nlohmann::json::object();
    for (const auto& [from, name] : vocab_entries(vocab)) {
      fs::copy_file(from, tmp / "vocab" / name, fs::copy_options::overwrite_existing);
      hashes[name] = io::hex64(io::hash_file(tmp / "vocab" / name));
    }
    nlohmann::json meta = {{"format", "headcount-checkpoint"},
                           {"format_version", kFormatVersion},
                           {"headcount_version", HEADCOUNT_VERSION},
                           {"vocab_fnv1a", hashes},
                           {"torch_load", "torch.load('model.pt') gives a dict name -> tensor"}};
    io::write_file_atomic(tmp / "meta.json", meta.dump(2) + "\n");
    if (extra) extra(tmp);
  });
  io::crash_point("checkpoint.written");
  replace_directory(tmp, dir);
}

model::Architecture read_architecture(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "architecture.json" : path;
  HC_CHECK(fs::is_regular_file(file, ec),
           "{}: no architecture found (expected a checkpoint folder, a folder holding "
           "architecture.json, or an architecture.json file)",
           path.string());
  try {
    return model::Architecture::from_json(nlohmann::json::parse(io::read_file(file)));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: not a valid architecture: {}", file.string(), e.what());
  }
}

CheckpointInfo read_checkpoint_info(const fs::path& dir) {
  std::error_code ec;
  HC_CHECK(fs::is_directory(dir, ec), "checkpoint {} not found (expected a folder)", dir.string());
  for (const char* f :
       {"meta.json", "model.pt", "state.json", "architecture.json", "config.yaml"}) {
    HC_CHECK(fs::exists(dir / f, ec), "{} is not a headcount checkpoint: {} is missing",
             dir.string(), f);
  }
  CheckpointInfo info;
  info.dir = dir;
  try {
    const auto meta = nlohmann::json::parse(io::read_file(dir / "meta.json"));
    HC_CHECK(meta.value("format", "") == "headcount-checkpoint",
             "{}/meta.json: not a headcount checkpoint", dir.string());
    HC_CHECK(meta.value("format_version", 0) <= kFormatVersion,
             "{}: checkpoint format {} is newer than this headcount reads ({})", dir.string(),
             meta.value("format_version", 0), kFormatVersion);
    info.state = TrainState::from_json(nlohmann::json::parse(io::read_file(dir / "state.json")));
    info.architecture = model::Architecture::from_json(
        nlohmann::json::parse(io::read_file(dir / "architecture.json")));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: corrupt checkpoint metadata: {}", dir.string(), e.what());
  }
  info.config = load_config_file(dir / "config.yaml");
  info.architecture.check_against(info.config.model);
  info.vocab.joint = fs::exists(dir / "vocab" / "joint.model", ec);
  info.vocab.src_model = dir / "vocab" / (info.vocab.joint ? "joint.model" : "src.model");
  info.vocab.tgt_model = dir / "vocab" / (info.vocab.joint ? "joint.model" : "tgt.model");
  // Checkpoints since session 8 record their vocabulary's hashes: a vocab/ file replaced by
  // another one would silently turn every token id into another word.
  const auto meta = nlohmann::json::parse(io::read_file(dir / "meta.json"));
  if (meta.contains("vocab_fnv1a") && meta["vocab_fnv1a"].is_object()) {
    for (const auto& [name, hash] : meta["vocab_fnv1a"].items()) {
      const fs::path f = dir / "vocab" / name;
      HC_CHECK(fs::exists(f, ec), "{} is not a complete checkpoint: vocab/{} is missing",
               dir.string(), name);
      const std::string actual = io::hex64(io::hash_file(f));
      HC_CHECK(hash.is_string() && actual == hash.get<std::string>(),
               "{}: differs from the vocabulary the weights were trained with (FNV-1a {}, the "
               "checkpoint recorded {}): restore the checkpoint's own vocab/ files",
               f.string(), actual, hash.is_string() ? hash.get<std::string>() : hash.dump());
    }
  }
  info.src_vocab_size = data::Vocab::load(info.vocab.src_model).size();
  info.tgt_vocab_size = data::Vocab::load(info.vocab.tgt_model).size();
  return info;
}

model::Transformer load_model(const CheckpointInfo& info, const torch::Device& device) {
  model::Transformer m(info.config.model, info.architecture, info.src_vocab_size,
                       info.tgt_vocab_size);
  model::load_weights(*m, load_weights_file(info.dir / "model.pt"),
                      (info.dir / "model.pt").string());
  m->to(device);
  return m;
}

void load_optimizer(torch::optim::Optimizer& optimizer, const fs::path& dir) {
  const fs::path f = dir / "optimizer.pt";
  std::error_code ec;
  HC_CHECK(fs::exists(f, ec), "{}: no optimizer state (not a training checkpoint?)", dir.string());
  try {
    torch::load(optimizer, f.string());
  } catch (const std::exception& e) {
    HC_FAIL("{}: cannot read the optimizer state (corrupt, or another architecture)", f.string());
  }
}

void copy_checkpoint(const fs::path& src, const fs::path& dst) {
  const fs::path tmp = temp_sibling(dst);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  write_or_clean_up(tmp, dst, [&] {
    fs::create_directories(tmp);
    for (const auto& entry : fs::recursive_directory_iterator(src)) {
      const fs::path rel = fs::relative(entry.path(), src);
      if (entry.is_directory()) {
        fs::create_directories(tmp / rel);
      } else {
        std::error_code link_ec;
        fs::create_hard_link(entry.path(), tmp / rel, link_ec);
        if (link_ec) fs::copy_file(entry.path(), tmp / rel, fs::copy_options::overwrite_existing);
      }
    }
  });
  io::crash_point("checkpoint.copied");
  replace_directory(tmp, dst);
}

}  // namespace headcount::run
