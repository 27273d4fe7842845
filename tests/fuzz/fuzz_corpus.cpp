// libFuzzer target: the parallel-corpus reader and the length filter.
// Input: the source file's bytes, a NUL, the target file's bytes.
#include <fstream>

#include "fuzz_util.h"
#include "headcount/data/corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headcount;
  const auto parts = fuzz::split_input(data, size, 2);
  const auto src = fuzz::scratch_dir() / "train.src";
  const auto tgt = fuzz::scratch_dir() / "train.tgt";
  std::ofstream(src, std::ios::binary | std::ios::trunc) << parts[0];
  std::ofstream(tgt, std::ios::binary | std::ios::trunc) << (parts.size() > 1 ? parts[1] : "");
  fuzz::expect_clear_error_or_success([&] {
    data::ParallelText text = data::read_parallel(src, tgt);
    if (text.src.size() != text.tgt.size()) std::abort();
    const size_t n = text.size();
    const data::FilterReport r = data::filter_by_length(text, 1, 50, 3.0);
    if (r.total != n || r.kept + r.dropped() != n || text.size() != r.kept) std::abort();
    data::side_stats(text.src);
  });
  return 0;
}
