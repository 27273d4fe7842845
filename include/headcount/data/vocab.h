// SentencePiece vocabularies: trained through the library API, cached by inputs and options.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
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

// The piece list of an imported model (a Marian vocab.json), beside its SentencePiece models in
// a checkpoint's vocab/: the model's ids are positions in this list, not the SentencePiece
// model's own ids. Ids 0-3 are headcount's specials whatever their names. One list for both sides
// (kPieceListFile), or one per side (separate vocabularies: "src.pieces.json" beside src.model,
// "tgt.pieces.json" beside tgt.model; piece_list_name gives the name for a model's stem).
inline constexpr const char* kPieceListFile = "pieces.json";
inline std::string piece_list_name(const std::string& model_stem) {
  return model_stem + ".pieces.json";
}

class Vocab {
 public:
  // A SentencePiece model; with a piece list beside it (STEM.pieces.json, else kPieceListFile),
  // text is split into pieces
  // by the model and each piece takes its id from the list (MarianTokenizer's rule: a piece not in
  // the list is <unk>; no <s>), and decoding drops the specials and joins the pieces back.
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
  std::vector<std::string> pieces_;  // the piece list (empty: SentencePiece's own ids)
  std::unordered_map<std::string, int> piece_ids_;
};

// Reads a piece list file: {"pieces": [...]}, every piece a distinct string, at least the four
// specials. Errors name the file and the entry.
std::vector<std::string> read_piece_list(const fs::path& file);

struct VocabFiles {
  fs::path src_model;  // equal to tgt_model when joint
  fs::path tgt_model;
  fs::path pieces;      // kPieceListFile beside the models (imported models), or empty; with
                        // tgt_pieces, the source side's list
  fs::path tgt_pieces;  // the target side's list (imported models with separate vocabularies)
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
