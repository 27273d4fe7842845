#include "headcount/data/bible.h"

#include <array>
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
// whitespace or tight punctuation, removes the pilcrow, and collapses whitespace.
std::string finish_text(const std::string& raw) {
  const std::u32string s = text::to_u32(raw);
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char32_t c = s[i];
    if (c == U'\u00b6') continue;  // KJV paragraph sign
    if (c != static_cast<char32_t>(kBoundary)) {
      out.push_back(c);
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
      while (!out.empty() && text::is_py_space(out.back())) out.pop_back();
      i = k - 1;
      continue;
    }
    const bool at_end = j >= s.size();
    const char32_t next = at_end ? U' ' : s[j];
    const char32_t prev = out.empty() ? U' ' : out.back();
    if (!text::is_py_space(prev) && !text::is_py_space(next) && !closes_tightly(next) &&
        !opens_tightly(prev)) {
      out.push_back(U' ');
    }
    i = j - 1;
  }
  return text::to_utf8(text::collapse_spaces(out));
}

}  // namespace

std::string osis_to_text(std::string_view osis) {
  std::string raw;
  raw.reserve(osis.size());
  std::vector<std::string> dropped_stack;  // open dropped elements, innermost last
  size_t i = 0;
  while (i < osis.size()) {
    const char c = osis[i];
    if (c == '<') {
      const size_t end = osis.find('>', i);
      if (end == std::string_view::npos) break;  // truncated tag: ignore the rest
      std::string_view tag = osis.substr(i + 1, end - i - 1);
      i = end + 1;
      if (tag.empty() || tag[0] == '!' || tag[0] == '?') continue;  // comment, declaration
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
      if (self_closing && dropped_stack.empty() && tag.find("eID=") != std::string_view::npos &&
          (name == "chapter" ||
           (name == "div" && tag.find("type=\"book\"") != std::string_view::npos))) {
        break;
      }
      if (!dropped_stack.empty()) {
        // Inside a dropped element: only track nesting of dropped elements.
        if (is_dropped_element(name) && !self_closing) {
          if (closing) {
            if (dropped_stack.back() == name) dropped_stack.pop_back();
          } else {
            dropped_stack.push_back(name);
          }
        }
        if (dropped_stack.empty()) raw.push_back(kBoundary);
        continue;
      }
      if (is_dropped_element(name)) {
        if (!closing && !self_closing) dropped_stack.push_back(name);
        raw.push_back(kBoundary);
      } else if (self_closing || is_block_element(name)) {
        raw.push_back(kBoundary);
      }
      continue;
    }
    if (!dropped_stack.empty()) {
      ++i;
      continue;
    }
    if (c == '&') {
      if (const size_t n = decode_entity(osis, i, raw)) {
        i += n;
        continue;
      }
    }
    raw.push_back(c == '\n' || c == '\t' || c == '\r' ? ' ' : c);
    ++i;
  }
  return finish_text(raw);
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
    std::string t = osis_to_text(e.osis);
    if (!t.empty()) m.text.emplace(e.key(), std::move(t));
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

}  // namespace

BibleStats build_bible_corpus(const BibleOptions& o) {
  HC_CHECK(!o.out.empty(), "no output folder given");
  HC_CHECK(o.period > 0 && o.dev_phase >= 0 && o.dev_phase < o.period && o.test_phase >= 0 &&
               o.test_phase < o.period && o.dev_phase != o.test_phase,
           "invalid held-out chapter rule (period {}, dev {}, test {})", o.period, o.dev_phase,
           o.test_phase);
  {
    const std::string which = run_command(fmt::format("command -v {} || true", o.mod2imp));
    HC_CHECK(!which.empty(),
             "'{}' not found: install SWORD's tools and modules with 'apt-get install "
             "libsword-utils sword-text-sparv sword-text-web sword-text-kjv'",
             o.mod2imp);
  }
  log::info("reading SWORD modules {}, {}, {}", o.src_module, o.tgt_module, o.ref2_module);
  const Module src = read_module(o.mod2imp, o.src_module);
  const Module tgt = read_module(o.mod2imp, o.tgt_module);
  const Module ref2 = read_module(o.mod2imp, o.ref2_module);

  BibleStats stats;
  stats.src_entries = src.text.size();
  stats.tgt_entries = tgt.text.size();
  stats.ref2_entries = ref2.text.size();

  // Canonical order: the source module's. Chapters are numbered as they first appear among the
  // verses that all three modules have.
  struct Split {
    std::vector<std::string> src, tgt, ref2, keys;
    std::set<std::string> chapters;
  };
  std::array<Split, 3> splits;  // train, dev, test
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
    Split& sp = phase == o.dev_phase ? splits[1] : phase == o.test_phase ? splits[2] : splits[0];
    sp.src.push_back(s->second);
    sp.tgt.push_back(t->second);
    sp.ref2.push_back(r->second);
    sp.keys.push_back(key);
    sp.chapters.insert(chapter);
    ++stats.common;
  }

  const char* names[] = {"train", "dev", "test"};
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
  fs::create_directories(o.out);
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
    if (k > 0) io::write_lines_atomic(o.out / fmt::format("{}.kjv.en", st.name), sp.ref2);
    info["splits"][st.name] = {{"verses", st.verses},
                               {"chapters", st.chapters},
                               {"es_words", st.src_words},
                               {"en_words", st.tgt_words}};
  }
  info["files"] = {"{train,dev,test}.es: Spanish source (Reina-Valera 1909)",
                   "{train,dev,test}.en: English target (World English Bible)",
                   "{dev,test}.kjv.en: second English reference (King James Version)",
                   "{train,dev,test}.ref: the verse reference of each line"};
  info["made_by"] = fmt::format("headcount data bible (headcount {})", HEADCOUNT_VERSION);
  io::write_file_atomic(o.out / "corpus.json", info.dump(2) + "\n");

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
      stats.common, info["held_out_rule"].get<std::string>());
  for (const auto& st : stats.splits) {
    readme += fmt::format("| {} | {} | {} | {} | {} |\n", st.name, st.verses, st.chapters,
                          st.src_words, st.tgt_words);
  }
  readme += "\nThe texts are in the public domain. corpus.json holds the same facts.\n";
  io::write_file_atomic(o.out / "README.md", readme);
  return stats;
}

}  // namespace headcount::data
