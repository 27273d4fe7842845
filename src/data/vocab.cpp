#include "headcount/data/vocab.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"

namespace headcount::data {

Vocab::Vocab() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;
Vocab::~Vocab() = default;

Vocab Vocab::load(const fs::path& model_file) {
  std::error_code ec;
  HC_CHECK(fs::exists(model_file, ec), "{}: SentencePiece model not found", model_file.string());
  Vocab v;
  const auto status = v.sp_->Load(model_file.string());
  HC_CHECK(status.ok(), "{}: not a valid SentencePiece model: {}", model_file.string(),
           status.ToString());
  v.path_ = model_file;
  HC_CHECK(v.sp_->pad_id() == kPadId && v.sp_->unk_id() == kUnkId && v.sp_->bos_id() == kBosId &&
               v.sp_->eos_id() == kEosId,
           "{}: special ids are pad={} unk={} bos={} eos={}, headcount expects 0, 1, 2, 3 (train "
           "it with --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3)",
           model_file.string(), v.sp_->pad_id(), v.sp_->unk_id(), v.sp_->bos_id(), v.sp_->eos_id());
  return v;
}

std::vector<int> Vocab::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  HC_CHECK(status.ok(), "SentencePiece encode failed: {}", status.ToString());
  return ids;
}

std::string Vocab::decode(const std::vector<int>& ids) const {
  std::string text;
  const auto status = sp_->Decode(ids, &text);
  HC_CHECK(status.ok(), "SentencePiece decode failed: {}", status.ToString());
  return text;
}

int Vocab::size() const {
  return sp_->GetPieceSize();
}
std::string Vocab::piece(int id) const {
  return sp_->IdToPiece(id);
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
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(seed));
  const std::string args = fmt::format(
      "--input={} --vocab_size={} --model_type={} --character_coverage={} "
      "--pad_id={} --unk_id={} --bos_id={} --eos_id={} --input_sentence_size={} "
      "--shuffle_input_sentence=true --num_threads={} --hard_vocab_limit=false "
      "--byte_fallback={} --minloglevel=1",
      input, c.size, c.model_type, c.character_coverage, kPadId, kUnkId, kBosId, kEosId,
      c.input_sentence_size, std::max(threads, 1), c.byte_fallback ? "true" : "false");
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &model);
  HC_CHECK(status.ok(), "SentencePiece training failed: {}", status.ToString());
  io::write_file_atomic(model_prefix.string() + ".model", model);
}

VocabFiles train_or_load_vocab(const VocabConfig& c, const fs::path& train_src,
                               const fs::path& train_tgt, int seed, int threads) {
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
  std::error_code ec;
  if (fs::exists(dir / "options.json", ec)) {
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
