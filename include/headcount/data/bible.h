// The embedded default corpus: Spanish (Reina-Valera 1909) -> English (World English Bible), with
// the King James Version as a second English reference, built from Debian's SWORD modules.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "headcount/data/links.h"

namespace headcount::data {

namespace fs = std::filesystem;

// Plain text of one verse's OSIS markup. Notes, titles, speakers and cross-references are dropped
// with their content; other elements keep their text. Where an element stood between two words a
// space is kept, so "God<note>...</note><w>created</w>" reads "God created" (not diatheke's
// "Godcreated"), while "earth<note>...</note>." stays "earth.". Entities are decoded, the KJV's
// pilcrow is dropped, and whitespace is collapsed.
std::string osis_to_text(std::string_view osis);

// The same text, with the Strong's numbers of each word: word i of `text` split at spaces carries
// the numbers (normalised: "H0430" -> "H430") of the <w lemma="strong:..."> elements its letters
// and digits came from (all of its characters' if it has only punctuation and symbols), in order
// of first appearance. A lemma may hold several ("strong:H5315 H2416"); a <w> inside another
// carries the outer one's numbers too. osis_to_text(x) == osis_to_tagged_text(x).text.
struct TaggedText {
  std::string text;
  std::vector<std::vector<std::string>> word_numbers;
};
TaggedText osis_to_tagged_text(std::string_view osis);

// Gold word links of a verse pair from the words' Strong's numbers: every target word carrying a
// number is linked to every source word carrying it; the link is sure when the number tags exactly
// one word on each side, possible otherwise (phrases such as "EN el principio", repeated
// numbers). Numbers on one side only link nothing.
std::vector<WordLink> strong_links(const std::vector<std::vector<std::string>>& src,
                                   const std::vector<std::vector<std::string>>& tgt);

struct VerseEntry {
  std::string book;
  int chapter = 0;
  int verse = 0;
  std::string osis;
  std::string key() const;  // "Genesis 1:1"
};

// Parses the output of SWORD's `mod2imp MODULE`: "$$$Book C:V" lines, each followed by the verse.
// Headings (C:0, 0:0) and non-verse entries are skipped.
std::vector<VerseEntry> parse_imp(std::string_view imp);

struct BibleOptions {
  fs::path out;
  std::string mod2imp = "mod2imp";
  std::string src_module = "spaRV1909eb";
  std::string tgt_module = "engWEB2015eb";
  std::string ref2_module = "engKJV2006eb";
  // Whole chapters are held out: chapter number i (0-based, canonical order) goes to dev when
  // i % period == dev_phase, to test when i % period == test_phase.
  int period = 30;
  int dev_phase = 10;
  int test_phase = 25;
};

struct BibleSplitStats {
  std::string name;
  size_t verses = 0;
  size_t chapters = 0;
  size_t src_words = 0;
  size_t tgt_words = 0;
};

// How usable one English module's Strong's tags are as gold links to the Spanish, over dev+test.
struct LinkStats {
  int64_t words = 0;      // target words
  int64_t linked = 0;     // with at least one link
  int64_t sure = 0;       // with a sure link
  int64_t tagged = 0;     // carrying a Strong's number
  int64_t unmatched = 0;  // tagged, but no number of theirs is in the Spanish verse
  // Token-weighted over numbers: the share of a number's English tokens that are its most
  // frequent (lowercased) word form. Hand-tagged modules score high.
  double purity = 0;
  double coverage() const { return words ? static_cast<double>(linked) / words : 0; }
  double sure_coverage() const { return words ? static_cast<double>(sure) / words : 0; }
  double unmatched_share() const { return tagged ? static_cast<double>(unmatched) / tagged : 0; }
};

struct BibleStats {
  size_t src_entries = 0, tgt_entries = 0, ref2_entries = 0;
  size_t common = 0;  // references present (non-empty) in all three modules
  std::vector<BibleSplitStats> splits;
  LinkStats tgt_links, ref2_links;  // dev + test
};

// Reads the three modules through `mod2imp` and writes
//   DIR/{train,dev,test}.{es,en}, DIR/{dev,test}.kjv.en, DIR/{train,dev,test}.ref (verse keys),
//   DIR/{dev,test}.links (Spanish -> WEB) and DIR/{dev,test}.kjv.links (Spanish -> KJV): gold
//   word links from the Strong's numbers (strong_links, format of links.h),
//   DIR/corpus.json and DIR/README.md.
// Deterministic: the same modules give byte-identical files. Every file is written atomically.
BibleStats build_bible_corpus(const BibleOptions& options);

// Runs a command and returns its standard output; throws with its exit status on failure.
std::string run_command(const std::string& command);

}  // namespace headcount::data
