// Values the headcount executable must refuse before any work, each row one command line with the
// error it must give: numeric flags through the same checks as their config keys (NaN and
// infinities included), inputs bounded while they are read, and smaller surprises.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "headcount/common/io.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::TempDir;

// Runs `headcount ARGS` with stdin from /dev/null unless ARGS redirects it; `timeout` turns a
// hang into a failed row instead of a stuck test.
testing::CommandResult run_with_timeout(const std::string& args) {
  const bool own_stdin = args.find(" < ") != std::string::npos;
  return testing::run_headcount("timeout 120", own_stdin ? args : args + " </dev/null");
}

struct Row {
  std::string args;  // the command line after `headcount`
  std::string want;  // a part of the error: the flag, key, file (and line) it names
};

// Every row fails with an error (not a crash, not a hang: 124 is timeout's status) naming `want`.
void expect_errors(const std::vector<Row>& rows) {
  for (const auto& row : rows) {
    const auto o = run_with_timeout(row.args);
    EXPECT_NE(o.code, 0) << row.args;
    EXPECT_NE(o.code, 124) << row.args << ": timed out";
    EXPECT_LT(o.code, 128) << row.args << ": killed by a signal";
    EXPECT_NE(o.err.find(row.want), std::string::npos)
        << row.args << "\n  expected: " << row.want << "\n  got: " << o.err;
  }
}

// A tiny trained checkpoint whose config says data.prepare: bible, as every config does unless it
// says otherwise (its corpus files exist, so nothing is built).
fs::path tiny_checkpoint(const TempDir& dir) {
  Config c = tiny_run_config(dir, 64);
  c.data.prepare = "bible";
  c.train.max_steps = 4;
  c.train.eval_every = 4;
  train::TrainOptions o;
  o.run_dir = dir / "run";
  train::train_command(c, o);
  return dir / "run" / "checkpoints" / "last";
}

// Lines: two sentences, then one of `bytes` bytes without a space, then another sentence.
void write_with_long_line(const fs::path& path, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out << "uno dos\ntres cuatro\n" << std::string(bytes, 'a') << "\ncinco\n";
}

TEST(FlagValidation, EveryNumericFlagRefusesOutOfRangeNanAndInfinity) {
  TempDir dir;
  const std::string d = dir.path().string();  // an existing folder where one is required
  std::ofstream(dir / "r.txt") << "a b\n";
  const std::string ref = (dir / "r.txt").string();
  const std::string bleu = "bleu " + ref + " " + ref;
  const std::string tr = "translate --checkpoint " + d;
  const std::string ev = "eval --checkpoint " + d;
  const std::string an = " --checkpoint " + d + " --out " + d + "/a";
  const std::vector<Row> rows = {
      // Flags that stand for config keys: the key's range, the key named.
      {tr + " --batch-size 0", "--batch-size: decode.batch_size: must be between 1 and 100000"},
      {tr + " --batch-size -3", "--batch-size: decode.batch_size: must be between 1 and 100000"},
      {tr + " --batch-size 2.5", "--batch-size: decode.batch_size: expected an integer"},
      {tr + " --beam 0", "--beam: decode.beam: must be between 1 and 256"},
      {tr + " --beam 1000000", "--beam: decode.beam: must be between 1 and 256"},
      {tr + " --length-penalty nan", "--length-penalty: decode.length_penalty: expected a number"},
      {tr + " --length-penalty .nan", "--length-penalty: decode.length_penalty: expected a number"},
      {tr + " --length-penalty inf", "--length-penalty: decode.length_penalty: expected a number"},
      {tr + " --length-penalty .inf", "--length-penalty: decode.length_penalty: expected a finite"},
      {tr + " --length-penalty -5", "--length-penalty: decode.length_penalty: must be between 0"},
      {tr + " --length-penalty 100", "--length-penalty: decode.length_penalty: must be between 0"},
      {ev + " --batch-size 0", "--batch-size: decode.batch_size"},
      {ev + " --beam 257", "--beam: decode.beam"},
      {ev + " --length-penalty nan", "--length-penalty: decode.length_penalty"},
      {"analyze importance" + an + " --beam 0", "--beam: decode.beam"},
      {"analyze ablate" + an + " --beam 1000", "--beam: decode.beam"},
      {"analyze compare" + an + " --run " + d + " --beam 0", "--beam: decode.beam"},
      {"bench threads --d-model 0", "--d-model: model.d_model"},
      {"bench threads --layers 0", "--layers: model.encoder_layers"},
      {"bench threads --heads 0", "--heads: model.heads"},
      {"bench threads --tokens -1", "--tokens: train.max_tokens"},
      {"bench train --d-model 4", "--d-model: model.d_model"},
      {"bench train --layers 65", "--layers: model.encoder_layers"},
      {"bench train --heads 0", "--heads: model.heads"},
      {"bench train --ffn 0", "--ffn: model.ffn_dim"},
      {"bench train --vocab 3", "--vocab: vocab.size"},
      // Shapes together, as the config checks model.d_model against model.heads.
      {"bench threads --d-model 100 --heads 8", "--d-model (100) is not divisible by --heads (8)"},
      {"bench train --d-model 100 --heads 8 --steps 1",
       "--d-model (100) is not divisible by --heads (8)"},
      {"bench decode --checkpoint " + d + " --beams 1 0", "--beams: decode.beam"},
      {"bench decode --checkpoint " + d + " --beams 0", "--beams: decode.beam"},
      // Config keys from --set: NaN and infinities, in lists too.
      {"config show --set decode.batch_size=0", "decode.batch_size: must be between 1 and 100000"},
      {"config show --set train.lr=.nan", "train.lr: expected a number"},
      {"config show --set train.lr=.inf", "train.lr: expected a finite number"},
      {"config show --set 'prune.lambda_steps=[1,.inf]'", "prune.lambda_steps: expected a finite"},
      {"config show --set 'prune.lambda_values=[.nan]'", "prune.lambda_values: expected a number"},
      // Flags without a config key: their own range, finite numbers only.
      {"analyze importance" + an + " --sentences -1", "--sentences: expected an integer from 0"},
      {"analyze heads" + an + " --margin nan", "--margin: expected a finite number from -1 to 1"},
      {"analyze heads" + an + " --margin 2", "--margin: expected a finite number from -1 to 1"},
      {"analyze heads" + an + " --min-arcs -1", "--min-arcs: expected a finite number from 0"},
      {"analyze heads" + an + " --min-arcs inf", "--min-arcs: expected a finite number from 0"},
      {"analyze heads" + an + " --exclude-top -5", "--exclude-top: expected an integer from 0"},
      {"analyze relevance" + an + " --epsilon nan", "--epsilon: expected a finite number"},
      {"analyze relevance" + an + " --epsilon inf", "--epsilon: expected a finite number"},
      {"analyze relevance" + an + " --epsilon 0", "--epsilon: expected a finite number"},
      {"analyze align" + an + " --margin=-inf", "--margin: expected a finite number from -1 to 1"},
      {"analyze compare" + an + " --run " + d + " --finetune-threads -1",
       "--finetune-threads: expected an integer from 0 to 4096"},
      {"bench threads --repeats 0", "--repeats: expected an integer from 1 to 100"},
      {"bench train --sentences 0", "--sentences: expected an integer from 1"},
      {"bench train --length 0", "--length: expected an integer from 1"},
      {"bench train --steps 0", "--steps: expected an integer from 1"},
      {"bench train --warmup -1", "--warmup: expected an integer from 0"},
      {"bench decode --checkpoint " + d + " --sentences -1", "--sentences: expected an integer"},
      {"bench decode --checkpoint " + d + " --repeats 0", "--repeats: expected an integer"},
      {bleu + " --smooth-value nan", "--smooth-value: expected a finite number from 0"},
      {bleu + " --smooth-value inf", "--smooth-value: expected a finite number from 0"},
      {bleu + " --smooth-value -5", "--smooth-value: expected a finite number from 0"},
      {bleu + " --max-ngram-order 0", "--max-ngram-order: expected an integer from 1 to 20"},
      {bleu + " --chrf-char-order 21", "--chrf-char-order: expected an integer from 1 to 20"},
      {bleu + " --chrf-word-order -1", "--chrf-word-order: expected an integer from 0 to 10"},
      {bleu + " --chrf-beta 0", "--chrf-beta: expected an integer from 1 to 100"},
      {bleu + " --width 16", "--width: expected an integer from 0 to 15"},
      {bleu + " --paired-n -1", "--paired-n: expected an integer from 0"},
      {bleu + " --paired-seed -1", "--paired-seed: expected an integer from 0"},
      {"data bible --out " + d + "/b --period 2", "--period: expected an integer from 3 to 1000"},
      {"launch --nproc 0", "--nproc: expected an integer from 1 to 1024"},
      {"launch --cores -1", "--cores: expected an integer from 0 to 4096"},
      {"launch --grace nan", "--grace: expected a finite number from 0 to 3600"},
      {"launch --grace -1", "--grace: expected a finite number from 0 to 3600"},
      {"train c.yaml --out " + d + "/t --dist-timeout 0", "--dist-timeout: expected an integer"},
      {"prune c.yaml --out " + d + "/p --dist-timeout -1", "--dist-timeout: expected an integer"},
      {"sweep s.yaml --out " + d + "/s --workers 0", "--workers: expected an integer from 1"},
      {"sweep s.yaml --out " + d + "/s --cores -1", "--cores: expected an integer from 0"},
      {"sweep s.yaml --out " + d + "/s --only -1", "--only: expected an integer from 0"},
      {"sweep s.yaml --out " + d + "/s --srun-tasks -1", "--srun-tasks: expected an integer"},
      {"report " + d + " --analysis -1", "--analysis: expected an integer from 0"},
  };
  expect_errors(rows);
}

TEST(BoundedInput, LongLinesHugeFilesAndAliasBombsAreRefusedWhileReading) {
  TempDir dir;
  const std::string ckpt = tiny_checkpoint(dir).string();
  const fs::path big = dir / "big.txt";
  write_with_long_line(big, (size_t{1} << 20) + 1);  // one byte over io::kMaxLineBytes
  std::ofstream(dir / "ref.txt") << "a\nb\nc\nd\n";
  // Short enough to read, too many subwords for the model's 1024 positions.
  std::string many;
  for (int i = 0; i < 1100; ++i) many += "uno ";
  std::ofstream(dir / "many.txt") << "dos\n" << many << "\n";
  // Nine levels of ten aliases: 10^9 nodes once expanded, from 10 short lines.
  std::string laughs = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    laughs += fmt::format("l{}: &l{} [", i, i);
    for (int k = 0; k < 10; ++k) laughs += fmt::format("{}*l{}", k ? ", " : "", i - 1);
    laughs += "]\n";
  }
  std::ofstream(dir / "laughs.yaml") << laughs;
  std::ofstream(dir / "laughs-sweep.yaml") << "command: train\n" << laughs;
  {
    std::ofstream huge(dir / "huge.yaml");
    for (int i = 0; i < 40000; ++i) huge << "# " << std::string(40, 'x') << "\n";  // 1.7 MB
  }
  // A corpus for `data stats` whose training source has the long line.
  const fs::path corpus = dir / "corpus";
  fs::create_directories(corpus);
  for (const char* f : {"train.es", "train.en", "dev.es", "dev.en", "test.es", "test.en"})
    std::ofstream(corpus / f) << "uno\ndos\ntres\ncuatro\n";
  write_with_long_line(corpus / "train.es", (size_t{1} << 20) + 1);
  std::ofstream(dir / "stats.yaml")
      << fmt::format("data: {{prepare: none, dir: {}, test_extra_refs: []}}\n", corpus.string());

  const std::string d = dir.path().string();
  const std::string tr = "translate --checkpoint " + ckpt;
  const std::vector<Row> rows = {
      {tr + " -i " + big.string(), big.string() + ":3: line longer than 1048576 bytes"},
      {tr + " < " + big.string(), "<stdin>:3: line longer than 1048576 bytes"},
      {tr + " -i /dev/zero", "/dev/zero:1: line longer than 1048576 bytes"},
      {tr + " -i " + d + "/many.txt", "many.txt:2: "},
      {tr + " -i " + d + "/many.txt", "subwords, but the model holds at most 1023"},
      {"eval --checkpoint " + ckpt + " --src " + big.string() + " --ref " + d + "/ref.txt",
       big.string() + ":3: line longer"},
      {"eval --checkpoint " + ckpt + " --src " + d + "/ref.txt --ref " + big.string(),
       big.string() + ":3: line longer"},
      {"bleu " + big.string() + " " + d + "/ref.txt", big.string() + ":3: line longer"},
      {"bleu - " + d + "/ref.txt < /dev/zero", "<stdin>:1: line longer"},
      {"data stats " + d + "/stats.yaml", "train.es:3: line longer than 1048576 bytes"},
      {"config show /dev/zero", "/dev/zero: larger than 1048576 bytes: expected a YAML config"},
      {"config show " + d + "/huge.yaml", "huge.yaml: larger than 1048576 bytes"},
      {"config show " + d + "/laughs.yaml", "laughs.yaml:"},
      {"config show " + d + "/laughs.yaml", "YAML nodes once aliases are expanded"},
      {"train " + d + "/laughs.yaml --out " + d + "/t", "YAML nodes once aliases are expanded"},
      {"sweep " + d + "/laughs-sweep.yaml --out " + d + "/s",
       "YAML nodes once aliases are expanded"},
      {"sweep /dev/zero --out " + d + "/s", "/dev/zero: larger than 1048576 bytes"},
      {"analyze heads --checkpoint " + ckpt + " --out " + d + "/h --conllu " + big.string(),
       big.string() + ":3: line longer than 1048576 bytes"},
      {"analyze heads --checkpoint " + ckpt + " --out " + d + "/h --conllu /dev/zero",
       "/dev/zero:1: line longer than 1048576 bytes"},
      {"train " + d + "/stats.yaml --out " + d + "/t --architecture-from /dev/zero",
       "/dev/zero: no architecture found"},
  };
  expect_errors(rows);
}

TEST(Surprises, UnknownCommandsFilesForFoldersMissingDataAndMissingSweepCommand) {
  TempDir dir;
  const fs::path ckpt = tiny_checkpoint(dir);
  const std::string c = ckpt.string();
  const std::string model = (ckpt / "model.pt").string();
  const std::string d = dir.path().string();
  std::ofstream(dir / "base.yaml") << "seed: 1\n";
  std::ofstream(dir / "s.yaml") << "configs: [" << d << "/base.yaml]\ngrid: {seed: [1]}\n";
  std::ofstream(dir / "in.txt") << "uno dos\n";
  const std::string missing = d + "/no-such-data";
  const std::vector<Row> rows = {
      {"no-such-command --help", "unknown command 'no-such-command'"},
      {"no-such-command", "unknown command 'no-such-command'"},
      {"-v no-such-command --help", "unknown command 'no-such-command'"},
      {"analyze no-such --help", "unknown command 'analyze no-such'"},
      {"bench nope", "unknown command 'bench nope'"},
      {"data nope --help", "unknown command 'data nope'"},
      {"config nope", "unknown command 'config nope'"},
      {"sweep " + d + "/s.yaml --out " + d + "/sw --dry-run", "s.yaml: 'command' is required"},
      {"translate --checkpoint " + model, model +
                                              " is a file; a checkpoint is a folder: pass its "
                                              "folder " +
                                              c},
      {"eval --checkpoint " + model, "pass its folder " + c},
      {"analyze heads --checkpoint " + model + " --out " + d + "/a", "pass its folder " + c},
      {"bench decode --checkpoint " + model, "pass its folder " + c},
      {"export-pruned --checkpoint " + model + " --out " + d + "/e", "pass its folder " + c},
      // A checkpoint given as a flag whose value is not checked by the CLI: the reader's message.
      {"train " + d + "/base.yaml --out " + d + "/t --init-from " + model,
       model + " is a file; a checkpoint is a folder: pass its folder " + c},
      {"prune " + d + "/base.yaml --out " + d + "/p --set prune.init_from=" + model,
       model + " is a file; a checkpoint is a folder"},
      // A flag that stands for a config key is named as the key's origin.
      {"prune " + d + "/base.yaml --out " + d + "/p --method fisher",
       "prune.method fisher (from --method) needs exactly one budget"},
      {"translate --checkpoint " + c + " -i " + d + "/in.txt -o " + d, d + " is a folder"},
      {"eval --checkpoint " + c + " --out " + d, d + " is a folder; expected a file name"},
      {"eval --checkpoint " + c + " --hyp-out " + d, d + " is a folder; expected a file name"},
      {"eval --checkpoint " + c + " --set data.dir=" + missing,
       "data.dir " + missing + " (the checkpoint's config) does not exist"},
      {"analyze heads --checkpoint " + c + " --out " + d + "/a --set data.dir=" + missing,
       "data.dir " + missing},
      {"bench decode --checkpoint " + c + " --set data.dir=" + missing, "data.dir " + missing},
  };
  expect_errors(rows);
  EXPECT_FALSE(fs::exists(missing)) << "a corpus was built for a checkpoint's missing data.dir";
}

TEST(Surprises, OutputsThatAreInputsGatedCheckpointsAndKeysACheckpointOwns) {
  TempDir dir;
  const fs::path ckpt = tiny_checkpoint(dir);
  const std::string c = ckpt.string();
  const std::string d = dir.path().string();
  std::ofstream(dir / "base.yaml") << "seed: 1\n";
  std::ofstream(dir / "in.txt") << "uno dos\n";
  std::ofstream(dir / "ref.txt") << "one two\n";
  fs::create_symlink(dir / "in.txt", dir / "link.txt");
  // A prune run's checkpoint in training: the model and its gates.
  const fs::path gated = dir / "gated";
  fs::copy(ckpt, gated, fs::copy_options::recursive);
  std::ofstream(gated / "gates.pt") << "x";
  const std::string in = d + "/in.txt", ref = d + "/ref.txt";
  const std::vector<Row> rows = {
      {"translate --checkpoint " + c + " -i " + in + " -o " + in,
       "--output " + in + " is the input"},
      {"translate --checkpoint " + c + " -i " + in + " -o " + d + "/link.txt", "is the input"},
      {"eval --checkpoint " + c + " --src " + in + " --ref " + ref + " --hyp-out " + ref,
       "--hyp-out " + ref + " is a reference file"},
      {"eval --checkpoint " + c + " --src " + in + " --ref " + ref + " --out " + in,
       "--out " + in + " is the source file"},
      {"eval --checkpoint " + c + " --src " + in + " --ref " + ref + " --out " + d +
           "/x --hyp-out " + d + "/x",
       "--out and --hyp-out are the same file"},
      {"eval --checkpoint " + c + " --ref " + ref, "--ref needs --src"},
      {"eval --checkpoint " + gated.string(), "is a checkpoint of a prune run in training"},
      {"translate --checkpoint " + gated.string() + " -i " + in, "export-pruned --checkpoint"},
      {"analyze heads --checkpoint " + gated.string() + " --out " + d + "/h", "gates.pt"},
      {"bench decode --checkpoint " + gated.string(), "gates.pt"},
      {"translate --checkpoint " + c + " -i " + in + " --set model.d_model=8",
       "--set model.d_model=8: the checkpoint's model.d_model says how its weights were made"},
      {"eval --checkpoint " + c + " --set vocab.size=100", "only decode.*, threads.*, data.*"},
      {"analyze heads --checkpoint " + c + " --out " + in, in + " exists and is not a folder"},
      {"train " + d + "/base.yaml --out " + in, in + " exists and is not a folder"},
      {"export-pruned --checkpoint " + gated.string() + " --out /dev/null",
       "/dev/null exists and is not a folder"},
      // The checkpoint a command reads is one of its inputs, file by file.
      {"eval --checkpoint " + c + " --hyp-out " + c + "/model.pt",
       "--hyp-out " + c + "/model.pt is inside the checkpoint"},
      {"translate --checkpoint " + c + " -i " + in + " -o " + c + "/meta.json",
       "is inside the checkpoint"},
      {"eval --checkpoint " + c + " --src " + in + " --ref " + ref + " --out " + d +
           "/./y --hyp-out " + d + "/y",
       "are the same file"},
      // Starting from a gated checkpoint would drop its gates.
      {"train " + d + "/base.yaml --out " + d + "/t2 --init-from " + gated.string(),
       "is a checkpoint of a prune run in training"},
      {"prune " + d + "/base.yaml --out " + d + "/p2 --set prune.init_from=" + gated.string(),
       "is a checkpoint of a prune run in training"},
      {"train " + d + "/base.yaml --out " + d + "/t3 --architecture-from " + gated.string(),
       "is a checkpoint of a prune run in training"},
      {"average-checkpoints " + c + " " + gated.string() + " --out " + d + "/av",
       "is a checkpoint of a prune run in training"},
      {"average-checkpoints " + c + " " + d + "/run/../run/checkpoints/last --out " + d + "/av",
       "is given twice"},
      {"average-checkpoints --out " + d + "/av", "either checkpoint folders or --run RUN --last K"},
      {"average-checkpoints " + c + " --run " + d + " --last 2 --out " + d + "/av",
       "either checkpoint folders or --run RUN --last K (got both)"},
      {"average-checkpoints --run " + d + " --out " + d + "/av", "--run requires --last"},
      {"average-checkpoints --run " + d + " --last 2 --out " + d + "/av",
       "keeps 0 step-N checkpoint(s)"},
      {"average-checkpoints " + c + "/model.pt --out " + d + "/av", "pass its folder " + c},
      {"average-checkpoints " + c + " --out " + in, in + " exists and is not a folder"},
      {"bench train " + d + "/base.yaml --profile " + d + "/base.yaml",
       "--profile " + d + "/base.yaml is a config file"},
      {"bench train --d-model 32 --heads 2 --layers 1 --ffn 64 --vocab 64 --sentences 2 "
       "--length 4 --steps 1 --warmup 0 --profile " +
           d + "/no-such-folder/trace.json",
       "the folder " + d + "/no-such-folder does not exist"},
      {"config show " + d + "/base.yaml --set prune.lambda_values=[1e30]",
       "prune.lambda_values: expected numbers between 0 and 1000000"},
      {"config show " + d + "/base.yaml --set prune.lambda_steps=[-5]",
       "prune.lambda_steps: expected whole numbers between 0 and"},
      // A run that fails before its first write leaves no folder behind.
      {"prune " + d + "/base.yaml --out " + d + "/p --set prune.init_from=" + d + "/nothing",
       "nothing"},
      {"train " + d + "/base.yaml --out " + d + "/t --init-from " + d + "/nothing", "nothing"},
  };
  expect_errors(rows);
  // Written output that a full device did not take (where the machine has /dev/full).
  if (fs::is_character_file("/dev/full")) {
    expect_errors({
        {"translate --checkpoint " + c + " -i " + in + " -o /dev/full", "/dev/full: write failed"},
        {"translate --checkpoint " + c + " -i " + in + " > /dev/full",
         "standard output: write failed"},
        {"bleu " + ref + " " + ref + " > /dev/full", "standard output: write failed"},
    });
    EXPECT_TRUE(fs::is_character_file("/dev/full")) << "/dev/full was replaced by a file";
  }
  EXPECT_EQ(io::read_lines(dir / "in.txt").at(0), "uno dos") << "an input was overwritten";
  EXPECT_FALSE(fs::exists(dir / "p")) << "a failed prune left its run folder";
  EXPECT_FALSE(fs::exists(dir / "t")) << "a failed train left its run folder";
  for (const char* f : {"t2", "t3", "p2"}) EXPECT_FALSE(fs::exists(dir / f)) << f;
  // A folder refused as a run folder is left as it was found (no lock file in it).
  fs::create_directories(dir / "mine");
  std::ofstream(dir / "mine" / "notes.txt") << "x\n";
  expect_errors({{"train " + d + "/base.yaml --out " + d + "/mine", "refusing to overwrite it"}});
  EXPECT_FALSE(fs::exists(dir / "mine" / ".lock"));
  // A head count that is not a whole number.
  std::ofstream(dir / "arch.json")
      << R"({"enc_self":[1.7],"dec_self":[1],"enc_dec":[1],"head_dim":8})";
  expect_errors(
      {{"train " + d + "/base.yaml --out " + d + "/t4 --architecture-from " + d + "/arch.json",
        d + "/arch.json: invalid architecture: 'enc_self' holds 1.7, expected whole"}});
  expect_errors({{"config show " + d + "/base.yaml --set train.adam_eps=0", "train.adam_eps"}});
}

}  // namespace
}  // namespace headcount
