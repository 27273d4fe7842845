// sacreBLEU's BLEU tokenizers, reproduced exactly: 13a (mteval-v13a, the default), intl
// (mteval-v14 international), char and none. Input and output are UTF-8; the output is the
// tokens joined by single spaces.
#pragma once

#include <string>
#include <string_view>

namespace headcount::eval {

// Throws headcount::Error for an unknown name; lists the known ones.
void check_tokenizer_name(std::string_view name);

std::u32string tokenize(std::string_view name, std::u32string_view line);
std::u32string tokenize_13a(std::u32string_view line);
std::u32string tokenize_intl(std::u32string_view line);
std::u32string tokenize_char(std::u32string_view line);

}  // namespace headcount::eval
