// Integrity (issue #45, second round): faults injected the way a disk or a user makes them, each
// of which headcount once met with exit status 0 and a wrong result.
//   Integrity         a damaged file of a checkpoint (any of them) is an error naming it
//   ResumeVocabulary  a resume refuses a replaced vocabulary cache or an edited training corpus
//   StateCheck        an impossible state.json (any field) is an error naming the file and field
//   Leftovers         temporaries of killed writers are removed wherever headcount writes; an
//                     input that is not a regular file is read once or refused
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "headcount/common/run_guard.h"
#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"
#include "headcount/run/checkpoint.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::error_of;
using testing::TempDir;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One finished tiny training run (2 steps, evaluated at step 2), trained once for the file.
const TempDir& trained_dir() {
  static TempDir dir;
  static const fs::path last = train_tiny_model(dir, 2);
  (void)last;
  return dir;
}
fs::path trained_checkpoint() {
  return trained_dir() / "run" / "checkpoints" / "last";
}

// A fresh copy of the trained checkpoint at `dst`.
fs::path copy_of_checkpoint(const fs::path& dst) {
  fs::create_directories(dst.parent_path());
  fs::copy(trained_checkpoint(), dst, fs::copy_options::recursive);
  return dst;
}

// Every file a training run reads back from a checkpoint, read the way eval, translate and a
// resume read them.
void load_everything(const fs::path& dir) {
  const auto info = run::read_checkpoint_info(dir);
  auto model = run::load_model(info, torch::kCPU);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  run::load_optimizer(adam, dir);
  run::load_rng_state(dir / "rng.pt");
}

// What a failing disk does: 4 KiB (or the whole file, when smaller) in the middle of `file`
// inverted, the size unchanged.
void damage_middle(const fs::path& file) {
  std::string bytes = io::read_file(file);
  const size_t window = std::min<size_t>(4096, bytes.size());
  const size_t start = (bytes.size() - window) / 2;
  for (size_t i = start; i < start + window; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0xA5);
  io::write_file_atomic(file, bytes);
}

nlohmann::json read_json(const fs::path& file) {
  return nlohmann::json::parse(io::read_file(file));
}

// Records `name`'s current content in meta.json, as a consistent edit of the checkpoint would:
// what is left to find is then the content itself.
void rerecord_hash(const fs::path& dir, const std::string& name) {
  auto meta = read_json(dir / "meta.json");
  meta["files_xxh64"][name] = io::hex64(io::xxh64_file(dir / name));
  io::write_file_atomic(dir / "meta.json", meta.dump(2) + "\n");
}

// A process id that is no process any more.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

// ---- Integrity: content hashes of every checkpoint file ----

TEST(Integrity, Xxh64MatchesTheReferenceValuesInOnePieceAndInMany) {
  // Reference values of xxHash's XXH64 (xxhsum -H1; python-xxhash's documentation).
  const struct {
    std::string text;
    uint64_t seed;
    uint64_t expected;
  } rows[] = {
      {"", 0, 0xEF46DB3751D8E999ULL},
      {"a", 0, 0xD24EC4F1A98C6E5BULL},
      {"abc", 0, 0x44BC2CF5AD770999ULL},
      {"Nobody inspects the spammish repetition", 0, 0xFBCEA83C8A378BF1ULL},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(io::xxh64(r.text.data(), r.text.size(), r.seed), r.expected) << r.text;
  }
  // Any split of the input gives the one-shot value (files are hashed in 1 MiB pieces).
  std::mt19937 rng(3);
  std::string data(10007, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  const uint64_t whole = io::xxh64(data.data(), data.size());
  for (const size_t piece : {1, 3, 31, 32, 33, 64, 1000, 10007}) {
    io::Xxh64 h;
    for (size_t at = 0; at < data.size(); at += piece)
      h.update(data.data() + at, std::min(piece, data.size() - at));
    EXPECT_EQ(h.digest(), whole) << "pieces of " << piece;
  }
  TempDir dir;
  io::write_file_atomic(dir / "f", data);
  EXPECT_EQ(io::xxh64_file(dir / "f"), whole);
}

TEST(Integrity, MetaJsonRecordsEveryFileOfTheCheckpoint) {
  const fs::path ckpt = trained_checkpoint();
  const auto files = read_json(ckpt / "meta.json").at("files_xxh64");
  for (const char* name : {"model.pt", "optimizer.pt", "rng.pt", "state.json", "architecture.json",
                           "config.yaml", "vocab/joint.model"}) {
    ASSERT_TRUE(files.contains(name)) << name;
    EXPECT_EQ(files[name], io::hex64(io::xxh64_file(ckpt / name))) << name;
  }
  EXPECT_FALSE(files.contains("meta.json"));
  const auto corpus = read_json(ckpt / "meta.json").at("corpus_xxh64");
  EXPECT_TRUE(corpus.contains("train_src") && corpus.contains("train_tgt")) << corpus.dump();
  EXPECT_NO_THROW(load_everything(ckpt));
}

TEST(Integrity, EachDamagedFileOfACheckpointIsAnErrorNamingIt) {
  TempDir dir;
  const auto files = read_json(trained_checkpoint() / "meta.json").at("files_xxh64");
  int rows = 0;
  for (const auto& [name, hash] : files.items()) {
    const fs::path ckpt = copy_of_checkpoint(dir / fmt::format("damaged-{}", rows++));
    const auto size = fs::file_size(ckpt / name);
    damage_middle(ckpt / name);
    ASSERT_EQ(fs::file_size(ckpt / name), size);
    const std::string msg = error_of([&] { load_everything(ckpt); });
    EXPECT_TRUE(contains(msg, (ckpt / name).string())) << name << ": " << msg;
    if (name.rfind("vocab/", 0) == 0) {
      // The vocabulary's own check (its FNV-1a, recorded in meta.json since 2026-11-23) finds it
      // first.
      EXPECT_TRUE(contains(msg, "differs from the vocabulary")) << msg;
    } else {
      EXPECT_TRUE(contains(msg, "damaged")) << name << ": " << msg;
      EXPECT_TRUE(contains(msg, hash.get<std::string>())) << name << ": the recorded hash: " << msg;
    }
  }
  EXPECT_GE(rows, 7);
}

TEST(Integrity, CheckpointsWithoutHashesStillLoad) {
  TempDir dir;
  // As written before the hashes (the committed reference weights are such a checkpoint).
  const fs::path ckpt = copy_of_checkpoint(dir / "old");
  auto meta = read_json(ckpt / "meta.json");
  meta.erase("files_xxh64");
  meta.erase("corpus_xxh64");
  io::write_file_atomic(ckpt / "meta.json", meta.dump(2) + "\n");
  EXPECT_NO_THROW(load_everything(ckpt));
  const fs::path reference = testing::source_dir() / "experiments" / "voita-table-cpu" / "baseline";
  if (fs::exists(reference / "meta.json")) {
    EXPECT_FALSE(read_json(reference / "meta.json").contains("files_xxh64"));
    EXPECT_NO_THROW(run::read_checkpoint_info(reference));
  }
  // A file the checkpoint did not record, read as one of its own, is an error too.
  const fs::path extra = copy_of_checkpoint(dir / "extra");
  fs::copy_file(extra / "model.pt", extra / "other.pt");
  const std::string msg = error_of([&] { run::load_weights_file(extra / "other.pt"); });
  EXPECT_TRUE(contains(msg, "not one of the files the checkpoint recorded")) << msg;
}

// ---- ResumeVocabulary: a resume keeps the run's vocabulary and corpus ----

TEST(ResumeVocabulary, AReplacedCacheOrAnEditedCorpusIsRefusedOnResume) {
  struct Row {
    const char* what;
    std::function<void(const TempDir&, const Config&)> inject;
    std::vector<std::string> expected;  // parts of the error; empty: the resume succeeds
  };
  // Both sides: the files stay line-aligned, as a user's edit keeps them.
  const auto drop_lines = [](const TempDir& dir) {
    for (const char* name : {"train.es", "train.en"}) {
      auto lines = io::read_lines(dir / name);
      lines.resize(lines.size() - 3);
      io::write_lines_atomic(dir / name, lines);
    }
  };
  // One line of a file made longer, as an edit would.
  const auto extend_line = [](const fs::path& file, size_t i) {
    auto lines = io::read_lines(file);
    lines.at(i) += " and more";
    io::write_lines_atomic(file, lines);
  };
  // The cached SentencePiece model replaced by another valid one (trained on the English side
  // alone: another vocabulary); with `rerecord`, the cache entry's record updated to match.
  const auto replace_cached_model = [](const TempDir& dir, const Config& c, bool rerecord) {
    fs::path cached;
    for (const auto& e : fs::recursive_directory_iterator(c.vocab.cache_dir))
      if (e.path().filename() == "joint.model") cached = e.path();
    ASSERT_FALSE(cached.empty());
    data::train_sentencepiece({dir / "train.en"}, dir / "other", c.vocab, c.seed, 1);
    ASSERT_NE(io::read_file(dir / "other.model"), io::read_file(cached));
    fs::copy_file(dir / "other.model", cached, fs::copy_options::overwrite_existing);
    if (!rerecord) return;
    const fs::path options = cached.parent_path() / "options.json";
    auto info = read_json(options);
    info["models_xxh64"]["joint.model"] = io::hex64(io::xxh64_file(cached));
    io::write_file_atomic(options, info.dump(2) + "\n");
  };
  const std::vector<Row> rows = {
      {"nothing changed", [](const TempDir&, const Config&) {}, {}},
      // The cache entry's own record finds it first.
      {"the cached SentencePiece model replaced by another valid one",
       [&](const TempDir& dir, const Config& c) { replace_cached_model(dir, c, false); },
       {"joint.model: not the model this cache entry was trained as", "XXH64", "remove"}},
      // Past the cache's record (edited too), the checkpoint's own hashes find it.
      {"the cached model and its cache record replaced",
       [&](const TempDir& dir, const Config& c) { replace_cached_model(dir, c, true); },
       {"joint.model: not the vocabulary the checkpoint", "FNV-1a", "remove"}},
      {"lines deleted from both training files",
       [&](const TempDir& dir, const Config&) { drop_lines(dir); },
       {"train.es: the training corpus differs", "XXH64", "--init-from"}},
      {"a line of the target training file edited",
       [&](const TempDir& dir, const Config&) { extend_line(dir / "train.en", 5); },
       {"train.en: the training corpus differs", "XXH64", "--init-from"}},
      {"a line of the dev target file edited (the dev set decides `best`)",
       [&](const TempDir& dir, const Config&) { extend_line(dir / "dev.en", 0); },
       {"dev.en: the dev set differs", "XXH64", "early stopping"}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    TempDir dir;
    Config c = tiny_run_config(dir, 64);
    c.train.max_steps = 2;
    c.train.eval_every = 2;
    train::TrainOptions o;
    o.run_dir = dir / "run";
    train::train_command(c, o);
    const std::string weights = io::read_file(dir / "run" / "checkpoints" / "last" / "model.pt");
    const auto recorded = read_json(dir / "run" / "checkpoints" / "last" / "meta.json");
    row.inject(dir, c);
    c.train.max_steps = 3;  // an extended run resumes (train.* may change)
    const std::string msg = error_of([&] { train::train_command(c, o); });
    if (row.expected.empty()) {
      EXPECT_EQ(msg, "(no error)");
      continue;
    }
    for (const auto& part : row.expected) EXPECT_TRUE(contains(msg, part)) << part << ": " << msg;
    // Both hashes: the one the checkpoint recorded and the one found (the cache's own record
    // names its hashes instead).
    if (!contains(row.expected[0], "cache entry")) {
      const std::string key =
          row.expected[0].rfind("joint", 0) == 0 ? "vocab_fnv1a" : "corpus_xxh64";
      bool names_recorded = false;
      for (const auto& [name, hash] : recorded.at(key).items())
        names_recorded = names_recorded || contains(msg, hash.get<std::string>());
      EXPECT_TRUE(names_recorded) << msg;
    }
    // Nothing of the run changed.
    EXPECT_EQ(io::read_file(dir / "run" / "checkpoints" / "last" / "model.pt"), weights);
    EXPECT_EQ(read_json(dir / "run" / "checkpoints" / "last" / "meta.json"), recorded);
  }
}

// ---- StateCheck: state.json against its ranges and its folder ----

TEST(StateCheck, EachFieldOutOfRangeIsAnErrorNamingTheFileAndField) {
  struct Row {
    const char* folder;  // where the checkpoint sits, under RUN/
    const char* field;
    nlohmann::json value;  // null with `erase`: the field removed
    bool erase;
    std::string expected;
  };
  // The trained checkpoint: step 2, epoch 0 or more, best_step 2.
  const std::vector<Row> rows = {
      {"checkpoints/last", "step", -5, false, "'step' is -5, expected >= 0"},
      {"checkpoints/last", "step", 2.5, false, "'step' is 2.5, expected an integer"},
      {"checkpoints/last", "step", "2", false, "'step' is \"2\", expected an integer"},
      {"checkpoints/last", "step", nullptr, true, "no 'step' field"},
      {"checkpoints/last", "epoch", -1, false, "'epoch' is -1"},
      {"checkpoints/last", "epoch", 3, false, "'epoch' is 3"},
      {"checkpoints/last", "batch_in_epoch", -1, false, "'batch_in_epoch' is -1"},
      {"checkpoints/last", "best_score", nullptr, false, "'best_score' is null, expected a number"},
      {"checkpoints/last", "best_score", "high", false, "'best_score' is \"high\""},
      {"checkpoints/last", "best_step", -2, false, "'best_step' is -2"},
      {"checkpoints/last", "best_step", 3, false, "'best_step' is 3"},
      {"checkpoints/last", "evals_without_improvement", -1, false,
       "'evals_without_improvement' is -1"},
      {"checkpoints/last", "elapsed_seconds", -1.5, false, "'elapsed_seconds' is -1.5"},
      {"checkpoints/last", "target_tokens", -1, false, "'target_tokens' is -1"},
      {"checkpoints/last", "target_tokens", nullptr, true, "no 'target_tokens' field"},
      // Against the folder: step-N holds step N; best is the checkpoint of its best step.
      {"checkpoints/step-7", "step", 2, false, "'step' is 2, expected 7"},
      {"checkpoints/best", "best_step", -1, false, "'best_step' is -1, expected the step (2)"},
  };
  TempDir dir;
  int n = 0;
  for (const auto& row : rows) {
    SCOPED_TRACE(fmt::format("{} {} = {}", row.folder, row.field, row.value.dump()));
    const fs::path ckpt = copy_of_checkpoint(dir / fmt::format("run-{}", n++) / row.folder);
    auto state = read_json(ckpt / "state.json");
    ASSERT_EQ(state.at("step"), 2);
    if (row.erase) {
      state.erase(row.field);
    } else {
      state[row.field] = row.value;
    }
    const std::string before = io::read_file(ckpt / "state.json");
    io::write_file_atomic(ckpt / "state.json", state.dump(2) + "\n");
    if (io::read_file(ckpt / "state.json") != before) {
      // Edited by hand, the file no longer matches its recorded hash: an error naming it.
      const std::string damaged = error_of([&] { run::read_checkpoint_info(ckpt); });
      EXPECT_TRUE(contains(damaged, (ckpt / "state.json").string() + ": damaged")) << damaged;
    }
    // With its hash recorded again (or in a checkpoint of before the hashes): the field itself.
    rerecord_hash(ckpt, "state.json");
    const std::string msg = error_of([&] { run::read_checkpoint_info(ckpt); });
    EXPECT_TRUE(contains(msg, (ckpt / "state.json").string())) << msg;
    EXPECT_TRUE(contains(msg, row.expected)) << msg;
  }
}

TEST(StateCheck, AFinishedRunWithAnImpossibleStateIsNotTrainedAgain) {
  struct Row {
    const char* what;
    std::function<void(const fs::path& run)> inject;
    std::string expected;
  };
  const auto edit_state = [](const fs::path& ckpt, const std::function<void(nlohmann::json&)>& f) {
    auto state = read_json(ckpt / "state.json");
    f(state);
    io::write_file_atomic(ckpt / "state.json", state.dump(2) + "\n");
    rerecord_hash(ckpt, "state.json");
  };
  const std::vector<Row> rows = {
      {"a negative step in last",
       [&](const fs::path& run) {
         edit_state(run / "checkpoints" / "last", [](auto& s) { s["step"] = -5; });
       },
       "last/state.json: 'step' is -5"},
      {"best holding another step than last's best step",
       [&](const fs::path& run) {
         edit_state(run / "checkpoints" / "last", [](auto& s) {
           s["step"] = 4;
           s["best_step"] = 3;
         });
       },
       "best/state.json: 'step' is 2, but"},
      {"a step-N later than last",
       [&](const fs::path& run) {
         fs::rename(run / "checkpoints" / "step-2", run / "checkpoints" / "step-9");
       },
       "step-9: a checkpoint of step 9, later than"},
      {"an epoch position past the epoch's batches",
       [&](const fs::path& run) {
         edit_state(run / "checkpoints" / "last", [](auto& s) { s["batch_in_epoch"] = 1000000; });
       },
       "last/state.json: 'batch_in_epoch' is 1000000, but an epoch of this run has"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    TempDir dir;
    Config c = tiny_run_config(dir, 64);
    c.train.max_steps = 2;
    c.train.eval_every = 2;
    c.train.keep_last = 1;
    train::TrainOptions o;
    o.run_dir = dir / "run";
    train::train_command(c, o);
    ASSERT_TRUE(fs::exists(dir / "run" / "checkpoints" / "step-2"));
    const std::string best = io::read_file(dir / "run" / "checkpoints" / "best" / "model.pt");
    row.inject(o.run_dir);
    c.train.max_steps = 6;
    const std::string msg = error_of([&] { train::train_command(c, o); });
    EXPECT_TRUE(contains(msg, row.expected)) << msg;
    EXPECT_EQ(io::read_file(dir / "run" / "checkpoints" / "best" / "model.pt"), best);
  }
}

TEST(StateCheck, AResumeUnderAnotherBestMetricIsRefused) {
  // best_score is BLEU or minus the loss: a resume under the other metric would compare the two.
  TempDir dir;
  Config c = tiny_run_config(dir, 64);
  c.train.max_steps = 2;
  c.train.eval_every = 2;
  train::TrainOptions o;
  o.run_dir = dir / "run";
  train::train_command(c, o);
  c.train.max_steps = 4;
  c.train.best_metric =
      c.train.best_metric == BestMetric::kBleu ? BestMetric::kLoss : BestMetric::kBleu;
  const std::string msg = error_of([&] { train::train_command(c, o); });
  EXPECT_TRUE(contains(msg, "train.best_metric")) << msg;
  EXPECT_TRUE(contains(msg, "holds a run with another config")) << msg;
}

TEST(Integrity, AnArchitectureTakenFromACheckpointIsCheckedAgainstItsHash) {
  TempDir dir;
  const fs::path ckpt = copy_of_checkpoint(dir / "ckpt");
  EXPECT_EQ(run::read_architecture(ckpt), run::read_checkpoint_info(ckpt).architecture);
  // Valid JSON, another architecture: only the recorded hash tells.
  auto arch = read_json(ckpt / "architecture.json");
  arch["enc_self"][0] = 1;
  io::write_file_atomic(ckpt / "architecture.json", arch.dump());
  for (const fs::path& p : {ckpt, ckpt / "architecture.json"}) {
    const std::string msg = error_of([&] { run::read_architecture(p); });
    EXPECT_TRUE(contains(msg, (ckpt / "architecture.json").string() + ": damaged")) << msg;
  }
}

// ---- Leftovers: temporaries of killed writers; inputs that are not files ----

TEST(Leftovers, OutputsAreWrittenThroughLinksPipesAndDevices) {
  TempDir dir;
  // Through a symbolic link: the file it names changes, the link stays a link.
  io::write_file_atomic(dir / "target.txt", "old\n");
  fs::create_symlink(dir / "target.txt", dir / "link.txt");
  io::write_file_atomic(dir / "link.txt", "new\n");
  EXPECT_TRUE(fs::is_symlink(dir / "link.txt"));
  EXPECT_EQ(io::read_file(dir / "target.txt"), "new\n");
  // Into a FIFO: its reader gets the bytes (a rename would leave it waiting forever).
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = io::read_file(fifo); });
  io::write_lines_atomic(fifo, {"uno", "dos"});
  reader.join();
  EXPECT_EQ(got, "uno\ndos\n");
  EXPECT_FALSE(fs::is_regular_file(fifo));
  // A device that takes nothing: an error naming it, not a silent success (where the machine has
  // /dev/full).
  if (!fs::is_character_file("/dev/full")) GTEST_SKIP() << "no /dev/full device here";
  const std::string msg = error_of([&] { io::write_file_atomic("/dev/full", "x\n"); });
  EXPECT_TRUE(contains(msg, "/dev/full: write failed")) << msg;
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

TEST(Leftovers, EveryWriterRemovesWhatAKilledWriterOfItsTargetLeft) {
  struct Row {
    const char* what;
    fs::path target;  // the file or folder written
    std::function<void()> write;
  };
  TempDir dir;
  const auto info = run::read_checkpoint_info(trained_checkpoint());
  Config vocab_config = tiny_run_config(dir, 16);
  const fs::path cache = dir / "vocab-cache";
  vocab_config.vocab.cache_dir = cache.string();
  const std::vector<Row> rows = {
      {"a file written atomically (eval --out, report, sweep status, ...)",
       dir / "out" / "eval.json",
       [&] { io::write_file_atomic(dir / "out" / "eval.json", "{}\n"); }},
      {"a checkpoint written outside a run folder (export-pruned --out)", dir / "out" / "pruned",
       [&] {
         auto model = run::load_model(info, torch::kCPU);
         run::save_checkpoint(dir / "out" / "pruned", model, nullptr, info.state, info.config,
                              info.vocab);
       }},
      {"a checkpoint copied", dir / "out" / "copy",
       [&] { run::copy_checkpoint(trained_checkpoint(), dir / "out" / "copy"); }},
  };
  const pid_t dead = dead_pid();
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    const fs::path parent = row.target.parent_path();
    const std::string name = row.target.filename().string();
    fs::create_directories(parent);
    const fs::path stale_tmp = parent / fmt::format(".{}.tmp.{}", name, dead);
    const fs::path stale_old = parent / fmt::format(".{}.old.{}", name, dead);
    const fs::path live = parent / fmt::format(".{}.tmp.1", name);  // init's: alive
    const fs::path foreign = parent / fmt::format(".someone-else.tmp.{}", dead);
    fs::create_directories(stale_tmp);
    io::write_file_atomic(stale_tmp / "model.pt", "half");
    fs::create_directories(stale_old);
    fs::create_directories(live);
    fs::create_directories(foreign);
    row.write();
    EXPECT_TRUE(fs::exists(row.target));
    EXPECT_FALSE(fs::exists(stale_tmp));
    EXPECT_FALSE(fs::exists(stale_old));
    EXPECT_TRUE(fs::exists(live)) << "a live process's temporary";
    EXPECT_TRUE(fs::exists(foreign)) << "in a folder headcount does not own, only its target's";
  }
  // The vocabulary cache is headcount's own: every dead process's entry goes.
  fs::create_directories(cache / fmt::format(".spm-0123456789abcdef.tmp.{}", dead));
  data::train_or_load_vocab(vocab_config.vocab, dir / "train.es", dir / "train.en", 1, 1);
  EXPECT_FALSE(fs::exists(cache / fmt::format(".spm-0123456789abcdef.tmp.{}", dead)));
}

TEST(Leftovers, AnInputThatIsNotARegularFileIsReadOnceOrRefused) {
  TempDir dir;
  Config c = tiny_run_config(dir, 16);
  ASSERT_EQ(mkfifo((dir / "pipe.es").c_str(), 0600), 0);
  fs::create_directories(dir / "folder.es");
  struct Row {
    fs::path src;
    std::string expected;  // empty: accepted
  };
  const std::vector<Row> rows = {
      {dir / "train.es", ""},
      {dir / "pipe.es", "not a regular file (a pipe, such as <(...))"},
      {dir / "folder.es", "not a regular file (a folder)"},
      {"/dev/null", "not a regular file (a device or socket)"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.src.string());
    // Refused before it is opened: a pipe is not consumed, nothing blocks.
    const std::string msg =
        error_of([&] { data::train_or_load_vocab(c.vocab, row.src, dir / "train.en", c.seed, 1); });
    if (row.expected.empty()) {
      EXPECT_EQ(msg, "(no error)");
    } else {
      EXPECT_TRUE(contains(msg, row.src.string() + ": " + row.expected)) << msg;
    }
  }
  // The corpus loader reads a pipe once, and hashes what it read: the same hash as the file's.
  const std::string content = io::read_file(dir / "train.es");
  const auto from_file = data::load_corpus(c.data).input_xxh64;
  EXPECT_EQ(from_file.at("train_src"), io::hex64(io::xxh64(content.data(), content.size())));
  const pid_t writer = fork();
  if (writer == 0) {
    std::ofstream(dir / "pipe.es") << content;
    _exit(0);
  }
  Config piped = c;
  piped.data.train_src = (dir / "pipe.es").string();
  const auto from_pipe = data::load_corpus(piped.data).input_xxh64;
  waitpid(writer, nullptr, 0);
  EXPECT_EQ(from_pipe.at("train_src"), from_file.at("train_src"));
}

}  // namespace
}  // namespace headcount
