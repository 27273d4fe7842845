#include "headcount/data/bible.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/text.h"

namespace headcount::data {
namespace {

// Elements dropped with everything inside them.
bool is_dropped_element(std::string_view name) {
  static const std::set<std::string_view> kDropped = {
      "note", "title", "speaker", "reference", "catchWord", "rdg", "figure", "index", "header"};
  return kDropped.count(name) > 0;
}

// Elements that separate words (line, paragraph and list structure); inline elements such as
// <w>, <transChange>, <divineName>, <q>, <seg> just vanish.
bool is_block_element(std::string_view name) {
  static const std::set<std::string_view> kBlock = {
      "l",     "lg",   "p",       "div",   "item",      "list", "lb", "row", "cell",
      "table", "head", "chapter", "verse", "milestone", "br",   "cb", "pb"};
  return kBlock.count(name) > 0;
}

constexpr char kBoundary = '\x01';

// Decodes one entity starting at s[i] == '&'; returns the number of bytes consumed (0 if it is
// not an entity, in which case '&' is literal).
size_t decode_entity(std::string_view s, size_t i, std::string& out) {
  const size_t semi = s.find(';', i);
  if (semi == std::string_view::npos || semi - i > 10) return 0;
  const std::string_view name = s.substr(i + 1, semi - i - 1);
  static const std::map<std::string_view, char32_t> kNamed = {
      {"amp", U'&'}, {"lt", U'<'}, {"gt", U'>'}, {"quot", U'"'}, {"apos", U'\''}, {"nbsp", U' '}};
  char32_t cp = 0;
  if (auto it = kNamed.find(name); it != kNamed.end()) {
    cp = it->second;
  } else if (name.size() > 1 && name[0] == '#') {
    try {
      cp = (name[1] == 'x' || name[1] == 'X')
               ? static_cast<char32_t>(std::stoul(std::string(name.substr(2)), nullptr, 16))
               : static_cast<char32_t>(std::stoul(std::string(name.substr(1)), nullptr, 10));
    } catch (const std::exception&) {
      return 0;
    }
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  } else {
    return 0;
  }
  text::append_utf8(out, cp);
  return semi - i + 1;
}

bool closes_tightly(char32_t c) {
  return c == U'.' || c == U',' || c == U';' || c == U':' || c == U'!' || c == U'?' || c == U')' ||
         c == U']' || c == U'}' || c == U'\u00bb' || c == U'\u201d' || c == U'\u2019';
}

bool opens_tightly(char32_t c) {
  return c == U'(' || c == U'[' || c == U'{' || c == U'\u00ab' || c == U'\u201c' ||
         c == U'\u2018' || c == U'\u00bf' || c == U'\u00a1';
}

// Turns boundary marks into spaces where they separate two words, drops them next to existing
// whitespace or tight punctuation, and removes the pilcrow. `labels` has one entry per byte of
// `raw`; `out_labels` gets one per character of the result (-1 for inserted spaces). Whitespace
// is collapsed by the caller.
std::u32string finish_text(const std::string& raw, const std::vector<int>& labels,
                           std::vector<int>* out_labels) {
  const std::u32string s = text::to_u32(raw);
  // One label per character: its first byte's.
  std::vector<int> lab;
  lab.reserve(s.size());
  for (size_t b = 0; b < raw.size(); ++b)
    if ((static_cast<unsigned char>(raw[b]) & 0xC0) != 0x80) lab.push_back(labels[b]);
  if (lab.size() != s.size()) lab.assign(s.size(), -1);  // invalid UTF-8: no labels
  std::u32string out;
  out.reserve(s.size());
  out_labels->clear();
  auto emit = [&](char32_t c, int label) {
    out.push_back(c);
    out_labels->push_back(label);
  };
  auto drop_last = [&] {
    out.pop_back();
    out_labels->pop_back();
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const char32_t c = s[i];
    if (c == U'\u00b6') continue;  // KJV paragraph sign
    if (c != static_cast<char32_t>(kBoundary)) {
      emit(c, lab[i]);
      continue;
    }
    size_t j = i;
    while (j < s.size() && (s[j] == static_cast<char32_t>(kBoundary) || s[j] == U'\u00b6')) ++j;
    // "coins <note>...</note> ?" (spaces around a removed note): the mark stays tight too.
    size_t k = j;
    while (k < s.size() && (text::is_py_space(s[k]) || s[k] == static_cast<char32_t>(kBoundary))) {
      ++k;
    }
    if (k < s.size() && closes_tightly(s[k])) {
      while (!out.empty() && text::is_py_space(out.back())) drop_last();
      i = k - 1;
      continue;
    }
    const bool at_end = j >= s.size();
    const char32_t next = at_end ? U' ' : s[j];
    const char32_t prev = out.empty() ? U' ' : out.back();
    if (!text::is_py_space(prev) && !text::is_py_space(next) && !closes_tightly(next) &&
        !opens_tightly(prev)) {
      emit(U' ', -1);
    }
    i = j - 1;
  }
  return out;
}

// The Strong's numbers of a <w> tag's lemma attribute, normalised ("H0430" -> "H430"), in order,
// without repeats. A token without a prefix continues the previous token's kind: the Spanish
// module writes two numbers as "strong:H5315 H2416". Other lemma kinds ("lemma.TR:...") are
// ignored, as are the bare tokens that follow them.
std::vector<std::string> strong_numbers(std::string_view tag) {
  std::vector<std::string> out;
  size_t at = std::string_view::npos;
  for (size_t from = 0; (at = tag.find("lemma=", from)) != std::string_view::npos; from = at + 1)
    if (at == 0 || std::isspace(static_cast<unsigned char>(tag[at - 1]))) break;
  if (at == std::string_view::npos || at + 6 >= tag.size()) return out;
  const char quote = tag[at + 6];
  if (quote != '"' && quote != '\'') return out;
  const size_t start = at + 7;
  const size_t end = tag.find(quote, start);
  if (end == std::string_view::npos) return out;
  const std::string_view value = tag.substr(start, end - start);
  bool strong = false;  // the kind of the last prefixed token
  size_t i = 0;
  while (i < value.size()) {
    size_t j = value.find_first_of(" \t\n\r", i);
    if (j == std::string_view::npos) j = value.size();
    std::string_view token = value.substr(i, j - i);
    i = j + 1;
    if (token.empty()) continue;
    if (const size_t colon = token.rfind(':'); colon != std::string_view::npos) {
      strong = token.substr(0, colon) == "strong";
      token.remove_prefix(colon + 1);
    }
    if (!strong || token.size() < 2 || !std::isalpha(static_cast<unsigned char>(token[0])))
      continue;
    // A letter, digits without leading zeros (not all zeros), an optional letter suffix.
    size_t d = 1;
    while (d < token.size() && token[d] == '0') ++d;
    size_t e = d;
    while (e < token.size() && std::isdigit(static_cast<unsigned char>(token[e]))) ++e;
    bool suffix = true;
    for (size_t k = e; k < token.size(); ++k)
      suffix = suffix && std::isalpha(static_cast<unsigned char>(token[k])) != 0;
    if (e == d || !suffix) continue;
    std::string n(1, static_cast<char>(std::toupper(static_cast<unsigned char>(token[0]))));
    n.append(token.substr(d));
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
  }
  return out;
}

// osis_to_tagged_text's pass over the markup: the text with boundary marks where elements
// separated words (`raw`) and, per byte, the <w> element it is in (`labels`: an index into
// `numbers`, or -1).
struct OsisScan {
  std::string raw;
  std::vector<int> labels;  // per byte of raw: index into `numbers`, or -1
  std::vector<std::vector<std::string>> numbers;
  std::vector<int> w_stack;                // labels of the open <w> elements
  std::vector<std::string> dropped_stack;  // open dropped elements, innermost last

  int label() const { return w_stack.empty() ? -1 : w_stack.back(); }
  void push(char c, int l) {
    raw.push_back(c);
    labels.push_back(l);
  }
};

// A <w> element opened (its Strong's numbers become a label) or closed.
void scan_w_tag(std::string_view tag, bool closing, OsisScan& s) {
  if (closing) {
    if (!s.w_stack.empty()) s.w_stack.pop_back();
    return;
  }
  // A <w> inside another carries the outer one's numbers too.
  std::vector<std::string> n = s.label() < 0 ? std::vector<std::string>{} : s.numbers[s.label()];
  for (auto& x : strong_numbers(tag))
    if (std::find(n.begin(), n.end(), x) == n.end()) n.push_back(std::move(x));
  s.w_stack.push_back(n.empty() ? -1 : static_cast<int>(s.numbers.size()));
  if (!n.empty()) s.numbers.push_back(std::move(n));
}

// One tag (the text between '<' and '>'); false at the end of a chapter or book, which ends the
// verse.
bool scan_tag(std::string_view tag, OsisScan& s) {
  if (tag.empty() || tag[0] == '!' || tag[0] == '?') return true;  // comment, declaration
  const bool closing = tag[0] == '/';
  const bool self_closing = !closing && tag.back() == '/';
  if (closing) tag.remove_prefix(1);
  size_t name_end = 0;
  while (name_end < tag.size() && !std::isspace(static_cast<unsigned char>(tag[name_end])) &&
         tag[name_end] != '/') {
    ++name_end;
  }
  const std::string name(tag.substr(0, name_end));
  // The end of a chapter or book ends the verse: what a module appends there (the WEB's
  // glossary after Revelation 22:21, introductions) is not part of it.
  if (self_closing && s.dropped_stack.empty() && tag.find("eID=") != std::string_view::npos &&
      (name == "chapter" ||
       (name == "div" && tag.find("type=\"book\"") != std::string_view::npos))) {
    return false;
  }
  if (!s.dropped_stack.empty()) {
    // Inside a dropped element: only track nesting of dropped elements.
    if (is_dropped_element(name) && !self_closing) {
      if (closing) {
        if (s.dropped_stack.back() == name) s.dropped_stack.pop_back();
      } else {
        s.dropped_stack.push_back(name);
      }
    }
    if (s.dropped_stack.empty()) s.push(kBoundary, -1);
    return true;
  }
  if (name == "w" && !self_closing) scan_w_tag(tag, closing, s);
  if (is_dropped_element(name)) {
    if (!closing && !self_closing) s.dropped_stack.push_back(name);
    s.push(kBoundary, -1);
  } else if (self_closing || is_block_element(name)) {
    s.push(kBoundary, -1);
  }
  return true;
}

OsisScan scan_osis(std::string_view osis) {
  OsisScan s;
  s.raw.reserve(osis.size());
  size_t i = 0;
  while (i < osis.size()) {
    const char c = osis[i];
    if (c == '<') {
      const size_t end = osis.find('>', i);
      if (end == std::string_view::npos) break;  // truncated tag: ignore the rest
      const std::string_view tag = osis.substr(i + 1, end - i - 1);
      i = end + 1;
      if (!scan_tag(tag, s)) break;
      continue;
    }
    if (!s.dropped_stack.empty()) {
      ++i;
      continue;
    }
    if (c == '&') {
      if (const size_t n = decode_entity(osis, i, s.raw)) {
        s.labels.resize(s.raw.size(), s.label());
        i += n;
        continue;
      }
    }
    s.push(c == '\n' || c == '\t' || c == '\r' ? ' ' : c, s.label());
    ++i;
  }
  return s;
}

// The numbers of each word of `t`. Words are the runs of non-space characters (what
// collapse_spaces joins with single spaces). A word carries the numbers of its letters and digits
// (of all its characters if it has none): punctuation and symbols do not tag a word.
std::vector<std::vector<std::string>> word_numbers(
    const std::u32string& t, const std::vector<int>& char_labels,
    const std::vector<std::vector<std::string>>& numbers) {
  std::vector<std::vector<std::string>> out;
  size_t i2 = 0;
  while (i2 < t.size()) {
    while (i2 < t.size() && text::is_py_space(t[i2])) ++i2;
    if (i2 >= t.size()) break;
    const size_t start = i2;
    while (i2 < t.size() && !text::is_py_space(t[i2])) ++i2;
    std::set<int> alnum, any;
    for (size_t k = start; k < i2; ++k) {
      if (char_labels[k] < 0) continue;
      any.insert(char_labels[k]);
      const char32_t ch = t[k];
      const bool letter = !text::is_punctuation(ch) && !text::is_symbol(ch);
      if (letter) alnum.insert(char_labels[k]);
    }
    std::vector<std::string> word;
    for (int l : alnum.empty() ? any : alnum)
      for (const auto& n : numbers[l])
        if (std::find(word.begin(), word.end(), n) == word.end()) word.push_back(n);
    out.push_back(std::move(word));
  }
  return out;
}

}  // namespace

TaggedText osis_to_tagged_text(std::string_view osis) {
  const OsisScan s = scan_osis(osis);
  std::vector<int> char_labels;
  const std::u32string t = finish_text(s.raw, s.labels, &char_labels);
  TaggedText out;
  out.text = text::to_utf8(text::collapse_spaces(t));
  out.word_numbers = word_numbers(t, char_labels, s.numbers);
  return out;
}

std::string osis_to_text(std::string_view osis) {
  return osis_to_tagged_text(osis).text;
}

std::vector<WordLink> strong_links(const std::vector<std::vector<std::string>>& src,
                                   const std::vector<std::vector<std::string>>& tgt) {
  std::map<std::string, std::vector<int32_t>> s_words, t_words;
  for (size_t w = 0; w < src.size(); ++w)
    for (const auto& n : src[w]) s_words[n].push_back(static_cast<int32_t>(w));
  for (size_t w = 0; w < tgt.size(); ++w)
    for (const auto& n : tgt[w]) t_words[n].push_back(static_cast<int32_t>(w));
  std::map<std::pair<int32_t, int32_t>, bool> links;  // (tgt, src) -> sure
  for (const auto& [n, ts] : t_words) {
    const auto it = s_words.find(n);
    if (it == s_words.end()) continue;
    const bool sure = ts.size() == 1 && it->second.size() == 1;
    for (int32_t t : ts)
      for (int32_t s : it->second) {
        auto [at, inserted] = links.emplace(std::make_pair(t, s), sure);
        if (!inserted) at->second = at->second || sure;
      }
  }
  std::vector<WordLink> out;
  for (const auto& [ts, sure] : links) out.push_back({ts.second, ts.first, sure});
  return out;
}

std::string VerseEntry::key() const {
  return fmt::format("{} {}:{}", book, chapter, verse);
}

std::vector<VerseEntry> parse_imp(std::string_view imp) {
  std::vector<VerseEntry> out;
  VerseEntry* current = nullptr;
  size_t start = 0;
  while (start < imp.size()) {
    size_t end = imp.find('\n', start);
    if (end == std::string_view::npos) end = imp.size();
    const std::string_view line = imp.substr(start, end - start);
    start = end + 1;
    if (line.rfind("$$$", 0) == 0) {
      current = nullptr;
      const std::string_view key = line.substr(3);
      const size_t space = key.rfind(' ');
      const size_t colon = key.rfind(':');
      if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
        continue;
      }
      VerseEntry e;
      e.book = std::string(key.substr(0, space));
      try {
        size_t used = 0;
        const std::string ch(key.substr(space + 1, colon - space - 1));
        const std::string vs(key.substr(colon + 1));
        e.chapter = std::stoi(ch, &used);
        if (used != ch.size()) continue;
        e.verse = std::stoi(vs, &used);
        if (used != vs.size()) continue;
      } catch (const std::exception&) {
        continue;
      }
      if (e.chapter < 1 || e.verse < 1) continue;  // book and chapter headings
      out.push_back(std::move(e));
      current = &out.back();
    } else if (current) {
      if (!current->osis.empty()) current->osis.push_back('\n');
      current->osis.append(line);
    }
  }
  return out;
}

std::string run_command(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  HC_CHECK(pipe, "cannot run '{}'", command);
  std::string out;
  std::array<char, 1 << 16> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  HC_CHECK(status == 0, "'{}' failed (exit status {})", command,
           WIFEXITED(status) ? WEXITSTATUS(status) : status);
  return out;
}

namespace {

struct Module {
  std::string name;
  std::unordered_map<std::string, std::string> text;  // key -> plain text (non-empty only)
  std::unordered_map<std::string, std::vector<std::vector<std::string>>> numbers;  // per word
  std::vector<VerseEntry> order;
  std::string version;
};

std::string module_version(const std::string& name) {
  for (const char* dir : {"/usr/share/sword/mods.d/", "/usr/local/share/sword/mods.d/"}) {
    std::string lower = name;
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    fs::path conf = fs::path(dir) / (name + ".conf");
    std::error_code ec;
    if (!fs::exists(conf, ec)) conf = fs::path(dir) / (lower + ".conf");
    if (!fs::exists(conf, ec)) continue;
    for (const auto& line : io::read_lines(conf, {.allow_empty_file = true})) {
      if (line.rfind("Version=", 0) == 0) return text::trim(line.substr(8));
    }
  }
  return "unknown";
}

Module read_module(const std::string& mod2imp, const std::string& name) {
  const std::string imp = run_command(fmt::format("{} {} 2>/dev/null", mod2imp, name));
  Module m;
  m.name = name;
  m.order = parse_imp(imp);
  HC_CHECK(!m.order.empty(),
           "SWORD module {} gave no verses: install it with 'apt-get install libsword-utils "
           "sword-text-sparv sword-text-web sword-text-kjv'",
           name);
  for (const auto& e : m.order) {
    auto t = osis_to_tagged_text(e.osis);
    if (t.text.empty()) continue;
    HC_CHECK(t.word_numbers.size() == text::split(t.text, ' ').size(),
             "{} {}: {} words but {} word tags", name, e.key(), text::split(t.text, ' ').size(),
             t.word_numbers.size());
    m.text.emplace(e.key(), std::move(t.text));
    m.numbers.emplace(e.key(), std::move(t.word_numbers));
  }
  m.version = module_version(name);
  return m;
}

size_t count_words(const std::string& s) {
  size_t n = 0;
  bool in_word = false;
  for (unsigned char c : s) {
    const bool space = c == ' ';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

// Coverage and quality of one English module's Strong's tags (LinkStats), over dev and test.
struct LinkStatsBuilder {
  LinkStats s;
  std::map<std::string, std::map<std::string, int64_t>> forms;  // number -> word form -> tokens
  void add(const std::vector<std::vector<std::string>>& words, const std::vector<WordLink>& links,
           const std::set<std::string>& src_numbers) {
    s.words += static_cast<int64_t>(words.size());
    std::vector<char> linked(words.size(), 0), sure(words.size(), 0);
    for (const auto& l : links) {
      linked[l.tgt] = 1;
      if (l.sure) sure[l.tgt] = 1;
    }
    for (size_t w = 0; w < words.size(); ++w) {
      s.linked += linked[w];
      s.sure += sure[w];
      if (words[w].empty()) continue;
      ++s.tagged;
      bool any = false;
      for (const auto& n : words[w]) any = any || src_numbers.count(n) > 0;
      if (!any) ++s.unmatched;
    }
  }
  void add_forms(const std::string& line, const std::vector<std::vector<std::string>>& words) {
    const auto toks = text::split(line, ' ');
    for (size_t w = 0; w < words.size() && w < toks.size(); ++w) {
      if (words[w].empty()) continue;
      // The word form: lowercased, without punctuation and symbols ("God's," -> "gods").
      std::u32string f;
      for (char32_t c : text::lower(text::to_u32(toks[w])))
        if (!text::is_punctuation(c) && !text::is_symbol(c)) f.push_back(c);
      const std::string form = text::to_utf8(f);
      for (const auto& n : words[w]) ++forms[n][form];
    }
  }
  LinkStats finish() {
    int64_t top = 0, all = 0;
    for (const auto& [n, f] : forms) {
      int64_t best = 0;
      for (const auto& [form, c] : f) best = std::max(best, c), all += c;
      top += best;
    }
    s.purity = all > 0 ? static_cast<double>(top) / static_cast<double>(all) : 0;
    return s;
  }
};

// The verses of one split: the lines of each file, and (dev, test) the gold links.
struct Split {
  std::vector<std::string> src, tgt, ref2, keys, tgt_links, ref2_links;
  std::set<std::string> chapters;
};

// The verses all three modules have, split by chapter, with the link statistics of dev + test.
struct HeldOut {
  std::array<Split, 3> splits;                 // train, dev, test
  std::array<LinkStatsBuilder, 2> link_stats;  // target (WEB), second reference (KJV)
};

void check_bible_options(const BibleOptions& o) {
  HC_CHECK(!o.out.empty(), "no output folder given");
  HC_CHECK(o.period > 0 && o.dev_phase >= 0 && o.dev_phase < o.period && o.test_phase >= 0 &&
               o.test_phase < o.period && o.dev_phase != o.test_phase,
           "invalid held-out chapter rule (period {}, dev {}, test {})", o.period, o.dev_phase,
           o.test_phase);
  const std::string which = run_command(fmt::format("command -v {} || true", o.mod2imp));
  HC_CHECK(!which.empty(),
           "'{}' not found: install SWORD's tools and modules with 'apt-get install "
           "libsword-utils sword-text-sparv sword-text-web sword-text-kjv'",
           o.mod2imp);
}

// The gold links of a held-out verse (`key`, whose target and second reference lines are `tgt_line`
// and `ref2_line`), and their statistics.
void add_gold_links(const std::string& key, const std::string& tgt_line,
                    const std::string& ref2_line, const Module& src, const Module& tgt,
                    const Module& ref2, Split& sp, HeldOut& h) {
  const auto& sn = src.numbers.at(key);
  const auto& tn = tgt.numbers.at(key);
  const auto& rn = ref2.numbers.at(key);
  const auto tl = strong_links(sn, tn), rl = strong_links(sn, rn);
  sp.tgt_links.push_back(format_links(tl));
  sp.ref2_links.push_back(format_links(rl));
  std::set<std::string> src_numbers;
  for (const auto& w : sn) src_numbers.insert(w.begin(), w.end());
  h.link_stats[0].add(tn, tl, src_numbers);
  h.link_stats[1].add(rn, rl, src_numbers);
  h.link_stats[0].add_forms(tgt_line, tn);
  h.link_stats[1].add_forms(ref2_line, rn);
}

// Canonical order: the source module's. Chapters are numbered as they first appear among the
// verses that all three modules have.
HeldOut split_verses(const BibleOptions& o, const Module& src, const Module& tgt,
                     const Module& ref2, BibleStats& stats) {
  HeldOut h;
  std::map<std::string, int> chapter_index;
  std::set<std::string> seen;
  for (const auto& e : src.order) {
    const std::string key = e.key();
    if (!seen.insert(key).second) continue;
    const auto s = src.text.find(key);
    const auto t = tgt.text.find(key);
    const auto r = ref2.text.find(key);
    if (s == src.text.end() || t == tgt.text.end() || r == ref2.text.end()) continue;
    const std::string chapter = fmt::format("{} {}", e.book, e.chapter);
    auto [it, inserted] = chapter_index.emplace(chapter, static_cast<int>(chapter_index.size()));
    const int phase = it->second % o.period;
    Split& sp = phase == o.dev_phase    ? h.splits[1]
                : phase == o.test_phase ? h.splits[2]
                                        : h.splits[0];
    sp.src.push_back(s->second);
    sp.tgt.push_back(t->second);
    sp.ref2.push_back(r->second);
    sp.keys.push_back(key);
    sp.chapters.insert(chapter);
    if (&sp != &h.splits[0]) add_gold_links(key, t->second, r->second, src, tgt, ref2, sp, h);
    ++stats.common;
  }
  return h;
}

// corpus.json up to its splits: where the texts came from and how they were held out.
nlohmann::ordered_json corpus_info(const BibleOptions& o, const Module& src, const Module& tgt,
                                   const Module& ref2, const BibleStats& stats) {
  nlohmann::ordered_json info;
  info["name"] = "Spanish-English Bible (headcount default corpus)";
  info["source"] = {{"module", o.src_module}, {"version", src.version}, {"language", "es"}};
  info["target"] = {{"module", o.tgt_module}, {"version", tgt.version}, {"language", "en"}};
  info["second_reference"] = {
      {"module", o.ref2_module}, {"version", ref2.version}, {"language", "en"}};
  info["verses"] = {{o.src_module, stats.src_entries},
                    {o.tgt_module, stats.tgt_entries},
                    {o.ref2_module, stats.ref2_entries},
                    {"in_all_three", stats.common}};
  info["held_out_rule"] = fmt::format(
      "whole chapters in canonical order, numbered from 0: chapter i goes to dev when i % {} == "
      "{}, to test when i % {} == {}, else to train",
      o.period, o.dev_phase, o.period, o.test_phase);
  return info;
}

// Each split's files, its statistics, and its entry in corpus.json.
void write_splits(const BibleOptions& o, const std::array<Split, 3>& splits, BibleStats& stats,
                  nlohmann::ordered_json& info) {
  const char* names[] = {"train", "dev", "test"};
  for (int k = 0; k < 3; ++k) {
    const Split& sp = splits[k];
    BibleSplitStats st;
    st.name = names[k];
    st.verses = sp.src.size();
    st.chapters = sp.chapters.size();
    for (const auto& l : sp.src) st.src_words += count_words(l);
    for (const auto& l : sp.tgt) st.tgt_words += count_words(l);
    stats.splits.push_back(st);
    io::write_lines_atomic(o.out / fmt::format("{}.es", st.name), sp.src);
    io::write_lines_atomic(o.out / fmt::format("{}.en", st.name), sp.tgt);
    io::write_lines_atomic(o.out / fmt::format("{}.ref", st.name), sp.keys);
    if (k > 0) {
      io::write_lines_atomic(o.out / fmt::format("{}.kjv.en", st.name), sp.ref2);
      io::write_lines_atomic(o.out / fmt::format("{}.links", st.name), sp.tgt_links);
      io::write_lines_atomic(o.out / fmt::format("{}.kjv.links", st.name), sp.ref2_links);
    }
    info["splits"][st.name] = {{"verses", st.verses},
                               {"chapters", st.chapters},
                               {"es_words", st.src_words},
                               {"en_words", st.tgt_words}};
  }
}

// corpus.json after its splits: the gold links, the files and what made them.
void finish_corpus_info(const BibleOptions& o, const BibleStats& stats,
                        nlohmann::ordered_json& info) {
  auto link_json = [](const LinkStats& l) {
    return nlohmann::ordered_json{{"target_words", l.words},
                                  {"linked_share", l.coverage()},
                                  {"sure_linked_share", l.sure_coverage()},
                                  {"tagged_words", l.tagged},
                                  {"tagged_without_spanish_counterpart", l.unmatched_share()},
                                  {"tag_purity", l.purity}};
  };
  info["links"] = {
      {"format",
       "one line per verse: S-T (sure) or S?T (possible), 0-based word indices of the Spanish line "
       "and of the English line split at spaces, sorted by (T, S)"},
      {"rule",
       "a word carries the Strong's numbers of the <w lemma=\"strong:...\"> elements its letters "
       "came from (a lemma may hold several: \"strong:H2568 H3967\"); every English word carrying "
       "a number is linked to every Spanish word carrying "
       "it; sure when the number tags exactly one word on each side, possible otherwise "
       "(multi-word phrases, repeated numbers); numbers on one side only link nothing"},
      {"measured_on", "dev + test"},
      {o.tgt_module, link_json(stats.tgt_links)},
      {o.ref2_module, link_json(stats.ref2_links)}};
  info["files"] = {"{train,dev,test}.es: Spanish source (Reina-Valera 1909)",
                   "{train,dev,test}.en: English target (World English Bible)",
                   "{dev,test}.kjv.en: second English reference (King James Version)",
                   "{train,dev,test}.ref: the verse reference of each line",
                   "{dev,test}.links: gold word links Spanish -> WEB (Strong's numbers)",
                   "{dev,test}.kjv.links: gold word links Spanish -> KJV (Strong's numbers)"};
  info["made_by"] = fmt::format("headcount data bible (headcount {})", HEADCOUNT_VERSION);
}

std::string corpus_readme(const BibleOptions& o, const Module& src, const Module& tgt,
                          const Module& ref2, const BibleStats& stats,
                          const std::string& held_out_rule) {
  std::string readme = fmt::format(
      "# Spanish-English Bible corpus\n\n"
      "Built by `headcount data bible` from Debian's SWORD modules {} (source, Spanish, version "
      "{}), {} (target, English, version {}) and {} (second English reference, version {}), read "
      "with `mod2imp`. Verses present in all three modules: {}. Markup is removed (notes, titles "
      "and cross-references with their content), whitespace is normalised.\n\n"
      "Held out by whole chapters: {}.\n\n"
      "| split | verses | chapters | Spanish words | English words |\n"
      "| --- | ---: | ---: | ---: | ---: |\n",
      o.src_module, src.version, o.tgt_module, tgt.version, o.ref2_module, ref2.version,
      stats.common, held_out_rule);
  for (const auto& st : stats.splits) {
    readme += fmt::format("| {} | {} | {} | {} | {} |\n", st.name, st.verses, st.chapters,
                          st.src_words, st.tgt_words);
  }
  readme += fmt::format(
      "\nGold word links from the modules' Strong's numbers (`{{dev,test}}.kjv.links`: Spanish -> "
      "KJV; `{{dev,test}}.links`: Spanish -> WEB; none for train): one line per verse, `S-T` "
      "(sure) or `S?T` (possible), 0-based word indices of the lines split at spaces. A word "
      "carries the numbers of the `<w lemma=\"strong:...\">` elements its letters came from (a "
      "lemma may hold several: `strong:H2568 H3967`, *quinientos*, five hundred); "
      "every English word with a number is linked to every Spanish word with it; sure when the "
      "number tags exactly one word on each side, possible for phrases (\"EN el principio\") and "
      "repeated numbers.\n\n"
      "| module (dev + test) | English words | linked | sure-linked | tagged without Spanish "
      "counterpart | tag purity |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& [name, l] : {std::pair<std::string, LinkStats>{o.ref2_module, stats.ref2_links},
                                {o.tgt_module, stats.tgt_links}}) {
    readme += fmt::format("| {} | {} | {:.1f}% | {:.1f}% | {:.1f}% | {:.3f} |\n", name, l.words,
                          100 * l.coverage(), 100 * l.sure_coverage(), 100 * l.unmatched_share(),
                          l.purity);
  }
  readme +=
      "\nLinked / sure-linked: the share of English words with at least one link / a sure link. "
      "Tagged without Spanish counterpart: the share of English words carrying a number that "
      "carry none the Spanish verse has. Tag purity: for each number, the share of its English "
      "tokens that are its most frequent lowercased word form, token-weighted over numbers "
      "(hand-made tags score high; the WEB's look machine-projected: Genesis 1:1 tags \"In\" "
      "with H430, *God*).\n";
  readme += "\nThe texts are in the public domain. corpus.json holds the same facts.\n";
  return readme;
}

}  // namespace

BibleStats build_bible_corpus(const BibleOptions& o) {
  check_bible_options(o);
  log::info("reading SWORD modules {}, {}, {}", o.src_module, o.tgt_module, o.ref2_module);
  const Module src = read_module(o.mod2imp, o.src_module);
  const Module tgt = read_module(o.mod2imp, o.tgt_module);
  const Module ref2 = read_module(o.mod2imp, o.ref2_module);

  BibleStats stats;
  stats.src_entries = src.text.size();
  stats.tgt_entries = tgt.text.size();
  stats.ref2_entries = ref2.text.size();
  HeldOut held_out = split_verses(o, src, tgt, ref2, stats);
  nlohmann::ordered_json info = corpus_info(o, src, tgt, ref2, stats);
  fs::create_directories(o.out);
  write_splits(o, held_out.splits, stats, info);
  stats.tgt_links = held_out.link_stats[0].finish();
  stats.ref2_links = held_out.link_stats[1].finish();
  finish_corpus_info(o, stats, info);
  io::write_file_atomic(o.out / "corpus.json", info.dump(2) + "\n");
  io::write_file_atomic(
      o.out / "README.md",
      corpus_readme(o, src, tgt, ref2, stats, info["held_out_rule"].get<std::string>()));
  return stats;
}

}  // namespace headcount::data
