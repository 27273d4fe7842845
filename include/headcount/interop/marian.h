// Hugging Face MarianMT folders (what OPUS-MT publishes: config.json, model.safetensors and/or
// pytorch_model.bin, source.spm, target.spm, vocab.json) in and out of headcount checkpoints.
//
// The model: post-norm layers, the FFN's activation from config.json (swish for OPUS-MT),
// embeddings scaled by sqrt(d) and shared by encoder, decoder and output (tie_word_embeddings
// false: a separate output matrix), sinusoidal positions in halves from position 0, and
// final_logits_bias: model.activation, model.positions: halves and model.output_bias.
//
// The vocabulary: Marian's ids (eos 0, unk 1, the pieces, pad last) are permuted into
// headcount's fixed specials: pad 0 (a row of its own: zero embedding and an output bias of
// kExcludedLogit, so that it takes no probability), unk 1, bos 2 = Marian's pad (Marian's
// decoder starts with pad, and both ban it from the output), eos 3, then the other pieces in
// Marian's order. The checkpoint's vocab/ holds the two SentencePiece models and the piece list
// (data::kPieceListFile) through which Vocab encodes as MarianTokenizer does; the piece list also
// keeps (kOriginKey) the original config.json, tokenizer_config.json and id layout, so that any
// checkpoint made from the import (fine-tuned, pruned) exports back.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headcount/model/architecture.h"

namespace headcount::interop {

namespace fs = std::filesystem;

// The output bias of headcount's extra pad row: exp(-100) is 0 in fp32 next to any real logit.
inline constexpr double kExcludedLogit = -100.0;
inline constexpr const char* kOriginKey = "hf_marian";

// Marian id <-> headcount id for a vocabulary of `size` Marian ids with the given specials.
struct MarianIds {
  int64_t size = 0;  // Marian's vocab_size V; headcount's is V + 1
  int64_t pad = 0, eos = 0, unk = 0;
  std::vector<int64_t> to_headcount;  // [V]
  std::vector<int64_t> to_marian;     // [V + 1], -1 at headcount's pad
  static MarianIds make(int64_t size, int64_t pad, int64_t eos, int64_t unk);
};

struct ImportResult {
  model::Architecture architecture;
  int64_t vocab_size = 0;  // headcount's (Marian's + 1)
  std::string weights_file;
  int64_t parameters = 0;
};

// Reads the folder, checks every file against config.json (an error names the file and what it
// expected) and writes a checkpoint at `out` (which must not exist or be empty).
ImportResult import_marian(const fs::path& folder, const fs::path& out);

enum class ExportMode {
  kCompatible,  // every layer with the config's head count, removed heads zero-filled
  kNative,      // per-layer head counts (config.json's "headcount_heads"); loads in headcount
};

struct ExportResult {
  model::Architecture architecture;
  int64_t tensors = 0;
  int64_t bytes = 0;  // model.safetensors
  // The folder imported back: max |logit difference| from the checkpoint's model on fixed token
  // sequences (0 expected for both modes: zero-filled heads contribute exactly 0).
  double max_abs_logit_diff = 0;
};

// Writes an imported (possibly pruned or fine-tuned) checkpoint as a MarianMT folder.
ExportResult export_marian(const fs::path& checkpoint, const fs::path& out, ExportMode mode);

}  // namespace headcount::interop
