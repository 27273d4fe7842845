// Which heads a model has: the number of heads of every attention layer, per attention type.
// A full model has the same count everywhere; a pruned one any count per layer, zero included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headcount/common/config.h"

namespace headcount::model {

enum class AttentionType { kEncSelf = 0, kDecSelf = 1, kEncDec = 2 };
inline constexpr AttentionType kAttentionTypes[] = {
    AttentionType::kEncSelf, AttentionType::kDecSelf, AttentionType::kEncDec};
// "enc_self", "dec_self", "enc_dec"
const char* attention_name(AttentionType t);
AttentionType attention_from_name(const std::string& name);

// One head: which attention type, which layer, which head of the layer (the one "which head"
// type of the project: gates, importance, analyses and run-folder files use it).
struct HeadId {
  AttentionType type = AttentionType::kEncSelf;
  int64_t layer = 0, head = 0;
  std::string label() const;  // "enc_self L2 H5"
  friend bool operator==(const HeadId& a, const HeadId& b) {
    return a.type == b.type && a.layer == b.layer && a.head == b.head;
  }
  friend bool operator<(const HeadId& a, const HeadId& b) {
    if (a.type != b.type) return static_cast<int>(a.type) < static_cast<int>(b.type);
    if (a.layer != b.layer) return a.layer < b.layer;
    return a.head < b.head;
  }
};

struct Architecture {
  std::vector<int64_t> enc_self;  // heads of each encoder layer's self-attention
  std::vector<int64_t> dec_self;  // heads of each decoder layer's self-attention
  std::vector<int64_t> enc_dec;   // heads of each decoder layer's encoder-decoder attention
  int64_t head_dim = 0;

  static Architecture uniform(const ModelConfig& m);
  std::vector<int64_t>& heads(AttentionType t);
  const std::vector<int64_t>& heads(AttentionType t) const;
  int64_t total(AttentionType t) const;
  int64_t total() const;
  // "48/48/48" (encoder / decoder / decoder-encoder heads, as Voita et al.'s table)
  std::string summary() const;
  bool operator==(const Architecture& o) const;
  nlohmann::json to_json() const;
  static Architecture from_json(const nlohmann::json& j);
  // Throws when the layer counts do not match the model config.
  void check_against(const ModelConfig& m) const;
};

// Multiply-add FLOPs (x2) of translating sentences with source lengths `src` (EOS included)
// into outputs of lengths `out` (EOS included) with `beam` rows each, by incremental decoding:
// the matmuls only (projections, attention scores and sums, FFN, output layer). The speed-up a
// pruned architecture should give is the ratio of two of these.
double decode_flops(const Architecture& a, const ModelConfig& m, int64_t vocab,
                    const std::vector<int64_t>& src, const std::vector<int64_t>& out, int beam);

}  // namespace headcount::model
