#include "headcount/data/vocab.h"

#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/run_guard.h"
#include "spm/backend.h"

namespace headcount::data {

namespace {

// A message the library allocated, taken over (and freed).
std::string take_message(char* error) {
  std::string message = error != nullptr ? error : "unknown error";
  hc_spm_free_buffer(error);
  return message;
}

}  // namespace

void Vocab::Free::operator()(hc_spm_processor* p) const {
  hc_spm_free(p);
}

Vocab::Vocab() = default;
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;
Vocab::~Vocab() = default;

Vocab Vocab::load(const fs::path& model_file) {
  std::error_code ec;
  HC_CHECK(fs::exists(model_file, ec), "{}: SentencePiece model not found", model_file.string());
  Vocab v;
  char* error = nullptr;
  v.sp_.reset(hc_spm_load(model_file.string().c_str(), &error));
  HC_CHECK(v.sp_ != nullptr, "{}: not a valid SentencePiece model: {}", model_file.string(),
           take_message(error));
  v.path_ = model_file;
  fs::path list = model_file.parent_path() / piece_list_name(model_file.stem().string());
  if (!fs::exists(list, ec)) list = model_file.parent_path() / kPieceListFile;
  if (fs::exists(list, ec)) {
    v.pieces_ = read_piece_list(list);
    for (size_t i = 0; i < v.pieces_.size(); ++i)
      v.piece_ids_.emplace(v.pieces_[i], static_cast<int>(i));
    return v;
  }
  int ids[4];
  hc_spm_special_ids(v.sp_.get(), ids);
  HC_CHECK(ids[0] == kPadId && ids[1] == kUnkId && ids[2] == kBosId && ids[3] == kEosId,
           "{}: special ids are pad={} unk={} bos={} eos={}, headcount expects 0, 1, 2, 3 (train "
           "it with --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3)",
           model_file.string(), ids[0], ids[1], ids[2], ids[3]);
  return v;
}

std::vector<std::string> read_piece_list(const fs::path& file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::read_file(file));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: not JSON ({})", file.string(), e.what());
  }
  HC_CHECK(j.is_object() && j.contains("pieces") && j["pieces"].is_array(),
           "{}: expected an object with a list \"pieces\"", file.string());
  std::vector<std::string> pieces;
  std::unordered_map<std::string, size_t> seen;
  for (const auto& p : j["pieces"]) {
    HC_CHECK(p.is_string(), "{}: pieces[{}] is not a string", file.string(), pieces.size());
    const auto [it, fresh] = seen.emplace(p.get<std::string>(), pieces.size());
    HC_CHECK(fresh, "{}: pieces[{}] repeats pieces[{}] ({})", file.string(), pieces.size(),
             it->second, p.get<std::string>());
    pieces.push_back(p.get<std::string>());
  }
  HC_CHECK(pieces.size() > 4, "{}: {} pieces, fewer than the four specials and one more",
           file.string(), pieces.size());
  return pieces;
}

std::vector<int> Vocab::encode(const std::string& text) const {
  if (!pieces_.empty()) {
    char* buffer = nullptr;
    size_t bytes = 0, n = 0;
    char* error = nullptr;
    HC_CHECK(
        hc_spm_encode_pieces(sp_.get(), text.data(), text.size(), &buffer, &bytes, &n, &error) == 0,
        "SentencePiece encode failed: {}", take_message(error));
    std::vector<int> out;
    out.reserve(n);
    for (size_t at = 0; out.size() < n; at += std::strlen(buffer + at) + 1) {
      const auto it = piece_ids_.find(buffer + at);
      out.push_back(it != piece_ids_.end() ? it->second : kUnkId);
    }
    hc_spm_free_buffer(buffer);
    return out;
  }
  int* ids = nullptr;
  size_t n = 0;
  char* error = nullptr;
  HC_CHECK(hc_spm_encode(sp_.get(), text.data(), text.size(), &ids, &n, &error) == 0,
           "SentencePiece encode failed: {}", take_message(error));
  std::vector<int> out(ids, ids + n);
  hc_spm_free_buffer(ids);
  return out;
}

std::string Vocab::decode(const std::vector<int>& ids) const {
  if (!pieces_.empty()) {
    // MarianTokenizer's decode with skip_special_tokens: the specials dropped, the pieces joined
    // by the SentencePiece model, a word boundary left by a piece it does not know made a space.
    std::string joined;
    size_t n = 0;
    for (int id : ids) {
      if (id <= kEosId || id >= static_cast<int>(pieces_.size())) continue;
      joined += pieces_[id];
      joined += '\0';
      ++n;
    }
    char* text = nullptr;
    size_t len = 0;
    char* error = nullptr;
    HC_CHECK(
        hc_spm_decode_pieces(sp_.get(), joined.data(), joined.size(), n, &text, &len, &error) == 0,
        "SentencePiece decode failed: {}", take_message(error));
    std::string out(text, len);
    hc_spm_free_buffer(text);
    const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary
    for (size_t at = out.find(space); at != std::string::npos; at = out.find(space, at))
      out.replace(at, space.size(), " ");
    const size_t first = out.find_first_not_of(' ');
    if (first == std::string::npos) return "";
    return out.substr(first, out.find_last_not_of(' ') - first + 1);
  }
  char* text = nullptr;
  size_t len = 0;
  char* error = nullptr;
  HC_CHECK(hc_spm_decode(sp_.get(), ids.data(), ids.size(), &text, &len, &error) == 0,
           "SentencePiece decode failed: {}", take_message(error));
  std::string out(text, len);
  hc_spm_free_buffer(text);
  return out;
}

int Vocab::size() const {
  if (!pieces_.empty()) return static_cast<int>(pieces_.size());
  return hc_spm_piece_size(sp_.get());
}
std::string Vocab::piece(int id) const {
  if (!pieces_.empty()) {
    HC_CHECK(id >= 0 && id < static_cast<int>(pieces_.size()), "piece id {} out of range [0, {})",
             id, pieces_.size());
    return pieces_[id];
  }
  char* piece = hc_spm_id_to_piece(sp_.get(), id);
  HC_CHECK(piece != nullptr, "SentencePiece: out of memory");
  std::string out(piece);
  hc_spm_free_buffer(piece);
  return out;
}

void train_sentencepiece(const std::vector<fs::path>& inputs, const fs::path& model_prefix,
                         const VocabConfig& c, int seed, int threads) {
  // SentencePiece records its model prefix in the model (trainer_spec.model_prefix). The model is
  // trained in memory, without a prefix, and written here, so that a vocabulary trained into a
  // temporary folder (a name with a process id) is byte for byte the one trained from the same
  // data anywhere else.
  std::string input;
  for (const auto& p : inputs) {
    std::error_code ec;
    HC_CHECK(fs::exists(p, ec), "{}: vocabulary training file not found", p.string());
    if (!input.empty()) input += ',';
    input += p.string();
  }
  const std::string args = fmt::format(
      "--input={} --vocab_size={} --model_type={} --character_coverage={} "
      "--pad_id={} --unk_id={} --bos_id={} --eos_id={} --input_sentence_size={} "
      "--shuffle_input_sentence=true --num_threads={} --hard_vocab_limit=false "
      "--byte_fallback={} --minloglevel=1",
      input, c.size, c.model_type, c.character_coverage, kPadId, kUnkId, kBosId, kEosId,
      c.input_sentence_size, std::max(threads, 1), c.byte_fallback ? "true" : "false");
  char* model = nullptr;
  size_t len = 0;
  char* error = nullptr;
  HC_CHECK(hc_spm_train(args.c_str(), static_cast<unsigned>(seed), &model, &len, &error) == 0,
           "SentencePiece training failed: {}", take_message(error));
  const std::string bytes(model, len);
  hc_spm_free_buffer(model);
  io::write_file_atomic(model_prefix.string() + ".model", bytes);
}

namespace {

// A cache entry's models against the hashes it recorded when it was trained: an entry replaced
// or damaged since would give a new run another vocabulary than its corpus and options make.
// (Entries written before the hashes were recorded are reused unchecked.)
void check_cache_entry(const fs::path& dir) {
  const fs::path file = dir / "options.json";
  nlohmann::json info;
  try {
    info = nlohmann::json::parse(io::read_file(file));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: not JSON ({}): a damaged vocabulary cache entry; remove {} to train it again",
            file.string(), e.what(), dir.string());
  }
  if (!info.is_object() || !info.contains("models_xxh64") || !info["models_xxh64"].is_object())
    return;
  for (const auto& [name, hash] : info["models_xxh64"].items()) {
    const fs::path model = dir / name;
    std::error_code ec;
    HC_CHECK(fs::exists(model, ec),
             "{}: missing from the vocabulary cache entry; remove {} to "
             "train it again",
             model.string(), dir.string());
    const std::string now = io::hex64(io::xxh64_file(model));
    HC_CHECK(hash.is_string() && now == hash.get<std::string>(),
             "{}: not the model this cache entry was trained as (XXH64 {}, recorded {}): replaced "
             "or damaged; remove {} to train it again from the same corpus and options",
             model.string(), now, hash.dump(), dir.string());
  }
}

}  // namespace

VocabFiles train_or_load_vocab(const VocabConfig& c, const fs::path& train_src,
                               const fs::path& train_tgt, int seed, int threads) {
  // Read more than once (by the corpus loader, hashed here for the cache key, then by
  // SentencePiece): a pipe would be empty the second time, and SentencePiece would fail on it
  // with "!sentences_.empty()".
  for (const auto& f : {train_src, train_tgt}) {
    io::require_regular_file(f,
                             "the vocabulary is trained from the training files after they "
                             "are read, so they must be files that can be read again");
  }
  // The options that change the model, then the inputs' contents.
  const std::string options = fmt::format(
      "v1|joint={}|size={}|type={}|coverage={}|bytes={}|sentences={}|seed={}", c.joint, c.size,
      c.model_type, c.character_coverage, c.byte_fallback, c.input_sentence_size, seed);
  uint64_t h = io::fnv1a(options.data(), options.size());
  h = io::hash_file(train_src, h);
  h = io::hash_file(train_tgt, h);
  const fs::path dir = fs::path(c.cache_dir) / fmt::format("spm-{}", io::hex64(h));
  VocabFiles out;
  out.joint = c.joint;
  out.src_model = dir / (c.joint ? "joint.model" : "src.model");
  out.tgt_model = dir / (c.joint ? "joint.model" : "tgt.model");
  // A training killed on the way left its folder: the cache is headcount's own, clean it.
  if (const int removed = io::remove_stale_temporaries(c.cache_dir); removed > 0)
    log::info("vocabulary: removed {} folder(s) left in {} by a killed process", removed,
              c.cache_dir);
  std::error_code ec;
  if (fs::exists(dir / "options.json", ec)) {
    check_cache_entry(dir);
    out.from_cache = true;
    log::info("vocabulary: reusing {}", dir.string());
    return out;
  }
  // Train into a temporary folder and rename it into place: never a half-written cache entry.
  const fs::path tmp =
      fs::path(c.cache_dir) / fmt::format(".spm-{}.tmp.{}", io::hex64(h), getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  log::info("vocabulary: training SentencePiece ({} {}, size {}) on {} and {}",
            c.joint ? "joint" : "separate", c.model_type, c.size, train_src.string(),
            train_tgt.string());
  try {
    if (c.joint) {
      train_sentencepiece({train_src, train_tgt}, tmp / "joint", c, seed, threads);
    } else {
      train_sentencepiece({train_src}, tmp / "src", c, seed, threads);
      train_sentencepiece({train_tgt}, tmp / "tgt", c, seed, threads);
    }
    nlohmann::ordered_json info;
    info["options"] = options;
    info["train_src"] = train_src.string();
    info["train_tgt"] = train_tgt.string();
    // What the entry holds, checked whenever it is reused.
    nlohmann::ordered_json models;
    for (const char* name : {"joint.model", "src.model", "tgt.model"})
      if (fs::exists(tmp / name, ec)) models[name] = io::hex64(io::xxh64_file(tmp / name));
    info["models_xxh64"] = models;
    io::write_file_atomic(tmp / "options.json", info.dump(2) + "\n");
    fs::rename(tmp, dir, ec);
    if (ec && !fs::exists(dir / "options.json")) {
      HC_FAIL("cannot move the vocabulary into {}: {}", dir.string(), ec.message());
    }
    fs::remove_all(tmp, ec);  // another process won the race: keep its copy
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return out;
}

}  // namespace headcount::data
