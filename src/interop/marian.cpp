#include "headcount/interop/marian.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/data/vocab.h"
#include "headcount/model/safetensors.h"
#include "headcount/model/transformer.h"
#include "headcount/run/checkpoint.h"
#include "interop/marian_source.h"

namespace headcount::interop {

using json = nlohmann::json;

TensorSet::TensorSet(std::map<std::string, torch::Tensor> tensors, fs::path file, std::string noun,
                     std::string shapes_from)
    : tensors_(std::move(tensors)),
      file_(std::move(file)),
      noun_(std::move(noun)),
      shapes_from_(std::move(shapes_from)) {}

torch::Tensor TensorSet::take(const std::string& name, const std::vector<int64_t>& shape) {
  const auto it = tensors_.find(name);
  HC_CHECK(it != tensors_.end(), "{}: no {} {} (expected shape [{}])", file_.string(), noun_, name,
           fmt::join(shape, ", "));
  HC_CHECK(it->second.sizes() == torch::IntArrayRef(shape), "{}: {} has shape [{}], {} gives [{}]",
           file_.string(), name, fmt::join(it->second.sizes(), ", "), shapes_from_,
           fmt::join(shape, ", "));
  taken_.insert(name);
  return it->second;
}

std::vector<std::string> TensorSet::left_over() const {
  std::vector<std::string> left;
  for (const auto& [name, t] : tensors_)
    if (!taken_.count(name)) left.push_back(name);
  return left;
}

MarianIds MarianIds::make(int64_t size, int64_t pad, int64_t eos, int64_t unk) {
  HC_CHECK(size > 3 && pad != eos && pad != unk && eos != unk && pad >= 0 && eos >= 0 && unk >= 0 &&
               pad < size && eos < size && unk < size,
           "a Marian vocabulary of {} ids with pad {}, eos {} and unk {}: the three must be "
           "distinct ids of the vocabulary",
           size, pad, eos, unk);
  MarianIds m;
  m.size = size;
  m.pad = pad;
  m.eos = eos;
  m.unk = unk;
  m.to_headcount.assign(size, -1);
  m.to_marian.assign(size + 1, -1);
  m.to_headcount[unk] = data::kUnkId;
  m.to_headcount[pad] = data::kBosId;
  m.to_headcount[eos] = data::kEosId;
  int64_t next = data::kEosId + 1;
  for (int64_t i = 0; i < size; ++i)
    if (m.to_headcount[i] < 0) m.to_headcount[i] = next++;
  for (int64_t i = 0; i < size; ++i) m.to_marian[m.to_headcount[i]] = i;
  return m;
}

namespace {

json read_json_file(const fs::path& file) {
  try {
    return json::parse(io::read_file(file));
  } catch (const json::exception& e) {
    HC_FAIL("{}: not valid JSON: {}", file.string(), e.what());
  }
}

// A config.json value of the expected type, or its default when absent (no default: required).
template <typename T>
T value(const json& j, const char* key, const fs::path& file, std::optional<T> fallback = {}) {
  if (!j.contains(key) || j[key].is_null()) {
    HC_CHECK(fallback.has_value(), "{}: no \"{}\" (a MarianMT config.json has it)", file.string(),
             key);
    return *fallback;
  }
  const auto& v = j[key];
  if constexpr (std::is_same_v<T, bool>) {
    HC_CHECK(v.is_boolean(), "{}: \"{}\" must be true or false, not {}", file.string(), key,
             v.dump());
  } else if constexpr (std::is_integral_v<T>) {
    HC_CHECK(v.is_number_integer(), "{}: \"{}\" must be an integer, not {}", file.string(), key,
             v.dump());
  } else if constexpr (std::is_floating_point_v<T>) {
    HC_CHECK(v.is_number(), "{}: \"{}\" must be a number, not {}", file.string(), key, v.dump());
  } else {
    HC_CHECK(v.is_string(), "{}: \"{}\" must be a string, not {}", file.string(), key, v.dump());
  }
  return v.get<T>();
}

struct MarianConfig {
  ModelConfig model;
  model::Architecture arch;
  int64_t vocab_size = 0, pad = 0, eos = 0;  // Marian's ids (unk comes from vocab.json)
  bool separate = false;   // separate source and target vocabularies (target_vocab.json)
  bool tie_output = true;  // the output matrix is the (target side's) embedding
  json original;
};

Activation activation_of(const std::string& name, const fs::path& file) {
  if (name == "swish" || name == "silu") return Activation::kSwish;
  if (name == "gelu") return Activation::kGelu;
  if (name == "relu") return Activation::kRelu;
  HC_FAIL(
      "{}: \"activation_function\" is \"{}\"; headcount's models have swish (silu), gelu or relu",
      file.string(), name);
}

// Per-layer head counts of a natively exported pruned model ("headcount_heads").
model::Architecture native_heads(const json& j, const fs::path& file, const ModelConfig& m) {
  model::Architecture a = model::Architecture::uniform(m);
  if (!j.contains("headcount_heads")) return a;
  const auto& h = j["headcount_heads"];
  try {
    a = model::Architecture::from_json(h);
  } catch (const std::exception& e) {
    HC_FAIL("{}: \"headcount_heads\" is not an architecture ({})", file.string(), e.what());
  }
  a.head_dim = m.d_model / m.heads;
  try {
    a.check_against(m);
  } catch (const Error& e) {
    HC_FAIL("{}: \"headcount_heads\" does not fit the layers: {}", file.string(), e.what());
  }
  return a;
}

MarianConfig read_config(const json& original, const fs::path& file) {
  MarianConfig c;
  c.original = original;
  const json& j = c.original;
  HC_CHECK(j.is_object(), "{}: expected a JSON object", file.string());
  const auto type = value<std::string>(j, "model_type", file, std::string("marian"));
  HC_CHECK(type == "marian", "{}: \"model_type\" is \"{}\"; `import` reads MarianMT models",
           file.string(), type);
  auto& m = c.model;
  m.d_model = value<int>(j, "d_model", file);
  m.encoder_layers = value<int>(j, "encoder_layers", file);
  m.decoder_layers = value<int>(j, "decoder_layers", file);
  m.heads = value<int>(j, "encoder_attention_heads", file);
  m.ffn_dim = value<int>(j, "encoder_ffn_dim", file);
  HC_CHECK(m.d_model > 0 && m.heads > 0 && m.d_model % m.heads == 0 && m.ffn_dim > 0 &&
               m.encoder_layers > 0 && m.decoder_layers > 0,
           "{}: d_model {} with {} heads, ffn {}, {} + {} layers: expected positive sizes and "
           "d_model divisible by the heads",
           file.string(), m.d_model, m.heads, m.ffn_dim, m.encoder_layers, m.decoder_layers);
  HC_CHECK(value<int>(j, "decoder_attention_heads", file, m.heads) == m.heads &&
               value<int>(j, "decoder_ffn_dim", file, m.ffn_dim) == m.ffn_dim,
           "{}: the decoder's heads or ffn dim differ from the encoder's; headcount's model has "
           "one of each",
           file.string());
  m.activation = activation_of(value<std::string>(j, "activation_function", file), file);
  m.positions = PositionLayout::kHalves;
  m.output_bias = true;
  m.pre_norm = false;
  m.max_positions = value<int>(j, "max_position_embeddings", file);
  HC_CHECK(m.max_positions > 1, "{}: \"max_position_embeddings\" must be > 1", file.string());
  m.dropout = value<double>(j, "dropout", file, 0.1);
  m.attention_dropout = value<double>(j, "attention_dropout", file, 0.0);
  m.activation_dropout = value<double>(j, "activation_dropout", file, 0.0);
  c.tie_output = value<bool>(j, "tie_word_embeddings", file, true);
  c.separate = !value<bool>(j, "share_encoder_decoder_embeddings", file, true);
  // headcount's tie_embeddings is one matrix for source, target and output.
  m.tie_embeddings = c.tie_output && !c.separate;
  // What HF's Marian code does not do, or headcount's model cannot.
  HC_CHECK(value<bool>(j, "scale_embedding", file, false),
           "{}: \"scale_embedding\" is false; headcount scales embeddings by sqrt(d_model) as "
           "OPUS-MT models do",
           file.string());
  for (const char* key : {"normalize_before", "normalize_embedding", "add_final_layer_norm"})
    HC_CHECK(!value<bool>(j, key, file, false),
             "{}: \"{}\" is true; MarianMT models are post-norm without embedding or final "
             "layer norms, and so is the import",
             file.string(), key);
  const auto V = value<int64_t>(j, "vocab_size", file);
  HC_CHECK(value<int64_t>(j, "decoder_vocab_size", file, V) == V,
           "{}: \"decoder_vocab_size\" differs from \"vocab_size\" ({}): vocabularies of two "
           "sizes are not imported (HF's conversion of Marian models gives both one size)",
           file.string(), V);
  const auto pad = value<int64_t>(j, "pad_token_id", file);
  const auto start = value<int64_t>(j, "decoder_start_token_id", file, pad);
  HC_CHECK(start == pad,
           "{}: \"decoder_start_token_id\" ({}) is not \"pad_token_id\" ({}); MarianMT starts "
           "decoding with pad, and so does the import",
           file.string(), start, pad);
  c.vocab_size = V;
  c.pad = pad;
  c.eos = value<int64_t>(j, "eos_token_id", file);
  c.arch = native_heads(j, file, m);
  return c;
}

// vocab.json: piece -> Marian id, every id of [0, V) once. Returns the pieces by Marian id.
std::vector<std::string> read_vocab_json(const fs::path& file, int64_t size) {
  const json j = read_json_file(file);
  HC_CHECK(j.is_object(), "{}: expected a JSON object of piece -> id", file.string());
  HC_CHECK(static_cast<int64_t>(j.size()) == size,
           "{}: {} pieces, but config.json's vocab_size is {}: not this model's vocabulary",
           file.string(), j.size(), size);
  std::vector<std::string> pieces(size);
  std::vector<bool> seen(size, false);
  for (const auto& [piece, id] : j.items()) {
    HC_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < size,
             "{}: \"{}\" has id {}; expected an integer in [0, {})", file.string(), piece,
             id.dump(), size);
    const auto i = id.get<int64_t>();
    HC_CHECK(!seen[i], "{}: id {} is given to two pieces (\"{}\" and \"{}\")", file.string(), i,
             pieces[i], piece);
    seen[i] = true;
    pieces[i] = piece;
  }
  return pieces;
}

// The tensors of model.safetensors (preferred) or pytorch_model.bin, as float32, by name.
std::map<std::string, torch::Tensor> read_weights(const fs::path& folder, fs::path* used) {
  std::error_code ec;
  std::map<std::string, torch::Tensor> out;
  const fs::path st = folder / "model.safetensors", bin = folder / "pytorch_model.bin";
  if (fs::exists(st, ec)) {
    *used = st;
    for (auto& [name, t] : model::read_safetensors(st).tensors) out[name] = t;
  } else {
    HC_CHECK(fs::exists(bin, ec), "{}: neither model.safetensors nor pytorch_model.bin",
             folder.string());
    *used = bin;
    const auto bytes = io::read_file(bin);
    c10::IValue v;
    try {
      v = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    } catch (const std::exception& e) {
      HC_FAIL("{}: not a PyTorch state dict LibTorch can read: {}", bin.string(), e.what());
    }
    HC_CHECK(v.isGenericDict(), "{}: expected a dict of name -> tensor", bin.string());
    for (const auto& item : v.toGenericDict()) {
      HC_CHECK(item.key().isString() && item.value().isTensor(),
               "{}: expected a dict of name -> tensor", bin.string());
      out[item.key().toStringRef()] = item.value().toTensor();
    }
  }
  for (auto& [name, t] : out) {
    HC_CHECK(t.is_floating_point(), "{}: {} is {}, not a floating-point tensor", used->string(),
             name, c10::toString(t.scalar_type()));
    t = t.to(torch::kFloat32).contiguous();
  }
  return out;
}

void copy_attention(TensorSet& w, const std::string& hf, model::MultiheadAttentionImpl& a) {
  const int64_t d = a.d_model(), inner = a.num_heads() * a.head_dim();
  std::vector<torch::Tensor> ws, bs;
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
    ws.push_back(w.take(hf + "." + p + ".weight", {inner, d}));
    bs.push_back(w.take(hf + "." + p + ".bias", {inner}));
  }
  const auto out_weight = w.take(hf + ".out_proj.weight", {d, inner});
  a.out_proj_bias.copy_(w.take(hf + ".out_proj.bias", {d}));
  if (a.num_heads() == 0) return;  // a layer without heads (a native export of a pruned model)
  a.in_proj_weight.copy_(torch::cat(ws, 0));
  a.in_proj_bias.copy_(torch::cat(bs, 0));
  a.out_proj_weight.copy_(out_weight);
}

void copy_norm(TensorSet& w, const std::string& hf, torch::nn::LayerNormImpl& n, int64_t d) {
  n.weight.copy_(w.take(hf + ".weight", {d}));
  n.bias.copy_(w.take(hf + ".bias", {d}));
}

void copy_ffn(TensorSet& w, const std::string& hf, torch::nn::LinearImpl& fc1,
              torch::nn::LinearImpl& fc2, int64_t d, int64_t f) {
  fc1.weight.copy_(w.take(hf + ".fc1.weight", {f, d}));
  fc1.bias.copy_(w.take(hf + ".fc1.bias", {f}));
  fc2.weight.copy_(w.take(hf + ".fc2.weight", {d, f}));
  fc2.bias.copy_(w.take(hf + ".fc2.bias", {d}));
}

// Marian-ordered rows [V, ...] into headcount's order [V + 1, ...] with `first` in row 0.
torch::Tensor to_headcount_rows(const torch::Tensor& rows, const MarianIds& ids,
                                const torch::Tensor& first) {
  const std::vector<int64_t> order(ids.to_marian.begin() + 1, ids.to_marian.end());
  return torch::cat({first.unsqueeze(0), rows.index_select(0, torch::tensor(order))}, 0);
}

void fill_model(model::TransformerImpl& m, TensorSet& w, const MarianConfig& c,
                const MarianIds& ids) {
  torch::NoGradGuard no_grad;
  const int64_t d = c.model.d_model, f = c.model.ffn_dim, V = ids.size;
  const auto zero_row = torch::zeros({d});
  if (c.separate) {
    // The encoder's and the decoder's own embeddings; the output is the decoder's (tied, as HF
    // ties lm_head to it) or lm_head.
    const auto dec = w.take("model.decoder.embed_tokens.weight", {V, d});
    m.src_embed->weight.copy_(
        to_headcount_rows(w.take("model.encoder.embed_tokens.weight", {V, d}), ids, zero_row));
    m.tgt_embed->weight.copy_(to_headcount_rows(dec, ids, zero_row));
    m.output_weight.copy_(
        to_headcount_rows(c.tie_output ? dec : w.take("lm_head.weight", {V, d}), ids, zero_row));
  } else {
    const auto shared = w.has("model.shared.weight")
                            ? w.take("model.shared.weight", {V, d})
                            : w.take("model.encoder.embed_tokens.weight", {V, d});
    m.src_embed->weight.copy_(to_headcount_rows(shared, ids, zero_row));
    if (!c.model.tie_embeddings) {
      m.tgt_embed->weight.copy_(to_headcount_rows(shared, ids, zero_row));
      m.output_weight.copy_(to_headcount_rows(w.take("lm_head.weight", {V, d}), ids, zero_row));
    }
  }
  const auto bias =
      w.has("final_logits_bias") ? w.take("final_logits_bias", {1, V})[0] : torch::zeros({V});
  m.output_bias.copy_(to_headcount_rows(bias, ids, torch::tensor(kExcludedLogit).to(bias)));
  for (size_t i = 0; i < m.encoder_layers.size(); ++i) {
    auto& L = *m.encoder_layers[i];
    const std::string p = fmt::format("model.encoder.layers.{}", i);
    copy_attention(w, p + ".self_attn", *L.self_attn);
    copy_norm(w, p + ".self_attn_layer_norm", *L.self_attn_norm, d);
    copy_ffn(w, p, *L.fc1, *L.fc2, d, f);
    copy_norm(w, p + ".final_layer_norm", *L.ffn_norm, d);
  }
  for (size_t i = 0; i < m.decoder_layers.size(); ++i) {
    auto& L = *m.decoder_layers[i];
    const std::string p = fmt::format("model.decoder.layers.{}", i);
    copy_attention(w, p + ".self_attn", *L.self_attn);
    copy_norm(w, p + ".self_attn_layer_norm", *L.self_attn_norm, d);
    copy_attention(w, p + ".encoder_attn", *L.cross_attn);
    copy_norm(w, p + ".encoder_attn_layer_norm", *L.cross_attn_norm, d);
    copy_ffn(w, p, *L.fc1, *L.fc2, d, f);
    copy_norm(w, p + ".final_layer_norm", *L.ffn_norm, d);
  }
  std::set<std::string> aliases = {"model.encoder.embed_tokens.weight",
                                   "model.decoder.embed_tokens.weight"};
  if (c.tie_output) aliases.insert("lm_head.weight");
  // Every tensor used, or one HF drops anyway (position tables, tied aliases).
  std::vector<std::string> left;
  for (const auto& name : w.left_over())
    if (!aliases.count(name) && name.find("embed_positions") == std::string::npos)
      left.push_back(name);
  HC_CHECK(left.empty(), "{}: tensors the MarianMT model does not have: {}", w.file().string(),
           fmt::join(left, ", "));
}

void require_file(const fs::path& f) {
  std::error_code ec;
  HC_CHECK(fs::is_regular_file(f, ec),
           "{}: missing (a MarianMT folder has config.json, "
           "model.safetensors or pytorch_model.bin, source.spm, target.spm and vocab.json)",
           f.string());
}

// A Hugging Face folder: its configuration and file names (the vocabulary and the weights are
// read once the configuration is checked).
MarianSource hf_source(const fs::path& folder) {
  for (const char* name : {"config.json", "vocab.json", "source.spm", "target.spm"})
    require_file(folder / name);
  MarianSource s;
  s.layout = "hf";
  s.config_file = folder / "config.json";
  s.config = read_json_file(s.config_file);
  s.vocab_file = folder / "vocab.json";
  s.source_spm = folder / "source.spm";
  s.target_spm = folder / "target.spm";
  std::error_code ec;
  if (fs::exists(folder / "tokenizer_config.json", ec))
    s.tokenizer_config = read_json_file(folder / "tokenizer_config.json");
  return s;
}

// The piece list in headcount's order; row 0 (headcount's pad) is a name no text produces.
std::vector<std::string> headcount_pieces(const std::vector<std::string>& marian,
                                          const MarianIds& ids) {
  std::vector<std::string> pieces(ids.size + 1);
  pieces[0] = "<headcount:pad>";
  for (int64_t i = 0; i < ids.size; ++i) pieces[ids.to_headcount[i]] = marian[i];
  return pieces;
}

// A side's pieces: the model's size, and (target side) the source side's special ids.
void check_pieces(const std::vector<std::string>& pieces, const fs::path& file,
                  const MarianConfig& c, const MarianIds* ids) {
  HC_CHECK(static_cast<int64_t>(pieces.size()) == c.vocab_size,
           "{}: {} pieces, but the model's vocab_size is {}", file.string(), pieces.size(),
           c.vocab_size);
  HC_CHECK(std::find(pieces.begin(), pieces.end(), "<unk>") != pieces.end(),
           "{}: no \"<unk>\" piece", file.string());
  if (ids == nullptr) return;
  for (const auto& [piece, id] :
       {std::pair{"<unk>", ids->unk}, std::pair{"</s>", ids->eos}, std::pair{"<pad>", ids->pad}})
    HC_CHECK(pieces[id] == piece,
             "{}: id {} is \"{}\", the source vocabulary's {} is {}: the two vocabularies must "
             "give the specials the same ids",
             file.string(), id, pieces[id], piece, id);
}

// The checkpoint of an import: config, weights, the two SentencePiece models beside the piece
// list(s), the origin record.
void write_checkpoint(const fs::path& out, const fs::path& folder, const MarianSource& s,
                      const MarianConfig& c, const MarianIds& ids, model::Transformer& m) {
  std::error_code ec;
  const auto pieces = headcount_pieces(s.pieces, ids);
  Config config;
  config.model = c.model;
  config.vocab.joint = true;  // one id space (the piece list), two SentencePiece models
  config.train.max_len = std::min(config.train.max_len, c.model.max_positions - 1);
  const fs::path tmp = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  const fs::path stage = tmp / fmt::format(".{}.import-{}", out.filename().string(), ::getpid());
  fs::create_directories(stage);
  data::VocabFiles files;
  files.joint = false;
  files.src_model = stage / "src.model";
  files.tgt_model = stage / "tgt.model";
  files.pieces = stage / (c.separate ? data::piece_list_name("src") : data::kPieceListFile);
  if (c.separate) files.tgt_pieces = stage / data::piece_list_name("tgt");
  // Where the model came from travels with the piece list into every checkpoint made from it
  // (fine-tuned, pruned), for the export.
  json record = {
      {"folder", fs::absolute(folder).lexically_normal().string()},
      {"layout", s.layout},
      {"weights", s.weights_file.filename().string()},
      {"weights_fnv1a", io::hex64(io::hash_file(s.weights_file))},
      {"marian_ids", {{"size", ids.size}, {"pad", ids.pad}, {"eos", ids.eos}, {"unk", ids.unk}}},
      {"config_json", c.original}};
  if (s.tokenizer_config) record["tokenizer_config_json"] = *s.tokenizer_config;
  try {
    io::write_file_atomic(files.pieces,
                          json{{"pieces", pieces}, {kOriginKey, record}}.dump(1) + "\n");
    if (c.separate)
      io::write_file_atomic(files.tgt_pieces,
                            json{{"pieces", headcount_pieces(s.tgt_pieces, ids)}}.dump(1) + "\n");
    // Each SentencePiece model must load as the checkpoint will load it (beside the list).
    for (const auto& [from, to] :
         {std::pair{s.source_spm, files.src_model}, std::pair{s.target_spm, files.tgt_model}}) {
      fs::copy_file(from, to, fs::copy_options::overwrite_existing);
      try {
        (void)data::Vocab::load(to);
      } catch (const Error& e) {
        HC_FAIL("{}: not a valid SentencePiece model ({})", from.string(), e.what());
      }
    }
    run::save_checkpoint(out, m, nullptr, run::TrainState{}, config, files);
  } catch (...) {
    fs::remove_all(stage, ec);
    throw;
  }
  fs::remove_all(stage, ec);
}

}  // namespace

ImportResult import_marian(const fs::path& folder, const fs::path& out) {
  std::error_code ec;
  HC_CHECK(fs::is_directory(folder, ec), "{}: not a folder", folder.string());
  HC_CHECK(!fs::exists(out, ec) || fs::is_empty(out, ec),
           "{} exists and is not empty: refusing to overwrite it", out.string());
  const bool native = is_marian_native_folder(folder);
  HC_CHECK(native || fs::exists(folder / "config.json", ec),
           "{}: neither a Hugging Face MarianMT folder (config.json, model.safetensors or "
           "pytorch_model.bin, source.spm, target.spm, vocab.json) nor Marian's own layout (a "
           ".npz model with its vocab.yml, source.spm, target.spm, usually decoder.yml)",
           folder.string());
  MarianSource s = native ? read_marian_native(folder) : hf_source(folder);
  const MarianConfig c = read_config(s.config, s.config_file);
  if (s.pieces.empty()) s.pieces = read_vocab_json(s.vocab_file, c.vocab_size);
  check_pieces(s.pieces, s.vocab_file, c, nullptr);
  const int64_t unk = std::find(s.pieces.begin(), s.pieces.end(), "<unk>") - s.pieces.begin();
  const auto ids = MarianIds::make(c.vocab_size, c.pad, c.eos, unk);
  if (c.separate && s.tgt_pieces.empty()) {
    s.tgt_vocab_file = folder / "target_vocab.json";
    require_file(s.tgt_vocab_file);
    s.tgt_pieces = read_vocab_json(s.tgt_vocab_file, c.vocab_size);
  }
  if (c.separate) check_pieces(s.tgt_pieces, s.tgt_vocab_file, c, &ids);
  if (s.tensors.empty()) s.tensors = read_weights(folder, &s.weights_file);
  TensorSet w(std::move(s.tensors), s.weights_file, "tensor", "config.json");
  const int64_t V = ids.size + 1;
  model::Transformer m(c.model, c.arch, V, V);
  fill_model(*m, w, c, ids);

  write_checkpoint(out, folder, s, c, ids, m);
  ImportResult r;
  r.architecture = m->architecture();
  r.vocab_size = V;
  r.weights_file = s.weights_file.string();
  for (const auto& p : m->parameters()) r.parameters += p.numel();
  return r;
}

namespace {

// One attention layer's tensors in HF's names: q/k/v/out of `heads` heads, the model's own heads
// first and zero-filled ones after them (compatible export of a pruned layer).
void add_attention(std::vector<std::pair<std::string, torch::Tensor>>& out, const std::string& hf,
                   const model::MultiheadAttentionImpl& a, int64_t heads) {
  const int64_t d = a.d_model(), Dh = a.head_dim(), own = a.num_heads() * Dh;
  const int64_t inner = heads * Dh;
  for (int part = 0; part < 3; ++part) {
    auto w = torch::zeros({inner, d});
    auto b = torch::zeros({inner});
    if (own > 0) {
      w.narrow(0, 0, own).copy_(a.in_proj_weight.narrow(0, part * own, own));
      b.narrow(0, 0, own).copy_(a.in_proj_bias.narrow(0, part * own, own));
    }
    const char* name = part == 0 ? "q_proj" : part == 1 ? "k_proj" : "v_proj";
    out.emplace_back(hf + "." + name + ".weight", w);
    out.emplace_back(hf + "." + name + ".bias", b);
  }
  auto o = torch::zeros({d, inner});
  if (own > 0) o.narrow(1, 0, own).copy_(a.out_proj_weight);
  out.emplace_back(hf + ".out_proj.weight", o);
  out.emplace_back(hf + ".out_proj.bias", a.out_proj_bias.clone());
}

void add_norm(std::vector<std::pair<std::string, torch::Tensor>>& out, const std::string& hf,
              const torch::nn::LayerNormImpl& n) {
  out.emplace_back(hf + ".weight", n.weight.clone());
  out.emplace_back(hf + ".bias", n.bias.clone());
}

void add_ffn(std::vector<std::pair<std::string, torch::Tensor>>& out, const std::string& hf,
             const torch::nn::LinearImpl& fc1, const torch::nn::LinearImpl& fc2) {
  out.emplace_back(hf + ".fc1.weight", fc1.weight.clone());
  out.emplace_back(hf + ".fc1.bias", fc1.bias.clone());
  out.emplace_back(hf + ".fc2.weight", fc2.weight.clone());
  out.emplace_back(hf + ".fc2.bias", fc2.bias.clone());
}

// The exported folder read back by import_marian: the largest difference of its logits from the
// model's own (Marian's pieces), teacher-forced on four fixed token sequences (24 source, 16
// target tokens).
double compare_with_reimport(const fs::path& folder, model::TransformerImpl& m, int64_t V) {
  std::error_code ec;
  const fs::path tmp =
      folder.parent_path() / fmt::format(".{}.verify-{}", folder.filename().string(), ::getpid());
  fs::remove_all(tmp, ec);
  import_marian(folder, tmp);
  auto back = run::load_model(run::read_checkpoint_info(tmp), torch::kCPU);
  fs::remove_all(tmp, ec);
  torch::NoGradGuard no_grad;
  back->eval();
  const bool was_training = m.is_training();
  m.eval();
  std::vector<int64_t> src, tgt;
  for (int64_t i = 0; i < 4 * 24; ++i) src.push_back(4 + (i * 7919 + 13) % (V - 4));
  for (int64_t i = 0; i < 4 * 16; ++i)
    tgt.push_back(i % 16 == 0 ? data::kBosId : 4 + (i * 104729 + 7) % (V - 4));
  const auto s = torch::tensor(src).view({4, 24});
  const auto t = torch::tensor(tgt).view({4, 16});
  // Column 0 (headcount's own pad row, not part of the Marian model) is left out: fine-tuning
  // may have moved its bias from kExcludedLogit, the import puts it back.
  const auto real = torch::indexing::Slice(1, torch::indexing::None);
  const double diff =
      (m.forward(s, t).index({"...", real}) - back->forward(s, t).index({"...", real}))
          .abs()
          .max()
          .item<double>();
  m.train(was_training);
  return diff;
}

// Every tensor of the MarianMT state dict, in HF's names and Marian's id order.
// Separate vocabularies: the encoder's and the decoder's embeddings under their own names, and
// lm_head where the output matrix is not the decoder's embedding (`untied_output`).
std::vector<std::pair<std::string, torch::Tensor>> marian_tensors(model::TransformerImpl* m,
                                                                  const ModelConfig& mc,
                                                                  const MarianIds& ids,
                                                                  ExportMode mode, bool separate,
                                                                  bool untied_output) {
  torch::NoGradGuard no_grad;
  const auto marian_order = torch::tensor(ids.to_headcount);
  std::vector<std::pair<std::string, torch::Tensor>> t;
  auto rows = [&](const torch::Tensor& w) { return w.index_select(0, marian_order); };
  t.emplace_back("final_logits_bias", rows(m->output_bias).unsqueeze(0));
  if (separate) {
    t.emplace_back("model.encoder.embed_tokens.weight", rows(m->src_embed->weight));
    t.emplace_back("model.decoder.embed_tokens.weight", rows(m->tgt_embed->weight));
    if (untied_output) t.emplace_back("lm_head.weight", rows(m->output_weight));
  } else {
    t.emplace_back("model.shared.weight", rows(m->src_embed->weight));
    if (!mc.tie_embeddings) t.emplace_back("lm_head.weight", rows(m->output_weight));
  }
  const bool native = mode == ExportMode::kNative;
  for (size_t i = 0; i < m->encoder_layers.size(); ++i) {
    const auto& L = *m->encoder_layers[i];
    const std::string p = fmt::format("model.encoder.layers.{}", i);
    add_attention(t, p + ".self_attn", *L.self_attn, native ? L.self_attn->num_heads() : mc.heads);
    add_norm(t, p + ".self_attn_layer_norm", *L.self_attn_norm);
    add_ffn(t, p, *L.fc1, *L.fc2);
    add_norm(t, p + ".final_layer_norm", *L.ffn_norm);
  }
  for (size_t i = 0; i < m->decoder_layers.size(); ++i) {
    const auto& L = *m->decoder_layers[i];
    const std::string p = fmt::format("model.decoder.layers.{}", i);
    add_attention(t, p + ".self_attn", *L.self_attn, native ? L.self_attn->num_heads() : mc.heads);
    add_norm(t, p + ".self_attn_layer_norm", *L.self_attn_norm);
    add_attention(t, p + ".encoder_attn", *L.cross_attn,
                  native ? L.cross_attn->num_heads() : mc.heads);
    add_norm(t, p + ".encoder_attn_layer_norm", *L.cross_attn_norm);
    add_ffn(t, p, *L.fc1, *L.fc2);
    add_norm(t, p + ".final_layer_norm", *L.ffn_norm);
  }
  return t;
}

// The origin record an imported checkpoint carries in its piece list, with the model checked
// against what MarianMT can hold.
json import_record(const run::CheckpointInfo& info, const fs::path& checkpoint) {
  HC_CHECK(!info.vocab.pieces.empty(),
           "{}: not a model imported from MarianMT (its vocab/ has no {}): only `headcount "
           "import`ed models, and the runs that start from them, export to MarianMT",
           checkpoint.string(), data::kPieceListFile);
  const json list = read_json_file(info.vocab.pieces);
  HC_CHECK(list.contains(kOriginKey) && list[kOriginKey].is_object(),
           "{}: no \"{}\" record: not a MarianMT import", info.vocab.pieces.string(), kOriginKey);
  const auto& mc = info.config.model;
  HC_CHECK(mc.positions == PositionLayout::kHalves && mc.output_bias && !mc.pre_norm,
           "{}: model.positions, model.output_bias or model.pre_norm differ from MarianMT's "
           "(halves, true, false)",
           checkpoint.string());
  return list[kOriginKey];
}

}  // namespace

ExportResult export_marian(const fs::path& checkpoint, const fs::path& out, ExportMode mode) {
  std::error_code ec;
  HC_CHECK(!fs::exists(out, ec) || fs::is_empty(out, ec),
           "{} exists and is not empty: refusing to overwrite it", out.string());
  const auto info = run::read_checkpoint_info(checkpoint);
  const json origin = import_record(info, checkpoint);
  const auto& mc = info.config.model;
  const auto& ids_json = origin.at("marian_ids");
  const auto ids =
      MarianIds::make(ids_json.at("size").get<int64_t>(), ids_json.at("pad").get<int64_t>(),
                      ids_json.at("eos").get<int64_t>(), ids_json.at("unk").get<int64_t>());
  HC_CHECK(info.tgt_vocab_size == ids.size + 1, "{}: {} pieces, the record says {} + 1",
           checkpoint.string(), info.tgt_vocab_size, ids.size);
  auto m = run::load_model(info, torch::kCPU);
  const bool separate_vocabs = !info.vocab.tgt_pieces.empty();
  // A shared vocabulary with an untied output gives headcount's model its own source and target
  // embeddings; once training has moved them apart, HF's one shared matrix cannot hold both, so
  // the model is written with separate embeddings (and the same vocabulary twice).
  const bool split = !separate_vocabs && !mc.tie_embeddings &&
                     !torch::equal(m->src_embed->weight, m->tgt_embed->weight);
  const bool separate = separate_vocabs || split;
  // An import ties the output to the decoder's embedding as the folder did; training on keeps
  // them apart (headcount's model has its own output matrix there), so lm_head is written then.
  const bool untied_output = separate && !torch::equal(m->output_weight, m->tgt_embed->weight);
  const auto t = marian_tensors(m.get(), mc, ids, mode, separate, untied_output);
  const bool native = mode == ExportMode::kNative;
  // config.json: the original, with the weights' own sizes; native: the per-layer heads.
  json config = origin.at("config_json");
  if (untied_output) config["tie_word_embeddings"] = false;
  json tokenizer_config = origin.value("tokenizer_config_json", json());
  if (split) {
    config["share_encoder_decoder_embeddings"] = false;
    if (tokenizer_config.is_null()) tokenizer_config = json::object();
    tokenizer_config["separate_vocabs"] = true;
  }
  config["d_model"] = mc.d_model;
  config["encoder_ffn_dim"] = config["decoder_ffn_dim"] = mc.ffn_dim;
  config["activation_function"] = std::string(choice_name(mc.activation));
  config.erase("headcount_heads");
  if (native) config["headcount_heads"] = m->architecture().to_json();
  auto vocab_of = [&](const fs::path& list) {
    json vocab = json::object();
    const auto pieces = data::read_piece_list(list);
    for (int64_t i = 0; i < ids.size; ++i) vocab[pieces[ids.to_headcount[i]]] = i;
    return vocab;
  };
  // Everything in a staging folder, renamed into place at the end.
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  fs::create_directories(parent);
  const fs::path stage = parent / fmt::format(".{}.export-{}", out.filename().string(), ::getpid());
  fs::remove_all(stage, ec);
  fs::create_directories(stage);
  try {
    model::write_safetensors(stage / "model.safetensors", {t, {{"format", "pt"}}});
    io::write_file_atomic(stage / "config.json", config.dump(2) + "\n");
    io::write_file_atomic(stage / "vocab.json", vocab_of(info.vocab.pieces).dump(2) + "\n");
    if (separate)
      io::write_file_atomic(
          stage / "target_vocab.json",
          vocab_of(separate_vocabs ? info.vocab.tgt_pieces : info.vocab.pieces).dump(2) + "\n");
    if (!tokenizer_config.is_null())
      io::write_file_atomic(stage / "tokenizer_config.json", tokenizer_config.dump(2) + "\n");
    fs::copy_file(info.vocab.src_model, stage / "source.spm");
    fs::copy_file(info.vocab.tgt_model, stage / "target.spm");
    fs::remove(out, ec);  // an empty folder
    fs::rename(stage, out);
  } catch (...) {
    fs::remove_all(stage, ec);
    throw;
  }
  ExportResult r;
  r.architecture = m->architecture();
  r.tensors = static_cast<int64_t>(t.size());
  r.bytes = static_cast<int64_t>(fs::file_size(out / "model.safetensors"));
  r.max_abs_logit_diff = compare_with_reimport(out, *m, ids.size + 1);
  return r;
}

}  // namespace headcount::interop
