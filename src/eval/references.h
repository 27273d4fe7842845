// Internal: sacreBLEU's handling of reference streams, shared by BLEU and chrF.
#pragma once

#include <string>
#include <vector>

#include "headcount/common/check.h"

namespace headcount::eval::detail {

// Checks stream lengths and returns, for each sentence, its references. As in sacreBLEU 2.6, an
// empty reference line is still a reference (of length 0), so `nrefs` is the number of streams.
inline std::vector<std::vector<const std::string*>> gather_references(
    size_t num_hyps, const std::vector<std::vector<std::string>>& refs, int* nrefs) {
  HC_CHECK(!refs.empty(), "no reference given");
  for (size_t k = 0; k < refs.size(); ++k) {
    HC_CHECK(refs[k].size() == num_hyps,
             "reference {} has {} lines but the hypothesis has {}: they must be line-aligned",
             k + 1, refs[k].size(), num_hyps);
  }
  std::vector<std::vector<const std::string*>> out(num_hyps);
  for (size_t i = 0; i < num_hyps; ++i) {
    for (const auto& stream : refs) out[i].push_back(&stream[i]);
  }
  *nrefs = static_cast<int>(refs.size());
  return out;
}

}  // namespace headcount::eval::detail
