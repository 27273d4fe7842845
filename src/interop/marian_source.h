// What `headcount import` reads from a MarianMT model, whichever layout it comes in: a Hugging Face
// folder (config.json, vocab.json, model.safetensors / pytorch_model.bin) or Marian's own
// (model.npz with its special:model.yml, vocab.yml, decoder.yml), both with source.spm and
// target.spm. Marian's layout is converted as transformers' convert_marian_to_pytorch.py converts
// it: HF's config.json keys and tensor names, <pad> appended to the vocabulary with a zero
// embedding and a zero logit bias. Private to src/interop.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace headcount::interop {

struct MarianSource {
  std::string layout;                 // "hf" or "marian-npz"
  nlohmann::json config;              // config.json, or what HF's converter makes of model.yml
  std::filesystem::path config_file;  // names the configuration in errors
  std::filesystem::path vocab_file;
  std::vector<std::string> pieces;       // by Marian id; empty until read (HF: needs the config)
  std::filesystem::path tgt_vocab_file;  // separate vocabularies: the target side's
  std::vector<std::string> tgt_pieces;
  std::map<std::string, torch::Tensor> tensors;  // HF's names, float32; empty until read
  std::filesystem::path weights_file;
  std::filesystem::path source_spm, target_spm;
  std::optional<nlohmann::json> tokenizer_config;
};

// Named tensors taken one by one, each checked against the shape the model's configuration gives
// (errors name the file, the `noun` and where the shape comes from: "tensor" and "config.json",
// "array" and "model.yml"); left_over() lists what was never taken.
class TensorSet {
 public:
  TensorSet(std::map<std::string, torch::Tensor> tensors, std::filesystem::path file,
            std::string noun, std::string shapes_from);
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  torch::Tensor take(const std::string& name, const std::vector<int64_t>& shape);
  std::vector<std::string> left_over() const;
  const std::filesystem::path& file() const { return file_; }

 private:
  std::map<std::string, torch::Tensor> tensors_;
  std::set<std::string> taken_;
  std::filesystem::path file_;
  std::string noun_, shapes_from_;
};

// A folder in Marian's layout: no config.json, and model.npz files or a decoder.yml.
bool is_marian_native_folder(const std::filesystem::path& folder);

// Reads Marian's layout whole (configuration, vocabulary, tensors under HF's names). The model file
// and vocabulary are decoder.yml's (models:, vocabs:) where it exists, else the folder's one *.npz
// and one *vocab.yml. Errors name the file and key.
MarianSource read_marian_native(const std::filesystem::path& folder);

}  // namespace headcount::interop
