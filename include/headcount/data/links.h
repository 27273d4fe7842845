// Gold word alignments: one line per sentence pair, space-separated links "S-T" (sure) or "S?T"
// (possible), S and T the 0-based indices of the source and target words when the lines are
// split at spaces, sorted by (T, S); an empty line when a pair has none. (Pharaoh-style, as
// fast_align and the Och & Ney gold standards write alignments, with '?' for possible links.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace headcount::data {

namespace fs = std::filesystem;

struct WordLink {
  int32_t src = 0, tgt = 0;
  bool sure = true;
  bool operator==(const WordLink& o) const {
    return src == o.src && tgt == o.tgt && sure == o.sure;
  }
};

// One line of the format (links sorted by (T, S) first).
std::string format_links(std::vector<WordLink> links);
// Parses one line; `where` names it in errors ("FILE line N").
std::vector<WordLink> parse_links(const std::string& line, const std::string& where);
// Every line of a links file (an empty file is a file of no lines).
std::vector<std::vector<WordLink>> read_links(const fs::path& path);

}  // namespace headcount::data
