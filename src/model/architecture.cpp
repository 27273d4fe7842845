#include "headcount/model/architecture.h"

#include <algorithm>
#include <numeric>

#include "headcount/common/check.h"

namespace headcount::model {

const char* attention_name(AttentionType t) {
  switch (t) {
    case AttentionType::kEncSelf:
      return "enc_self";
    case AttentionType::kDecSelf:
      return "dec_self";
    case AttentionType::kEncDec:
      return "enc_dec";
  }
  return "?";
}

std::string HeadId::label() const {
  return fmt::format("{} L{} H{}", attention_name(type), layer, head);
}

AttentionType attention_from_name(const std::string& name) {
  for (auto t : kAttentionTypes) {
    if (name == attention_name(t)) return t;
  }
  HC_FAIL("unknown attention type '{}': expected enc_self, dec_self or enc_dec", name);
}

Architecture Architecture::uniform(const ModelConfig& m) {
  Architecture a;
  a.head_dim = m.head_dim > 0 ? m.head_dim : m.d_model / m.heads;
  a.enc_self.assign(m.encoder_layers, m.heads);
  a.dec_self.assign(m.decoder_layers, m.heads);
  a.enc_dec.assign(m.decoder_layers, m.heads);
  return a;
}

std::vector<int64_t>& Architecture::heads(AttentionType t) {
  return t == AttentionType::kEncSelf   ? enc_self
         : t == AttentionType::kDecSelf ? dec_self
                                        : enc_dec;
}
const std::vector<int64_t>& Architecture::heads(AttentionType t) const {
  return t == AttentionType::kEncSelf   ? enc_self
         : t == AttentionType::kDecSelf ? dec_self
                                        : enc_dec;
}

int64_t Architecture::total(AttentionType t) const {
  const auto& h = heads(t);
  return std::accumulate(h.begin(), h.end(), int64_t{0});
}
int64_t Architecture::total() const {
  return total(AttentionType::kEncSelf) + total(AttentionType::kDecSelf) +
         total(AttentionType::kEncDec);
}

std::string Architecture::summary() const {
  return fmt::format("{}/{}/{}", total(AttentionType::kEncSelf), total(AttentionType::kDecSelf),
                     total(AttentionType::kEncDec));
}

bool Architecture::operator==(const Architecture& o) const {
  return enc_self == o.enc_self && dec_self == o.dec_self && enc_dec == o.enc_dec &&
         head_dim == o.head_dim;
}

nlohmann::json Architecture::to_json() const {
  return {{"head_dim", head_dim},
          {"enc_self", enc_self},
          {"dec_self", dec_self},
          {"enc_dec", enc_dec},
          {"heads_e_d_de", summary()}};
}

Architecture Architecture::from_json(const nlohmann::json& j) {
  Architecture a;
  // Whole numbers only: 1.7 heads would be read as 1.
  const auto whole = [&](const nlohmann::json& v, const char* key) {
    HC_CHECK(v.is_number_integer(), "invalid architecture: '{}' holds {}, expected whole numbers",
             key, v.dump());
    return v.get<int64_t>();
  };
  const auto list = [&](const char* key) {
    HC_CHECK(j.is_object() && j.contains(key) && j.at(key).is_array(),
             "invalid architecture: expected '{}', a list of head counts per layer", key);
    std::vector<int64_t> out;
    for (const auto& v : j.at(key)) out.push_back(whole(v, key));
    return out;
  };
  HC_CHECK(j.is_object() && j.contains("head_dim"), "invalid architecture: no 'head_dim'");
  a.head_dim = whole(j.at("head_dim"), "head_dim");
  a.enc_self = list("enc_self");
  a.dec_self = list("dec_self");
  a.enc_dec = list("enc_dec");
  // The ranges of the config keys they stand for (model.head_dim, model.*_layers, model.heads).
  HC_CHECK(a.head_dim > 0 && a.head_dim <= 4096,
           "invalid architecture: head_dim {}, expected 1 to 4096 (model.head_dim's range)",
           a.head_dim);
  for (auto t : kAttentionTypes) {
    HC_CHECK(!a.heads(t).empty() && a.heads(t).size() <= 64,
             "invalid architecture: {} layers of {}, expected 1 to 64", a.heads(t).size(),
             attention_name(t));
    for (auto h : a.heads(t))
      HC_CHECK(h >= 0 && h <= 256,
               "invalid architecture: {} heads in a {} layer, expected 0 to 256", h,
               attention_name(t));
  }
  return a;
}

void Architecture::check_against(const ModelConfig& m) const {
  const int64_t config_head_dim = m.head_dim > 0 ? m.head_dim : m.d_model / std::max(m.heads, 1);
  HC_CHECK(head_dim == config_head_dim,
           "architecture has heads of width {}, the model config {} (model.head_dim, or "
           "model.d_model / model.heads)",
           head_dim, config_head_dim);
  HC_CHECK(static_cast<int>(enc_self.size()) == m.encoder_layers &&
               static_cast<int>(dec_self.size()) == m.decoder_layers &&
               static_cast<int>(enc_dec.size()) == m.decoder_layers,
           "architecture has {} encoder and {} decoder layers, the model config {} and {}",
           enc_self.size(), dec_self.size(), m.encoder_layers, m.decoder_layers);
  for (auto t : kAttentionTypes) {
    for (auto h : heads(t)) {
      HC_CHECK(h <= m.heads || m.heads == 0,
               "architecture has {} heads in a {} layer, more than model.heads ({})", h,
               attention_name(t), m.heads);
    }
  }
}

// Multiply-add FLOPs (x2) of translating sentences with source lengths `src` (EOS included) into
// outputs of lengths `out` (EOS included) with `beam` rows each, incremental decoding: the
// matmuls only (projections, attention scores and sums, FFN, output layer).
double decode_flops(const Architecture& a, const ModelConfig& m, int64_t vocab,
                    const std::vector<int64_t>& src, const std::vector<int64_t>& out, int beam) {
  const double d = m.d_model, f = m.ffn_dim, dh = static_cast<double>(a.head_dim);
  double total = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    const double S = static_cast<double>(src[i]), T = static_cast<double>(out[i]);
    for (auto h : a.enc_self) {
      const double hd = h * dh;
      total += 2 * S * d * 3 * hd + 4 * S * S * hd + 2 * S * hd * d + 4 * S * d * f;
    }
    double per_row = 0;
    for (size_t l = 0; l < a.dec_self.size(); ++l) {
      const double hs = a.dec_self[l] * dh, hc = a.enc_dec[l] * dh;
      per_row += 2 * S * d * 2 * hc;                          // keys and values of the source
      per_row += T * (2 * d * 3 * hs + 2 * hs * d);           // self-attention projections
      per_row += 4 * hs * T * (T + 1) / 2;                    // scores and sums over the prefix
      per_row += T * (2 * d * hc + 2 * hc * d + 4 * S * hc);  // cross-attention
      per_row += T * 4 * d * f;                               // FFN
    }
    per_row += T * 2 * d * static_cast<double>(vocab);  // output layer
    total += beam * per_row;
  }
  return total;
}

}  // namespace headcount::model
