#include "headcount/data/links.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "headcount/common/check.h"
#include "headcount/common/io.h"

namespace headcount::data {

std::string format_links(std::vector<WordLink> links) {
  std::sort(links.begin(), links.end(), [](const WordLink& a, const WordLink& b) {
    return a.tgt != b.tgt ? a.tgt < b.tgt : a.src < b.src;
  });
  std::string out;
  for (const auto& l : links) {
    if (!out.empty()) out.push_back(' ');
    out += fmt::format("{}{}{}", l.src, l.sure ? '-' : '?', l.tgt);
  }
  return out;
}

std::vector<WordLink> parse_links(const std::string& line, const std::string& where) {
  std::vector<WordLink> out;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    size_t end = line.find(' ', i);
    if (end == std::string::npos) end = line.size();
    const std::string token = line.substr(i, end - i);
    i = end;
    const size_t sep = token.find_first_of("-?");
    WordLink l;
    auto number = [&](size_t from, size_t to, int32_t* v) {
      const char* first = token.data() + from;
      const char* last = token.data() + to;
      const auto [p, ec] = std::from_chars(first, last, *v);
      return to > from && ec == std::errc() && p == last && *v >= 0;
    };
    HC_CHECK(
        sep != std::string::npos && number(0, sep, &l.src) && number(sep + 1, token.size(), &l.tgt),
        "{}: bad link '{}' (expected S-T or S?T with 0-based word indices)", where, token);
    l.sure = token[sep] == '-';
    out.push_back(l);
  }
  return out;
}

std::vector<std::vector<WordLink>> read_links(const fs::path& path) {
  const auto lines = io::read_lines(path, {.allow_empty_file = true});
  std::vector<std::vector<WordLink>> out;
  out.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i)
    out.push_back(parse_links(lines[i], fmt::format("{} line {}", path.string(), i + 1)));
  return out;
}

}  // namespace headcount::data
