// UTF-8 and Unicode helpers shared by the data pipeline and the metrics.
//
// The metrics reproduce Python semantics (sacreBLEU is Python), so "whitespace" here is exactly
// what Python's str.split() splits on, "lowercase" is str.lower() (full Unicode case mapping, via
// ICU), and characters are Unicode code points.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headcount::text {

// Byte offset of the first invalid UTF-8 sequence in `s` (overlong forms, surrogates and code
// points above U+10FFFF are invalid), or nullopt when `s` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view s);

// Decodes valid UTF-8 to code points. Throws headcount::Error on invalid input.
std::u32string to_u32(std::string_view s);
std::string to_utf8(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);

// Python's str.isspace() / str.split() whitespace: \t \n \v \f \r, U+001C..U+001F, space, U+0085,
// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_py_space(char32_t c);

// Python's s.split(): runs of whitespace separate fields, no empty fields.
std::vector<std::u32string> split_py(std::u32string_view s);
// Python's s.rstrip() / s.strip() with no argument.
std::u32string_view rstrip_py(std::u32string_view s);
std::string rstrip_py_utf8(std::string_view s);
// s.split(sep) for a one-character separator: keeps empty fields ("a,,b" -> a, "", b).
std::vector<std::string> split(std::string_view s, char sep);

// ' '.join(s.split()): collapses every whitespace run to one space and trims both ends.
std::u32string collapse_spaces(std::u32string_view s);

// Python's str.lower(): full Unicode lowercase mapping (final sigma included).
std::u32string lower(std::u32string_view s);

// Unicode general category tests (ICU's character database).
bool is_number(char32_t c);       // \p{N}: Nd, Nl, No
bool is_punctuation(char32_t c);  // \p{P}: Pc, Pd, Ps, Pe, Pi, Pf, Po
bool is_symbol(char32_t c);       // \p{S}: Sm, Sc, Sk, So

std::string trim(std::string_view s);
// The first `n` lines of `s`, each with its newline (a last line without one gets one).
std::string first_lines(std::string_view s, size_t n);

// Levenshtein distance, used to suggest the closest valid name.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace headcount::text
