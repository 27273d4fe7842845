#include "headcount/data/corpus.h"

#include <algorithm>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/text.h"
#include "headcount/data/bible.h"

namespace headcount::data {

size_t count_tokens(const std::string& line) {
  bool ascii = true;
  for (unsigned char c : line) ascii = ascii && c < 0x80;
  if (!ascii) return text::split_py(text::to_u32(line)).size();
  size_t n = 0;
  bool in_word = false;
  for (unsigned char c : line) {
    const bool space = text::is_py_space(c);
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

ParallelText read_parallel(const fs::path& src, const fs::path& tgt) {
  ParallelText t;
  t.src = io::read_lines(src);
  t.tgt = io::read_lines(tgt);
  HC_CHECK(t.src.size() == t.tgt.size(),
           "{} has {} lines but {} has {}: the two sides must be line-aligned (one sentence per "
           "line)",
           src.string(), t.src.size(), tgt.string(), t.tgt.size());
  return t;
}

std::string FilterReport::summary() const {
  return fmt::format("kept {} of {} pairs; dropped {} too short, {} too long, {} by length ratio",
                     kept, total, too_short, too_long, bad_ratio);
}

FilterReport filter_by_length(ParallelText& t, int min_tokens, int max_tokens,
                              double max_length_ratio) {
  FilterReport r;
  r.total = t.size();
  ParallelText kept;
  for (size_t i = 0; i < t.size(); ++i) {
    const size_t ns = count_tokens(t.src[i]);
    const size_t nt = count_tokens(t.tgt[i]);
    const size_t lo = std::min(ns, nt), hi = std::max(ns, nt);
    if (lo < static_cast<size_t>(std::max(min_tokens, 0)) || lo == 0) {
      ++r.too_short;
    } else if (hi > static_cast<size_t>(max_tokens)) {
      ++r.too_long;
    } else if (static_cast<double>(hi) > max_length_ratio * static_cast<double>(lo)) {
      ++r.bad_ratio;
    } else {
      kept.src.push_back(std::move(t.src[i]));
      kept.tgt.push_back(std::move(t.tgt[i]));
    }
  }
  r.kept = kept.size();
  t = std::move(kept);
  return r;
}

void ensure_corpus(const DataConfig& d) {
  const std::vector<std::string> files = {d.train_src, d.train_tgt, d.dev_src,
                                          d.dev_tgt,   d.test_src,  d.test_tgt};
  bool missing = false;
  std::error_code ec;
  for (const auto& f : files) missing = missing || !fs::exists(data_path(d, f), ec);
  for (const auto& f : d.test_extra_refs) missing = missing || !fs::exists(data_path(d, f), ec);
  if (!missing) return;
  HC_CHECK(d.prepare == "bible",
           "corpus files missing in {} (e.g. {}) and data.prepare is '{}': give the files, or set "
           "data.prepare: bible for the default corpus",
           d.dir, data_path(d, d.train_src).string(), d.prepare);
  log::info("building the default Spanish-English Bible corpus into {}", d.dir);
  BibleOptions o;
  o.out = d.dir;
  build_bible_corpus(o);
}

namespace {

// XXH64 of lines each followed by '\n': the file's bytes, from the lines already read.
std::string hash_lines(const std::vector<std::string>& lines) {
  io::Xxh64 h;
  for (const auto& line : lines) {
    h.update(line.data(), line.size());
    h.update("\n", 1);
  }
  return io::hex64(h.digest());
}

}  // namespace

Corpus load_corpus(const DataConfig& d) {
  ensure_corpus(d);
  Corpus c;
  c.train = read_parallel(data_path(d, d.train_src), data_path(d, d.train_tgt));
  c.input_xxh64 = {{"train_src", hash_lines(c.train.src)}, {"train_tgt", hash_lines(c.train.tgt)}};
  c.dev = read_parallel(data_path(d, d.dev_src), data_path(d, d.dev_tgt));
  c.input_xxh64["dev_src"] = hash_lines(c.dev.src);
  c.input_xxh64["dev_tgt"] = hash_lines(c.dev.tgt);
  c.test = read_parallel(data_path(d, d.test_src), data_path(d, d.test_tgt));
  c.test_refs.push_back(c.test.tgt);
  for (const auto& extra : d.test_extra_refs) {
    auto lines = io::read_lines(data_path(d, extra));
    HC_CHECK(lines.size() == c.test.size(),
             "{} has {} lines but the test set {} has {}: references must be line-aligned",
             data_path(d, extra).string(), lines.size(), data_path(d, d.test_src).string(),
             c.test.size());
    c.test_refs.push_back(std::move(lines));
  }
  c.train_filter = filter_by_length(c.train, d.min_tokens, d.max_tokens, d.max_length_ratio);
  HC_CHECK(c.train.size() > 0, "no training pairs left after length filtering ({})",
           c.train_filter.summary());
  return c;
}

Corpus load_checkpoint_corpus(const DataConfig& d, bool prepare_asked) {
  if (prepare_asked) return load_corpus(d);
  std::error_code ec;
  HC_CHECK(fs::is_directory(d.dir, ec),
           "data.dir {} (the checkpoint's config) does not exist here: give --set "
           "data.dir=FOLDER of its corpus (eval: or --src/--ref files), or --set "
           "data.prepare=bible to build the default corpus there",
           d.dir);
  DataConfig existing = d;
  existing.prepare = "none";  // missing files are an error naming them, not a build
  return load_corpus(existing);
}

SideStats side_stats(const std::vector<std::string>& lines) {
  SideStats s;
  s.lines = lines.size();
  std::vector<size_t> lens;
  lens.reserve(lines.size());
  for (const auto& l : lines) {
    const size_t n = count_tokens(l);
    lens.push_back(n);
    s.tokens += n;
    s.max_tokens = std::max(s.max_tokens, n);
  }
  if (!lens.empty()) {
    std::nth_element(lens.begin(), lens.begin() + lens.size() / 2, lens.end());
    s.median = lens[lens.size() / 2];
  }
  return s;
}

}  // namespace headcount::data
