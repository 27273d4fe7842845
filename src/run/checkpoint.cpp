#include "headcount/run/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include <ATen/core/ivalue.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/run_guard.h"
#include "headcount/run/checkpoint_files.h"

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

namespace {

// One field of state.json, present and of its type; errors name the file and the field.
int64_t integer_field(const nlohmann::json& j, const char* key, const std::string& file) {
  HC_CHECK(j.is_object() && j.contains(key), "{}: no '{}' field", file, key);
  const auto& v = j.at(key);
  HC_CHECK(v.is_number_integer(), "{}: '{}' is {}, expected an integer", file, key, v.dump());
  return v.get<int64_t>();
}
double number_field(const nlohmann::json& j, const char* key, const std::string& file) {
  HC_CHECK(j.is_object() && j.contains(key), "{}: no '{}' field", file, key);
  const auto& v = j.at(key);
  HC_CHECK(v.is_number() && std::isfinite(v.get<double>()), "{}: '{}' is {}, expected a number",
           file, key, v.dump());
  return v.get<double>();
}

}  // namespace

TrainState TrainState::from_json(const nlohmann::json& j, const std::string& file) {
  TrainState s;
  s.step = integer_field(j, "step", file);
  s.epoch = integer_field(j, "epoch", file);
  s.batch_in_epoch = integer_field(j, "batch_in_epoch", file);
  s.best_score = number_field(j, "best_score", file);
  s.best_step = integer_field(j, "best_step", file);
  s.evals_without_improvement = integer_field(j, "evals_without_improvement", file);
  s.elapsed_seconds = number_field(j, "elapsed_seconds", file);
  s.target_tokens = integer_field(j, "target_tokens", file);
  // What a training run can have written: a state outside these ranges would be resumed as it is
  // (a negative step trains a finished run again and replaces its best).
  const auto expect = [&](bool ok, const char* key, auto value, const std::string& expected) {
    HC_CHECK(ok,
             "{}: '{}' is {}, expected {} (a damaged or edited checkpoint: restore it from a "
             "copy, or use another checkpoint)",
             file, key, value, expected);
  };
  expect(s.step >= 0, "step", s.step, ">= 0");
  // Every epoch takes at least one step (the training set is never empty).
  expect(s.epoch >= 0 && s.epoch <= s.step, "epoch", s.epoch,
         fmt::format("between 0 and the step ({})", s.step));
  expect(s.batch_in_epoch >= 0, "batch_in_epoch", s.batch_in_epoch, ">= 0");
  expect(s.best_step >= -1 && s.best_step <= s.step, "best_step", s.best_step,
         fmt::format("-1 (no evaluation yet) or a step up to the step ({})", s.step));
  expect(s.evals_without_improvement >= 0, "evals_without_improvement", s.evals_without_improvement,
         ">= 0");
  expect(s.elapsed_seconds >= 0, "elapsed_seconds", s.elapsed_seconds, ">= 0");
  expect(s.target_tokens >= 0, "target_tokens", s.target_tokens, ">= 0");
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

namespace {

// meta.json's "files_xxh64" in `dir`; nullopt where `dir` records none (no meta.json, not a
// headcount checkpoint, or one written before checkpoints recorded their files' hashes).
std::optional<std::map<std::string, std::string>> recorded_file_hashes(const fs::path& dir) {
  const fs::path file = dir / "meta.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(io::read_file(file));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: corrupt checkpoint metadata: {}", file.string(), e.what());
  }
  if (!meta.is_object() || meta.value("format", "") != "headcount-checkpoint" ||
      !meta.contains("files_xxh64"))
    return std::nullopt;
  const auto& files = meta["files_xxh64"];
  HC_CHECK(files.is_object(), "{}: 'files_xxh64' is {}, expected an object file -> hash",
           file.string(), files.dump());
  std::map<std::string, std::string> out;
  for (const auto& [name, hash] : files.items()) {
    HC_CHECK(hash.is_string(), "{}: the hash of '{}' is {}, expected a string", file.string(), name,
             hash.dump());
    out[name] = hash.get<std::string>();
  }
  return out;
}

// `found` against what `hashes` recorded for `name` (relative to checkpoint `dir`).
void check_recorded_hash(const std::optional<std::map<std::string, std::string>>& hashes,
                         const fs::path& dir, const std::string& name, uint64_t found) {
  if (!hashes) return;
  const fs::path file = dir / name;
  const auto it = hashes->find(name);
  HC_CHECK(it != hashes->end(),
           "{}: not one of the files the checkpoint recorded when it was written (meta.json's "
           "files_xxh64): put there later? Remove it, or use another checkpoint",
           file.string());
  HC_CHECK(io::hex64(found) == it->second,
           "{}: damaged: its content hash (XXH64) is {}, the checkpoint recorded {} when it was "
           "written; restore the file from a copy of the checkpoint, or use another checkpoint",
           file.string(), io::hex64(found), it->second);
}

}  // namespace

std::string read_checkpoint_file(const fs::path& dir, const std::string& name) {
  std::string bytes = io::read_file(dir / name);
  check_recorded_hash(recorded_file_hashes(dir), dir, name, io::xxh64(bytes.data(), bytes.size()));
  return bytes;
}

std::vector<std::pair<std::string, torch::Tensor>> load_weights_file(const fs::path& file) {
  const std::string bytes = read_checkpoint_file(file.parent_path(), file.filename().string());
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
  const std::string bytes = read_checkpoint_file(file.parent_path(), file.filename().string());
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
  std::vector<std::pair<fs::path, std::string>> out;
  if (vocab.joint) {
    out = {{vocab.src_model, "joint.model"}};
  } else {
    out = {{vocab.src_model, "src.model"}, {vocab.tgt_model, "tgt.model"}};
  }
  if (!vocab.tgt_pieces.empty()) {
    out.emplace_back(vocab.pieces, data::piece_list_name("src"));
    out.emplace_back(vocab.tgt_pieces, data::piece_list_name("tgt"));
  } else if (!vocab.pieces.empty()) {
    out.emplace_back(vocab.pieces, data::kPieceListFile);
  }
  return out;
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

void save_checkpoint(const fs::path& given, model::Transformer& model,
                     torch::optim::Optimizer* optimizer, const TrainState& state,
                     const Config& config, const data::VocabFiles& vocab,
                     const std::function<void(const fs::path&)>& extra,
                     const std::map<std::string, std::string>& corpus_xxh64) {
  // Absolute: a bare folder name ("out") has no parent path to create or to hold the temporary.
  fs::path dir = fs::absolute(given).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "out/"
  fs::create_directories(dir.parent_path());
  const fs::path tmp = temp_sibling(dir);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  // What a killed writer of this checkpoint left (an --out of export-pruned, say, outside any run
  // folder that would clean it).
  io::remove_stale_temporaries(dir.parent_path(), dir.filename().string());
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
    if (extra) extra(tmp);
    // Last, over every file written: LibTorch's zip reader does not check its CRCs, so damaged
    // weights would load without these.
    nlohmann::json files = nlohmann::json::object();
    for (const auto& entry : fs::recursive_directory_iterator(tmp)) {
      if (!entry.is_regular_file()) continue;
      const std::string name = entry.path().lexically_relative(tmp).generic_string();
      if (name != "meta.json") files[name] = io::hex64(io::xxh64_file(entry.path()));
    }
    nlohmann::json meta = {{"format", "headcount-checkpoint"},
                           {"format_version", kFormatVersion},
                           {"headcount_version", HEADCOUNT_VERSION},
                           {"vocab_fnv1a", hashes},
                           {"files_xxh64", files},
                           {"torch_load", "torch.load('model.pt') gives a dict name -> tensor"}};
    if (!corpus_xxh64.empty()) meta["corpus_xxh64"] = corpus_xxh64;
    io::write_file_atomic(tmp / "meta.json", meta.dump(2) + "\n");
  });
  io::crash_point("checkpoint.written");
  replace_directory(tmp, dir);
}

model::Architecture read_architecture(const fs::path& path) {
  std::error_code ec;
  const bool folder = fs::is_directory(path, ec);
  // A prune run's checkpoint in training holds the unpruned architecture beside its gates.
  if (folder) require_ungated(path, "taking its architecture");
  const fs::path file = folder ? path / "architecture.json" : path;
  HC_CHECK(fs::is_regular_file(file, ec),
           "{}: no architecture found (expected a checkpoint folder, a folder holding "
           "architecture.json, or an architecture.json file)",
           path.string());
  try {
    // Checked against the hash its folder's meta.json recorded, where it sits in a checkpoint.
    const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
    return model::Architecture::from_json(
        nlohmann::json::parse(read_checkpoint_file(dir, file.filename().string())));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: not a valid architecture: {}", file.string(), e.what());
  } catch (const Error& e) {
    if (std::string(e.what()).rfind("invalid architecture", 0) != 0) throw;
    HC_FAIL("{}: {}", file.string(), e.what());
  }
}

namespace {

// state.json against the folder it sits in: checkpoints/step-N holds step N, checkpoints/best a
// state whose best step is its step (it is a copy of `last` at that evaluation).
void check_state_against_folder(const TrainState& s, const fs::path& dir, const fs::path& file) {
  const fs::path d = dir.filename().empty() ? dir.parent_path() : dir;
  if (d.parent_path().filename() != "checkpoints") return;
  const std::string name = d.filename().string();
  if (name.rfind("step-", 0) == 0 && name.size() > 5 &&
      name.find_first_not_of("0123456789", 5) == std::string::npos && name.size() < 20) {
    const int64_t n = std::stoll(name.substr(5));
    HC_CHECK(s.step == n,
             "{}: 'step' is {}, expected {} (the step its folder is named after): a damaged or "
             "edited checkpoint; restore it from a copy, or remove the folder",
             file.string(), s.step, n);
  }
  if (name == "best") {
    HC_CHECK(s.best_step == s.step,
             "{}: 'best_step' is {}, expected the step ({}): `best` is a copy of the checkpoint "
             "of its best evaluation; a damaged or edited checkpoint (restore it from a copy)",
             file.string(), s.best_step, s.step);
  }
}

// A map name -> string from meta.json's `key`; empty when absent.
std::map<std::string, std::string> string_map(const nlohmann::json& meta, const char* key,
                                              const fs::path& file) {
  std::map<std::string, std::string> out;
  if (!meta.contains(key)) return out;
  HC_CHECK(meta[key].is_object(), "{}: '{}' is {}, expected an object name -> hash", file.string(),
           key, meta[key].dump());
  for (const auto& [name, value] : meta[key].items()) {
    HC_CHECK(value.is_string(), "{}: {}.{} is {}, expected a string", file.string(), key, name,
             value.dump());
    out[name] = value.get<std::string>();
  }
  return out;
}

// A checkpoint's architecture.json (hash-checked); errors name the file.
model::Architecture read_architecture_file(const fs::path& dir) {
  const fs::path file = CheckpointFolder{dir}.architecture();
  const auto j = nlohmann::json::parse(read_checkpoint_file(dir, CheckpointFolder::kArchitecture));
  try {
    return model::Architecture::from_json(j);
  } catch (const Error& e) {
    HC_FAIL("{}: {}", file.string(), e.what());
  }
}

}  // namespace

CheckpointInfo read_checkpoint_info(const fs::path& dir) {
  std::error_code ec;
  const std::string problem = checkpoint_folder_problem(dir);
  HC_CHECK(problem.empty(), "{}", problem);
  HC_CHECK(fs::exists(dir, ec), "checkpoint {} not found", dir.string());
  HC_CHECK(fs::is_directory(dir, ec), "{} is not a folder; a checkpoint is a folder", dir.string());
  for (const char* f :
       {"meta.json", "model.pt", "state.json", "architecture.json", "config.yaml"}) {
    HC_CHECK(fs::exists(dir / f, ec), "{} is not a headcount checkpoint: {} is missing",
             dir.string(), f);
  }
  CheckpointInfo info;
  info.dir = dir;
  const auto hashes = recorded_file_hashes(dir);
  if (!hashes) {
    log::debug("{}: written before checkpoints recorded their files' hashes: not checked",
               dir.string());
  } else {
    for (const auto& [name, hash] : *hashes) {
      HC_CHECK(fs::exists(dir / name, ec),
               "{} is not a complete checkpoint: {} is missing (meta.json lists it)", dir.string(),
               name);
    }
  }
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(io::read_file(dir / "meta.json"));
    HC_CHECK(meta.is_object() && meta.value("format", "") == "headcount-checkpoint",
             "{}/meta.json: not a headcount checkpoint", dir.string());
    HC_CHECK(meta.value("format_version", 0) <= kFormatVersion,
             "{}: checkpoint format {} is newer than this headcount reads ({})", dir.string(),
             meta.value("format_version", 0), kFormatVersion);
    info.state =
        TrainState::from_json(nlohmann::json::parse(read_checkpoint_file(dir, "state.json")),
                              (dir / "state.json").string());
    info.architecture = read_architecture_file(dir);
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: corrupt checkpoint metadata: {}", dir.string(), e.what());
  }
  check_state_against_folder(info.state, dir, dir / "state.json");
  read_checkpoint_file(dir, "config.yaml");  // checked before it is parsed
  info.config = load_config_file(dir / "config.yaml");
  info.architecture.check_against(info.config.model);
  info.vocab.joint = fs::exists(dir / "vocab" / "joint.model", ec);
  info.vocab.src_model = dir / "vocab" / (info.vocab.joint ? "joint.model" : "src.model");
  info.vocab.tgt_model = dir / "vocab" / (info.vocab.joint ? "joint.model" : "tgt.model");
  if (fs::exists(dir / "vocab" / data::kPieceListFile, ec))
    info.vocab.pieces = dir / "vocab" / data::kPieceListFile;
  if (fs::exists(dir / "vocab" / data::piece_list_name("tgt"), ec)) {
    info.vocab.pieces = dir / "vocab" / data::piece_list_name("src");
    info.vocab.tgt_pieces = dir / "vocab" / data::piece_list_name("tgt");
  }
  const fs::path meta_file = dir / "meta.json";
  info.vocab_fnv1a = string_map(meta, "vocab_fnv1a", meta_file);
  info.corpus_xxh64 = string_map(meta, "corpus_xxh64", meta_file);
  // Checkpoints record their vocabulary's hashes (all but the oldest): a vocab/ file replaced by
  // another one would silently turn every token id into another word.
  for (const auto& [name, hash] : info.vocab_fnv1a) {
    const fs::path f = dir / "vocab" / name;
    HC_CHECK(fs::exists(f, ec), "{} is not a complete checkpoint: vocab/{} is missing",
             dir.string(), name);
    const std::string actual = io::hex64(io::hash_file(f));
    HC_CHECK(actual == hash,
             "{}: differs from the vocabulary the weights were trained with (FNV-1a {}, the "
             "checkpoint recorded {}): restore the checkpoint's own vocab/ files",
             f.string(), actual, hash);
  }
  for (const auto& model_file : {info.vocab.src_model, info.vocab.tgt_model}) {
    if (fs::exists(model_file, ec)) {
      check_recorded_hash(hashes, dir, "vocab/" + model_file.filename().string(),
                          io::xxh64_file(model_file));
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
  std::istringstream bytes(read_checkpoint_file(dir, "optimizer.pt"));
  try {
    torch::load(optimizer, bytes);
  } catch (const std::exception& e) {
    HC_FAIL("{}: cannot read the optimizer state (corrupt, or another architecture)", f.string());
  }
}

void copy_checkpoint(const fs::path& src, const fs::path& dst) {
  const fs::path tmp = temp_sibling(dst);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  io::remove_stale_temporaries(dst.parent_path(), dst.filename().string());
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
