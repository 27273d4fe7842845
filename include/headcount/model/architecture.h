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

}  // namespace headcount::model
