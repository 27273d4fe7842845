// Marian's native checkpoints (model.npz + vocab.yml + decoder.yml, as OPUS-MT releases them) read
// as transformers' convert_marian_to_pytorch.py reads them, into HF's names (marian_source.h).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "common/yaml_check.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/interop/npz.h"
#include "interop/marian_source.h"

namespace headcount::interop {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr size_t kMaxVocabBytes = size_t{64} << 20;
constexpr const char* kModelYml = "special:model.yml";

// A scalar of model.yml as T (Marian writes every value as a plain scalar).
template <typename T>
T scalar(const YAML::Node& cfg, const char* key, const std::string& origin,
         std::optional<T> fallback = {}) {
  const YAML::Node v = cfg[key];
  if (!v) {
    HC_CHECK(fallback.has_value(), "{}: no \"{}\" (Marian's model configuration)", origin, key);
    return *fallback;
  }
  if constexpr (std::is_same_v<T, std::string>) {
    if (v.IsNull()) return std::string();  // "key:" with nothing: an empty option, as HF reads it
  }
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    HC_FAIL(
        "{}: \"{}\" is not a{} ({})", origin, key,
        std::is_same_v<T, bool> ? " boolean" : (std::is_integral_v<T> ? "n integer" : " string"),
        YAML::Dump(v));
  }
}

// Settings HF's converter assumes (check_marian_cfg_assumptions) and headcount's model has.
void check_assumptions(const YAML::Node& cfg, const std::string& origin) {
  const std::vector<std::pair<const char*, std::string>> strings = {
      {"type", "transformer"},
      {"transformer-preprocess", ""},
      {"transformer-postprocess", "dan"},
      {"transformer-postprocess-emb", "d"},
      {"transformer-decoder-autoreg", "self-attention"},
  };
  for (const auto& [key, want] : strings) {
    const auto got = scalar<std::string>(cfg, key, origin, want);
    HC_CHECK(got == want,
             "{}: \"{}\" is \"{}\"; headcount imports Marian transformers with \"{}\" (post-norm "
             "layers as OPUS-MT's)",
             origin, key, got, want);
  }
  for (const char* key : {"layer-normalization", "right-left", "transformer-no-projection",
                          "transformer-train-position-embeddings", "transformer-aan-nogate"})
    HC_CHECK(!scalar<bool>(cfg, key, origin, false),
             "{}: \"{}\" is true; HF's MarianMT (and headcount's import) has no such model", origin,
             key);
  HC_CHECK(scalar<int>(cfg, "transformer-ffn-depth", origin, 2) == 2,
           "{}: \"transformer-ffn-depth\" must be 2 (one hidden layer)", origin);
  HC_CHECK(scalar<int>(cfg, "ulr-dim-emb", origin, 0) == 0,
           "{}: \"ulr-dim-emb\" is set; universal lexical representations are not imported",
           origin);
}

// vocab.yml: piece -> id, every id of [0, n) once. Returns the pieces by id.
std::vector<std::string> read_vocab_yml(const fs::path& file) {
  const auto root =
      parse_yaml(io::read_file_bounded(file, kMaxVocabBytes, "a Marian vocabulary"), file.string());
  HC_CHECK(root.IsMap(), "{}: expected a mapping of piece -> id", file.string());
  std::vector<std::string> pieces(root.size());
  std::vector<bool> seen(root.size(), false);
  for (const auto& kv : root) {
    const auto piece = kv.first.as<std::string>();
    int64_t id = -1;
    try {
      id = kv.second.as<int64_t>();
    } catch (const YAML::Exception&) {
    }
    HC_CHECK(id >= 0 && id < static_cast<int64_t>(pieces.size()),
             "{}:{}: \"{}\" has id {}; expected an integer in [0, {})", file.string(),
             kv.first.Mark().line + 1, piece, YAML::Dump(kv.second), pieces.size());
    HC_CHECK(!seen[id], "{}:{}: id {} is given to two pieces (\"{}\" and \"{}\")", file.string(),
             kv.first.Mark().line + 1, id, pieces[id], piece);
    seen[id] = true;
    pieces[id] = piece;
  }
  return pieces;
}

// The model file and the source and target vocabularies (one file twice when joint):
// decoder.yml's, else the folder's only candidates (separate ones named *src.vocab.yml and
// *trg.vocab.yml, as OPUS-MT names them).
struct ModelFiles {
  fs::path model, src_vocab, tgt_vocab;
};

ModelFiles model_files(const fs::path& folder) {
  std::error_code ec;
  const fs::path decoder = folder / "decoder.yml";
  if (fs::is_regular_file(decoder, ec)) {
    const auto d = parse_yaml(io::read_file_bounded(decoder, io::kMaxConfigBytes, "decoder.yml"),
                              decoder.string());
    HC_CHECK(d["models"] && d["models"].IsSequence() && d["models"].size() == 1,
             "{}: expected \"models:\" with one model file (an ensemble is not imported)",
             decoder.string());
    HC_CHECK(d["vocabs"] && d["vocabs"].IsSequence() && d["vocabs"].size() == 2,
             "{}: expected \"vocabs:\" with the source and the target vocabulary",
             decoder.string());
    // Marian resolves relative names against the folder of decoder.yml (relative-paths).
    auto in_folder = [&](const YAML::Node& name) {
      const fs::path p(name.as<std::string>());
      return p.is_absolute() ? p : folder / p.filename();
    };
    return {in_folder(d["models"][0]), in_folder(d["vocabs"][0]), in_folder(d["vocabs"][1])};
  }
  std::vector<fs::path> models, vocabs, src, tgt;
  auto ends_with = [](const std::string& name, const std::string& tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (const auto& e : fs::directory_iterator(folder)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".npz") models.push_back(e.path());
    if (ends_with(name, "src.vocab.yml"))
      src.push_back(e.path());
    else if (ends_with(name, "trg.vocab.yml"))
      tgt.push_back(e.path());
    else if (ends_with(name, "vocab.yml"))
      vocabs.push_back(e.path());
  }
  HC_CHECK(models.size() == 1,
           "{}: {} *.npz files and no decoder.yml to say which model to import (expected one)",
           folder.string(), models.size());
  if (vocabs.empty() && src.size() == 1 && tgt.size() == 1) return {models[0], src[0], tgt[0]};
  HC_CHECK(vocabs.size() == 1 && src.empty() && tgt.empty(),
           "{}: {} *vocab.yml files and no decoder.yml (expected one joint vocabulary, or one "
           "*src.vocab.yml and one *trg.vocab.yml)",
           folder.string(), vocabs.size() + src.size() + tgt.size());
  return {models[0], vocabs[0], vocabs[0]};
}

// Marian's tensors under HF's names, shapes checked against model.yml.
class Converter {
 public:
  Converter(std::map<std::string, torch::Tensor> npz, fs::path file, int64_t d, int64_t ffn)
      : arrays_(std::move(npz), std::move(file), "array", "model.yml"), d_(d), ffn_(ffn) {}

  torch::Tensor take(const std::string& name, const std::vector<int64_t>& shape) {
    return arrays_.take(name, shape);
  }

  // One attention block (self_ or context_) with its layer norm.
  void attention(const std::string& m, const std::string& hf_attn, const std::string& hf_norm,
                 std::map<std::string, torch::Tensor>& out) {
    for (const auto& [w, b, proj] :
         {std::tuple{"Wq", "bq", "q_proj"}, std::tuple{"Wk", "bk", "k_proj"},
          std::tuple{"Wv", "bv", "v_proj"}, std::tuple{"Wo", "bo", "out_proj"}}) {
      out[hf_attn + "." + proj + ".weight"] = take(m + w, {d_, d_}).t().contiguous();
      out[hf_attn + "." + proj + ".bias"] = take(m + b, {1, d_})[0];
    }
    out[hf_norm + ".weight"] = take(m + "Wo_ln_scale", {1, d_})[0];
    out[hf_norm + ".bias"] = take(m + "Wo_ln_bias", {1, d_})[0];
  }
  void ffn(const std::string& m, const std::string& hf, std::map<std::string, torch::Tensor>& out) {
    out[hf + ".fc1.weight"] = take(m + "ffn_W1", {d_, ffn_}).t().contiguous();
    out[hf + ".fc1.bias"] = take(m + "ffn_b1", {1, ffn_})[0];
    out[hf + ".fc2.weight"] = take(m + "ffn_W2", {ffn_, d_}).t().contiguous();
    out[hf + ".fc2.bias"] = take(m + "ffn_b2", {1, d_})[0];
    out[hf + ".final_layer_norm.weight"] = take(m + "ffn_ffn_ln_scale", {1, d_})[0];
    out[hf + ".final_layer_norm.bias"] = take(m + "ffn_ffn_ln_bias", {1, d_})[0];
  }
  void check_all_used() const {
    std::vector<std::string> left;
    for (const auto& name : arrays_.left_over())
      if (name != kModelYml) left.push_back(name);
    HC_CHECK(left.empty(),
             "{}: arrays that HF's MarianMT conversion does not take (another architecture, "
             "e.g. learned positions, embedding layer norms or a guided-alignment layer): {}",
             arrays_.file().string(), fmt::join(left, ", "));
  }

 private:
  TensorSet arrays_;
  int64_t d_, ffn_;
};

// model.yml's text from its int8/uint8 array (NUL-terminated, as Marian stores it).
std::string model_yml_text(const std::map<std::string, torch::Tensor>& npz, const fs::path& file) {
  const auto it = npz.find(kModelYml);
  HC_CHECK(it != npz.end(),
           "{}: no {} array (Marian's model configuration): not a Marian model file", file.string(),
           kModelYml);
  const auto t = it->second.contiguous();
  HC_CHECK(t.dim() == 1 && (t.scalar_type() == torch::kInt8 || t.scalar_type() == torch::kByte),
           "{}: {} is not a 1-d array of bytes", file.string(), kModelYml);
  std::string text(reinterpret_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

// The architecture of model.yml (checked against the vocabulary's size).
struct Dims {
  int64_t d = 0, ffn = 0, heads = 0, enc = 0, dec = 0;
  bool tied_src = true;  // one embedding for encoder and decoder (else encoder_/decoder_Wemb)
  bool tied_out = true;
  std::string activation;
};

Dims read_dims(const YAML::Node& cfg, const std::string& origin, int64_t marian_v,
               const fs::path& vocab_file) {
  Dims m;
  m.d = scalar<int64_t>(cfg, "dim-emb", origin);
  m.ffn = scalar<int64_t>(cfg, "transformer-dim-ffn", origin);
  m.heads = scalar<int64_t>(cfg, "transformer-heads", origin);
  m.enc = scalar<int64_t>(cfg, "enc-depth", origin);
  m.dec = scalar<int64_t>(cfg, "dec-depth", origin);
  HC_CHECK(m.d > 0 && m.ffn > 0 && m.heads > 0 && m.enc > 0 && m.dec > 0 && m.d % m.heads == 0,
           "{}: dim-emb {} with {} heads, ffn {}, {} + {} layers: expected positive sizes and "
           "dim-emb divisible by the heads",
           origin, m.d, m.heads, m.ffn, m.enc, m.dec);
  const YAML::Node dims = cfg["dim-vocabs"];
  if (dims && dims.IsSequence())
    for (const auto& n : dims)
      HC_CHECK(n.as<int64_t>() == marian_v,
               "{}: \"dim-vocabs\" gives {} pieces, {} has {}: not this model's vocabulary", origin,
               n.as<int64_t>(), vocab_file.string(), marian_v);
  const bool tied_all = scalar<bool>(cfg, "tied-embeddings-all", origin, false);
  m.tied_src = tied_all || scalar<bool>(cfg, "tied-embeddings-src", origin, false);
  m.tied_out = tied_all || scalar<bool>(cfg, "tied-embeddings", origin, false);
  m.activation =
      scalar<std::string>(cfg, "transformer-ffn-activation", origin, std::string("swish"));
  HC_CHECK(m.activation == "swish" || m.activation == "relu" || m.activation == "gelu",
           "{}: \"transformer-ffn-activation\" is \"{}\"; expected swish, relu or gelu", origin,
           m.activation);
  return m;
}

// HF's config.json for the model, as convert_marian_to_pytorch.py writes it (V counts <pad>,
// appended last).
json hf_config(const Dims& m, int64_t V, int64_t eos) {
  const int64_t pad = V - 1;
  return {{"model_type", "marian"},
          {"architectures", {"MarianMTModel"}},
          {"vocab_size", V},
          {"decoder_vocab_size", V},
          {"share_encoder_decoder_embeddings", m.tied_src},
          {"d_model", m.d},
          {"encoder_layers", m.enc},
          {"decoder_layers", m.dec},
          {"encoder_attention_heads", m.heads},
          {"decoder_attention_heads", m.heads},
          {"encoder_ffn_dim", m.ffn},
          {"decoder_ffn_dim", m.ffn},
          {"activation_function", m.activation},
          {"pad_token_id", pad},
          {"eos_token_id", eos},
          {"forced_eos_token_id", eos},
          {"bos_token_id", 0},
          {"decoder_start_token_id", pad},
          {"bad_words_ids", {{pad}}},
          // Marian computes its sinusoids for any position; HF's configs of OPUS-MT say 512.
          {"max_position_embeddings", 512},
          {"max_length", 512},
          {"scale_embedding", true},
          {"normalize_embedding", false},
          {"static_position_embeddings", true},
          {"tie_word_embeddings", m.tied_out},
          {"dropout", 0.1}};
}

// Every tensor under HF's name: <pad>'s embedding row and logit bias appended as zeros.
std::map<std::string, torch::Tensor> convert(Converter& c, const Dims& m, int64_t marian_v) {
  std::map<std::string, torch::Tensor> out;
  const auto zero_row = torch::zeros({1, m.d});
  auto embedding = [&](const std::string& name) {
    return torch::cat({c.take(name, {marian_v, m.d}), zero_row}, 0);
  };
  if (m.tied_src) {
    out["model.shared.weight"] = embedding("Wemb");
  } else {
    out["model.encoder.embed_tokens.weight"] = embedding("encoder_Wemb");
    out["model.decoder.embed_tokens.weight"] = embedding("decoder_Wemb");
  }
  out["final_logits_bias"] =
      torch::cat({c.take("decoder_ff_logit_out_b", {1, marian_v}), torch::zeros({1, 1})}, 1);
  if (!m.tied_out)
    out["lm_head.weight"] =
        torch::cat({c.take("decoder_ff_logit_out_W", {m.d, marian_v}).t(), zero_row}, 0)
            .contiguous();
  for (int64_t i = 0; i < m.enc; ++i) {
    const std::string p = fmt::format("encoder_l{}_", i + 1);
    const std::string hf = fmt::format("model.encoder.layers.{}", i);
    c.attention(p + "self_", hf + ".self_attn", hf + ".self_attn_layer_norm", out);
    c.ffn(p, hf, out);
  }
  for (int64_t i = 0; i < m.dec; ++i) {
    const std::string p = fmt::format("decoder_l{}_", i + 1);
    const std::string hf = fmt::format("model.decoder.layers.{}", i);
    c.attention(p + "self_", hf + ".self_attn", hf + ".self_attn_layer_norm", out);
    c.attention(p + "context_", hf + ".encoder_attn", hf + ".encoder_attn_layer_norm", out);
    c.ffn(p, hf, out);
  }
  return out;
}

}  // namespace

bool is_marian_native_folder(const fs::path& folder) {
  std::error_code ec;
  if (fs::exists(folder / "config.json", ec)) return false;
  if (fs::is_regular_file(folder / "decoder.yml", ec)) return true;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".npz") return true;
  return false;
}

MarianSource read_marian_native(const fs::path& folder) {
  MarianSource s;
  s.layout = "marian-npz";
  const ModelFiles files = model_files(folder);
  s.weights_file = files.model;
  s.vocab_file = files.src_vocab;
  for (const auto& f : {files.model, files.src_vocab, files.tgt_vocab, folder / "source.spm",
                        folder / "target.spm"}) {
    std::error_code ec;
    HC_CHECK(fs::is_regular_file(f, ec),
             "{}: missing (a Marian model folder has the model's .npz, its vocab.yml, "
             "source.spm and target.spm, and usually decoder.yml)",
             f.string());
  }
  s.source_spm = folder / "source.spm";
  s.target_spm = folder / "target.spm";
  auto npz = read_npz(s.weights_file);
  const std::string origin = fmt::format("{}: {}", s.weights_file.string(), kModelYml);
  s.config_file = fs::path(origin);
  const auto cfg = parse_yaml(model_yml_text(npz, s.weights_file), origin);
  HC_CHECK(cfg.IsMap(), "{}: expected a mapping of Marian options", origin);
  check_assumptions(cfg, origin);

  s.pieces = read_vocab_yml(s.vocab_file);
  auto id_of = [&](const std::string& piece) {
    for (size_t i = 0; i < s.pieces.size(); ++i)
      if (s.pieces[i] == piece) return static_cast<int64_t>(i);
    HC_FAIL("{}: no \"{}\" piece", s.vocab_file.string(), piece);
  };
  const int64_t eos = id_of("</s>");
  (void)id_of("<unk>");
  HC_CHECK(std::find(s.pieces.begin(), s.pieces.end(), "<pad>") == s.pieces.end(),
           "{}: already has a \"<pad>\" piece; Marian's vocabularies do not (HF appends it)",
           s.vocab_file.string());
  const auto marian_v = static_cast<int64_t>(s.pieces.size());
  s.pieces.push_back("<pad>");
  const int64_t V = marian_v + 1;

  const Dims dims = read_dims(cfg, origin, marian_v, s.vocab_file);
  HC_CHECK(!dims.tied_src || files.src_vocab == files.tgt_vocab,
           "{}: two vocabularies ({} and {}) but one embedding for both sides "
           "(tied-embeddings-src): the files do not fit the model",
           origin, files.src_vocab.string(), files.tgt_vocab.string());
  if (!dims.tied_src) {
    // HF's converter: vocab.json and target_vocab.json, each with <pad> appended.
    s.tgt_vocab_file = files.tgt_vocab;
    s.tgt_pieces = files.tgt_vocab == files.src_vocab ? s.pieces : read_vocab_yml(files.tgt_vocab);
    if (files.tgt_vocab != files.src_vocab) s.tgt_pieces.push_back("<pad>");
    HC_CHECK(s.tgt_pieces.size() == s.pieces.size(),
             "{}: {} pieces, {} has {}: vocabularies of two sizes are not imported (HF's "
             "conversion of Marian models gives both one size)",
             files.tgt_vocab.string(), s.tgt_pieces.size() - 1, files.src_vocab.string(), marian_v);
  }
  s.config = hf_config(dims, V, eos);
  s.tokenizer_config = json{{"separate_vocabs", !dims.tied_src}};
  for (auto& [name, t] : npz) {
    if (name == kModelYml) continue;
    HC_CHECK(t.is_floating_point(), "{}: {} is {}, not a floating-point array",
             s.weights_file.string(), name, c10::toString(t.scalar_type()));
    t = t.to(torch::kFloat32);
  }
  Converter c(std::move(npz), s.weights_file, dims.d, dims.ffn);
  s.tensors = convert(c, dims, marian_v);
  c.check_all_used();
  return s;
}

}  // namespace headcount::interop
