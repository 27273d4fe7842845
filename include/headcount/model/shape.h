// Whether two model configs describe models of one shape before pruning (a checkpoint, its pruned
// export, a prune run started from it): what an analysis or a benchmark pairing two of them checks.
#pragma once

#include <fmt/format.h>

#include <string>

#include "headcount/common/config.h"

namespace headcount::model {

inline bool same_shape(const ModelConfig& a, const ModelConfig& b) {
  return a.d_model == b.d_model && a.ffn_dim == b.ffn_dim && a.heads == b.heads &&
         a.encoder_layers == b.encoder_layers && a.decoder_layers == b.decoder_layers;
}

// "d_model 512, ffn 2048, heads 8, layers 6+6", for the messages of a mismatch.
inline std::string shape_summary(const ModelConfig& m) {
  return fmt::format("d_model {}, ffn {}, heads {}, layers {}+{}", m.d_model, m.ffn_dim, m.heads,
                     m.encoder_layers, m.decoder_layers);
}

}  // namespace headcount::model
