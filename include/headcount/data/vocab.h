// SentencePiece vocabularies: trained through the library API, cached by inputs and options.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "headcount/common/config.h"

// SentencePiece's model, behind libheadcount_spm.so's C interface (src/spm/backend.h).
struct hc_spm_processor;

namespace headcount::data {

namespace fs = std::filesystem;

// Fixed special ids, the same in every model headcount trains.
inline constexpr int kPadId = 0;
inline constexpr int kUnkId = 1;
inline constexpr int kBosId = 2;
inline constexpr int kEosId = 3;

class Vocab {
 public:
  static Vocab load(const fs::path& model_file);
  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  int size() const;
  std::string piece(int id) const;
  const fs::path& path() const { return path_; }

 private:
  struct Free {
    void operator()(hc_spm_processor* p) const;
  };
  Vocab();
  std::unique_ptr<hc_spm_processor, Free> sp_;
  fs::path path_;
};

struct VocabFiles {
  fs::path src_model;  // equal to tgt_model when joint
  fs::path tgt_model;
  bool joint = true;
  bool from_cache = false;
};

// Trains (or reuses from vocab.cache_dir) the model(s) on the training files. The cache key
// covers the files' contents and every option, so a changed corpus or size retrains.
VocabFiles train_or_load_vocab(const VocabConfig& config, const fs::path& train_src,
                               const fs::path& train_tgt, int seed, int threads);

// One model trained on `inputs`, written to `model_prefix`.model (low level). The model records no
// prefix, so the same inputs and options give the same bytes in any folder.
void train_sentencepiece(const std::vector<fs::path>& inputs, const fs::path& model_prefix,
                         const VocabConfig& config, int seed, int threads);

}  // namespace headcount::data
