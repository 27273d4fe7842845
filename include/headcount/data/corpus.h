// Parallel data: validated reading, length filtering, and the corpus a config describes.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "headcount/common/config.h"

namespace headcount::data {

namespace fs = std::filesystem;

struct ParallelText {
  std::vector<std::string> src;
  std::vector<std::string> tgt;
  size_t size() const { return src.size(); }
};

// Reads two line-aligned UTF-8 files. Errors name the file and the line: a missing or empty file,
// invalid UTF-8, different line counts (never a silent truncation or a shifted corpus).
ParallelText read_parallel(const fs::path& src, const fs::path& tgt);

struct FilterReport {
  size_t total = 0;
  size_t kept = 0;
  size_t too_short = 0;  // fewer than min_tokens on a side (empty lines included)
  size_t too_long = 0;   // more than max_tokens on a side
  size_t bad_ratio = 0;  // length ratio above max_length_ratio
  size_t dropped() const { return too_short + too_long + bad_ratio; }
  std::string summary() const;
};

// Drops pairs by whitespace-token length (the first failing rule is counted).
FilterReport filter_by_length(ParallelText& text, int min_tokens, int max_tokens,
                              double max_length_ratio);

struct Corpus {
  ParallelText train, dev, test;
  // All test references: test_tgt first, then data.test_extra_refs.
  std::vector<std::vector<std::string>> test_refs;
  FilterReport train_filter;
  // XXH64 of the training and dev files' lines as read, each followed by '\n' ("train_src",
  // "train_tgt", "dev_src", "dev_tgt"; the file's bytes when it ends in a newline and has no
  // '\r'), before length filtering: what a run records at its start and checks on resume (the dev
  // set decides `best` and early stopping). Taken from the lines loaded, so a pipe is not read
  // again.
  std::map<std::string, std::string> input_xxh64;
};

// Builds the default corpus into data.dir first when data.prepare is "bible" and a file is
// missing.
void ensure_corpus(const DataConfig& data);
Corpus load_corpus(const DataConfig& data);
// The corpus a checkpoint's config names (eval, analyses, bench decode). Its data.dir is a folder
// of the machine and the day it was trained, so a missing corpus is an error naming data.dir,
// never a reason to build the Bible corpus there: only when `prepare_asked` (the user gave
// --set data.prepare=...) does data.prepare apply.
Corpus load_checkpoint_corpus(const DataConfig& data, bool prepare_asked);

struct SideStats {
  size_t lines = 0;
  size_t tokens = 0;
  size_t max_tokens = 0;
  double mean() const { return lines ? static_cast<double>(tokens) / lines : 0.0; }
  size_t median = 0;
};
SideStats side_stats(const std::vector<std::string>& lines);
// Counts whitespace-separated tokens (Python's split()).
size_t count_tokens(const std::string& line);

}  // namespace headcount::data
