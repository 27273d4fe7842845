#include "headcount/eval/tokenizers.h"

#include "headcount/common/check.h"
#include "headcount/common/text.h"

namespace headcount::eval {
namespace {

// Replaces every occurrence of `from` in `s` (left to right, non-overlapping, like Python's
// str.replace).
std::u32string replace(std::u32string s, std::u32string_view from, std::u32string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::u32string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

// Python's re.sub for a two-character pattern `(A)(B)` with replacement `pre \1 mid \2 post`:
// matches are found left to right and never overlap, so after a match the scan resumes after B.
template <typename First, typename Second>
std::u32string sub_pair(std::u32string_view s, First first, Second second, std::u32string_view pre,
                        std::u32string_view mid, std::u32string_view post) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out += pre;
      out.push_back(s[i]);
      out += mid;
      out.push_back(s[i + 1]);
      out += post;
      i += 2;
    } else {
      out.push_back(s[i]);
      i += 1;
    }
  }
  return out;
}

bool ascii_digit(char32_t c) {
  return c >= U'0' && c <= U'9';
}

// mteval-v13a's first rule: the class [\{-\~\[-\` -\&\(-\+\:-\@\/].
bool v13a_symbol(char32_t c) {
  return (c >= U'{' && c <= U'~') || (c >= U'[' && c <= U'`') || (c >= U' ' && c <= U'&') ||
         (c >= U'(' && c <= U'+') || (c >= U':' && c <= U'@') || c == U'/';
}

}  // namespace

void check_tokenizer_name(std::string_view name) {
  HC_CHECK(name == "13a" || name == "intl" || name == "none" || name == "char",
           "unknown tokenizer '{}': expected one of 13a, intl, none, char", name);
}

std::u32string tokenize_13a(std::u32string_view in) {
  std::u32string line(in);
  line = replace(std::move(line), U"<skipped>", U"");
  line = replace(std::move(line), U"-\n", U"");
  line = replace(std::move(line), U"\n", U" ");
  if (line.find(U'&') != std::u32string::npos) {
    line = replace(std::move(line), U"&quot;", U"\"");
    line = replace(std::move(line), U"&amp;", U"&");
    line = replace(std::move(line), U"&lt;", U"<");
    line = replace(std::move(line), U"&gt;", U">");
  }
  std::u32string s = U" " + line + U" ";
  // Rule 1: pad the symbol class with spaces.
  std::u32string padded;
  padded.reserve(s.size() * 2);
  for (char32_t c : s) {
    if (v13a_symbol(c)) {
      padded.push_back(U' ');
      padded.push_back(c);
      padded.push_back(U' ');
    } else {
      padded.push_back(c);
    }
  }
  auto not_digit = [](char32_t c) { return !ascii_digit(c); };
  auto period_comma = [](char32_t c) { return c == U'.' || c == U','; };
  // Rule 2: ([^0-9])([\.,]) -> "\1 \2 "
  s = sub_pair(padded, not_digit, period_comma, U"", U" ", U" ");
  // Rule 3: ([\.,])([^0-9]) -> " \1 \2"
  s = sub_pair(s, period_comma, not_digit, U" ", U" ", U"");
  // Rule 4: ([0-9])(-) -> "\1 \2 "
  s = sub_pair(
      s, ascii_digit, [](char32_t c) { return c == U'-'; }, U"", U" ", U" ");
  return text::collapse_spaces(s);
}

std::u32string tokenize_intl(std::u32string_view in) {
  auto not_number = [](char32_t c) { return !text::is_number(c); };
  auto punct = [](char32_t c) { return text::is_punctuation(c); };
  // (\P{N})(\p{P}) -> "\1 \2 "
  std::u32string s = sub_pair(in, not_number, punct, U"", U" ", U" ");
  // (\p{P})(\P{N}) -> " \1 \2"
  s = sub_pair(s, punct, not_number, U" ", U" ", U"");
  // (\p{S}) -> " \1 "
  std::u32string out;
  out.reserve(s.size() * 2);
  for (char32_t c : s) {
    if (text::is_symbol(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
    } else {
      out.push_back(c);
    }
  }
  return text::collapse_spaces(out);
}

std::u32string tokenize_char(std::u32string_view in) {
  // ' '.join(line): every character, spaces included, separated by a space.
  std::u32string out;
  out.reserve(in.size() * 2);
  for (size_t i = 0; i < in.size(); ++i) {
    if (i) out.push_back(U' ');
    out.push_back(in[i]);
  }
  return out;
}

std::u32string tokenize(std::string_view name, std::u32string_view line) {
  if (name == "13a") return tokenize_13a(line);
  if (name == "intl") return tokenize_intl(line);
  if (name == "char") return tokenize_char(line);
  if (name == "none") return std::u32string(line);
  check_tokenizer_name(name);
  return {};
}

}  // namespace headcount::eval
