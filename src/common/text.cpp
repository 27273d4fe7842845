#include "headcount/common/text.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <algorithm>

#include "headcount/common/check.h"

namespace headcount::text {

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    char32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return std::nullopt;
}

std::u32string to_u32(std::string_view s) {
  const auto bad = find_invalid_utf8(s);
  HC_CHECK(!bad, "invalid UTF-8 at byte {}", *bad);
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      out.push_back(c);
      i += 1;
    } else if (c < 0xE0) {
      out.push_back(((c & 0x1F) << 6) | (p[i + 1] & 0x3F));
      i += 2;
    } else if (c < 0xF0) {
      out.push_back(((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F));
      i += 3;
    } else {
      out.push_back(((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) |
                    (p[i + 3] & 0x3F));
      i += 4;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool is_py_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<std::u32string> split_py(std::u32string_view s) {
  std::vector<std::u32string> out;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i < n && is_py_space(s[i])) ++i;
    const size_t start = i;
    while (i < n && !is_py_space(s[i])) ++i;
    if (i > start) out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

std::u32string_view rstrip_py(std::u32string_view s) {
  size_t n = s.size();
  while (n > 0 && is_py_space(s[n - 1])) --n;
  return s.substr(0, n);
}

std::string rstrip_py_utf8(std::string_view s) {
  return to_utf8(rstrip_py(to_u32(s)));
}

std::u32string collapse_spaces(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i < n && is_py_space(s[i])) ++i;
    if (i >= n) break;
    if (!out.empty()) out.push_back(U' ');
    while (i < n && !is_py_space(s[i])) out.push_back(s[i++]);
  }
  return out;
}

std::u32string lower(std::u32string_view s) {
  bool ascii = true;
  for (char32_t c : s) ascii = ascii && c < 0x80;
  if (ascii) {
    std::u32string out(s);
    for (auto& c : out) {
      if (c >= U'A' && c <= U'Z') c += 32;
    }
    return out;
  }
  // ICU works on UTF-16; full case mapping can change the length.
  std::u16string in;
  for (char32_t c : s) {
    if (c >= 0x10000) {
      in.push_back(static_cast<char16_t>(0xD800 + ((c - 0x10000) >> 10)));
      in.push_back(static_cast<char16_t>(0xDC00 + ((c - 0x10000) & 0x3FF)));
    } else {
      in.push_back(static_cast<char16_t>(c));
    }
  }
  std::u16string out16(in.size() * 3 + 4, u'\0');
  UErrorCode status = U_ZERO_ERROR;
  const int32_t len = u_strToLower(out16.data(), static_cast<int32_t>(out16.size()), in.data(),
                                   static_cast<int32_t>(in.size()), "", &status);
  HC_CHECK(U_SUCCESS(status), "ICU lowercase failed: {}", u_errorName(status));
  std::u32string out;
  out.reserve(len);
  for (int32_t i = 0; i < len; ++i) {
    const char16_t u = out16[i];
    if (u >= 0xD800 && u <= 0xDBFF && i + 1 < len) {
      out.push_back(0x10000 + ((static_cast<char32_t>(u) - 0xD800) << 10) +
                    (static_cast<char32_t>(out16[i + 1]) - 0xDC00));
      ++i;
    } else {
      out.push_back(u);
    }
  }
  return out;
}

bool is_number(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0;
}
bool is_punctuation(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}
bool is_symbol(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_S_MASK) != 0;
}

std::string first_lines(std::string_view s, size_t n) {
  std::string out;
  size_t pos = 0;
  for (size_t k = 0; k < n && pos < s.size(); ++k) {
    const size_t end = std::min(s.find('\n', pos), s.size());
    out.append(s.substr(pos, end - pos));
    out += '\n';
    pos = end + 1;
  }
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? s.npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

}  // namespace headcount::text
