// The embedded default corpus: Spanish (Reina-Valera 1909) -> English (World English Bible), with
// the King James Version as a second English reference, built from Debian's SWORD modules.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace headcount::data {

namespace fs = std::filesystem;

// Plain text of one verse's OSIS markup. Notes, titles, speakers and cross-references are dropped
// with their content; other elements keep their text. Where an element stood between two words a
// space is kept, so "God<note>...</note><w>created</w>" reads "God created" (not diatheke's
// "Godcreated"), while "earth<note>...</note>." stays "earth.". Entities are decoded, the KJV's
// pilcrow is dropped, and whitespace is collapsed.
std::string osis_to_text(std::string_view osis);

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

struct BibleStats {
  size_t src_entries = 0, tgt_entries = 0, ref2_entries = 0;
  size_t common = 0;  // references present (non-empty) in all three modules
  std::vector<BibleSplitStats> splits;
};

// Reads the three modules through `mod2imp` and writes
//   DIR/{train,dev,test}.{es,en}, DIR/{dev,test}.kjv.en, DIR/{train,dev,test}.ref (verse keys),
//   DIR/corpus.json and DIR/README.md.
// Deterministic: the same modules give byte-identical files. Every file is written atomically.
BibleStats build_bible_corpus(const BibleOptions& options);

// Runs a command and returns its standard output; throws with its exit status on failure.
std::string run_command(const std::string& command);

}  // namespace headcount::data
