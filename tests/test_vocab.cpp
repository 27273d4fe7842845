// SentencePiece beside LibTorch in one binary (the start-up crash scripts/build_sentencepiece.sh
// explains must never return), training, the round trip, and the cache.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "../src/spm/backend.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/data/vocab.h"
#include "test_util.h"

namespace headcount {
namespace {

using testing::TempDir;

void write_corpus(const fs::path& es, const fs::path& en) {
  const char* es_words[] = {"el",   "perro", "come",  "la",    "casa",  "grande", "niño",
                            "agua", "día",   "noche", "árbol", "verde", "corre",  "mañana"};
  const char* en_words[] = {"the", "dog",   "eats", "house", "big",  "child",    "water",
                            "day", "night", "tree", "green", "runs", "tomorrow", "a"};
  std::ofstream a(es), b(en);
  for (int i = 0; i < 400; ++i) {
    for (int k = 0; k < 6; ++k) a << (k ? " " : "") << es_words[(i + k * 5 + i / 14) % 14];
    for (int k = 0; k < 6; ++k) b << (k ? " " : "") << en_words[(i + k * 3 + i / 14) % 14];
    a << "\n";
    b << "\n";
  }
}

TEST(Vocab, SentencePieceAndLibTorchInOneProcess) {
  // LibTorch's protobuf is initialised by now; SentencePiece trains, loads and encodes too.
  auto t = torch::ones({2, 2}) * 3;
  EXPECT_EQ(t.sum().item<float>(), 12.0f);
  TempDir dir;
  write_corpus(dir / "train.es", dir / "train.en");
  VocabConfig c;
  c.size = 400;  // byte fallback needs 256 pieces for the bytes
  c.byte_fallback = true;
  c.cache_dir = (dir / "cache").string();
  const auto files = data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1);
  EXPECT_TRUE(files.joint);
  EXPECT_FALSE(files.from_cache);
  const auto v = data::Vocab::load(files.src_model);
  EXPECT_LE(v.size(), 400);
  EXPECT_EQ(v.piece(data::kPadId), "<pad>");
  EXPECT_EQ(v.piece(data::kEosId), "</s>");
  for (const std::string s : {"el perro come la casa grande", "the big dog runs tomorrow",
                              "mañana árbol verde", "unseen Wörter ok ☃"}) {
    const auto ids = v.encode(s);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(v.decode(ids), s) << s;
  }
  // The ids feed a tensor.
  const auto ids = v.encode("the dog");
  auto tensor = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()));
  EXPECT_EQ(tensor.size(0), static_cast<int64_t>(ids.size()));
}

TEST(Vocab, SentencePieceKeepsItsProtobufToItself) {
  // SentencePiece and its protobuf live in libheadcount_spm.so with every symbol local but the C
  // interface: no protobuf or SentencePiece symbol of it can be bound to, or bind to, another
  // library's (the official LibTorch's protobuf made vocabulary training crash; GPU.md). dlsym on
  // the library's handle searches it and its dependencies alone.
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&hc_spm_load), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  void* lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << info.dli_fname;
  EXPECT_NE(std::string(info.dli_fname).find("headcount_spm"), std::string::npos)
      << "SentencePiece is linked into " << info.dli_fname << ", not its own library";
  EXPECT_NE(dlsym(lib, "hc_spm_train"), nullptr);
  const char* hidden[] = {
      "_ZN6google8protobuf23ShutdownProtobufLibraryEv",  // google::protobuf::Shutdown...()
      "_ZN13sentencepiece22SentencePieceProcessorC1Ev",  // SentencePieceProcessor()
  };
  for (const char* symbol : hidden) {
    EXPECT_EQ(dlsym(lib, symbol), nullptr) << symbol << " is exported by " << info.dli_fname;
  }
  dlclose(lib);
  // And it trains beside whatever protobuf the process holds (Debian's LibTorch brings the
  // system's libprotobuf, another version than SentencePiece's bundled one).
  TempDir dir;
  write_corpus(dir / "train.es", dir / "train.en");
  VocabConfig c;
  c.size = 300;
  c.byte_fallback = true;
  data::train_sentencepiece({dir / "train.es"}, dir / "m", c, 1, 1);
  const auto v = data::Vocab::load(dir / "m.model");
  EXPECT_EQ(v.decode(v.encode("el perro come")), "el perro come");
}

// Separate source and target models of 50 pieces, without byte fallback, cached in dir/cache.
VocabConfig separate_vocab(const TempDir& dir) {
  VocabConfig c;
  c.size = 50;
  c.byte_fallback = false;
  c.joint = false;
  c.cache_dir = (dir / "cache").string();
  return c;
}

TEST(Vocab, CacheReusedUntilInputsOrOptionsChange) {
  TempDir dir;
  write_corpus(dir / "train.es", dir / "train.en");
  VocabConfig c = separate_vocab(dir);
  c.model_type = "bpe";
  const auto first = data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1);
  EXPECT_NE(first.src_model, first.tgt_model);
  const auto again = data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.src_model, first.src_model);
  c.size = 55;
  const auto resized = data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1);
  EXPECT_FALSE(resized.from_cache);
  EXPECT_NE(resized.src_model.parent_path(), first.src_model.parent_path());
  std::ofstream(dir / "train.en", std::ios::app) << "a new line\n";
  c.size = 50;
  const auto changed = data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1);
  EXPECT_FALSE(changed.from_cache);
  // Without byte fallback an unseen character is <unk> and cannot come back.
  const auto unk = data::Vocab::load(first.tgt_model).encode("the ☃");
  EXPECT_NE(std::find(unk.begin(), unk.end(), data::kUnkId), unk.end());
  // Separate models see only their own side.
  const auto es = data::Vocab::load(first.src_model);
  const auto en = data::Vocab::load(first.tgt_model);
  EXPECT_EQ(es.decode(es.encode("el perro")), "el perro");
  EXPECT_EQ(en.decode(en.encode("the dog")), "the dog");
}

TEST(Vocab, ACacheEntryReplacedSinceItWasTrainedIsAnErrorNamingIt) {
  TempDir dir;
  write_corpus(dir / "train.es", dir / "train.en");
  const VocabConfig c = separate_vocab(dir);
  const auto first = data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1);
  // Another valid model in its place (the target side's), as a hand or a disk could put it there.
  fs::copy_file(first.tgt_model, first.src_model, fs::copy_options::overwrite_existing);
  const std::string e = testing::error_of(
      [&] { data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1); });
  EXPECT_NE(e.find(first.src_model.string() + ": not the model this cache entry was trained as"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("remove " + first.src_model.parent_path().string()), std::string::npos) << e;
  // Removed as the message says, it is trained again.
  fs::remove_all(first.src_model.parent_path());
  EXPECT_FALSE(data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1).from_cache);
}

TEST(Vocab, TheSameDataGivesTheSameModelBytesInAnyFolder) {
  TempDir dir;
  write_corpus(dir / "train.es", dir / "train.en");
  VocabConfig c;
  c.size = 60;
  c.byte_fallback = false;
  // Trained from another working directory, into two caches: SentencePiece writes nothing there,
  // and the temporary folder's name (with the process id) is not recorded in the model.
  const fs::path cwd = fs::current_path();
  fs::create_directories(dir / "work");
  fs::current_path(dir / "work");
  c.cache_dir = (dir / "cache-a").string();
  const auto a = data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1);
  c.cache_dir = (dir / "elsewhere" / "cache-b").string();
  const auto b = data::train_or_load_vocab(c, dir / "train.es", dir / "train.en", 1, 1);
  fs::current_path(cwd);
  EXPECT_TRUE(fs::is_empty(dir / "work"));
  EXPECT_FALSE(b.from_cache);
  const std::string bytes = io::read_file(a.src_model);
  EXPECT_EQ(bytes, io::read_file(b.src_model));
  EXPECT_EQ(bytes.find(".tmp."), std::string::npos);
  EXPECT_EQ(bytes.find("cache-a"), std::string::npos);
  EXPECT_EQ(
      data::Vocab::load(b.src_model).decode(data::Vocab::load(a.src_model).encode("el perro")),
      "el perro");
}

TEST(Vocab, BadModelFileIsAClearError) {
  TempDir dir;
  std::ofstream(dir / "junk.model") << "not a model";
  try {
    data::Vocab::load(dir / "junk.model");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a valid SentencePiece model"), std::string::npos);
  }
  EXPECT_THROW(data::Vocab::load(dir / "missing.model"), Error);
}

}  // namespace
}  // namespace headcount
