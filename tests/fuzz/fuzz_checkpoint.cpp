// libFuzzer target: the checkpoint readers (meta.json, state.json, architecture.json,
// config.yaml, the model.pt pickle) through read_checkpoint_info and load_model.
// Input: one byte that picks the file, then the file's new content; every other file is the one
// of a real (tiny) checkpoint trained when the fuzzer starts.
#include <fstream>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "headcount/run/checkpoint.h"
#include "tiny_corpus.h"

namespace {

std::filesystem::path g_seed;
const char* const kFiles[] = {"meta.json", "state.json", "architecture.json", "config.yaml",
                              "model.pt"};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static headcount::testing::TempDir dir;
  g_seed = headcount::train_tiny_model(dir, 2);
  // Without its files' hashes (as an older checkpoint), so that a changed file reaches
  // the parsers instead of stopping at the hash check (tests/test_integrity.cpp covers that).
  auto meta = nlohmann::json::parse(headcount::io::read_file(g_seed / "meta.json"));
  meta.erase("files_xxh64");
  headcount::io::write_file_atomic(g_seed / "meta.json", meta.dump(2) + "\n");
  // scripts/fuzz.sh: the seed inputs are the real files, each behind its selector byte.
  if (const char* seeds = std::getenv("HEADCOUNT_FUZZ_SEEDS")) {
    for (int i = 0; i < 5; ++i) {
      std::ofstream out(std::filesystem::path(seeds) / ("seed-" + std::string(kFiles[i])),
                        std::ios::binary | std::ios::trunc);
      out.put(static_cast<char>(i));
      out << headcount::io::read_file(g_seed / kFiles[i]);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headcount;
  if (size == 0) return 0;
  const auto ckpt = fuzz::scratch_dir() / "ckpt";
  std::filesystem::remove_all(ckpt);
  std::filesystem::copy(g_seed, ckpt, std::filesystem::copy_options::recursive);
  std::ofstream(ckpt / kFiles[data[0] % 5], std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  fuzz::expect_clear_error_or_success([&] {
    const run::CheckpointInfo info = run::read_checkpoint_info(ckpt);
    run::load_model(info, torch::kCPU);
  });
  return 0;
}
