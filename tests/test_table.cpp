// headcount table: tables of evaluated runs from their records.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>

#include "headcount/common/io.h"
#include "headcount/eval/record.h"
#include "headcount/sweep/reproduce.h"
#include "headcount/sweep/table.h"
#include "test_util.h"

namespace headcount {
namespace {

using testing::error_of;
using testing::TempDir;

// An evaluated run folder: eval-dev.json / eval-test.json with the given BLEU and chrF, the
// translations `hyps` (kept unless empty) and, optionally, a summary.json with provenance.
void write_run(const fs::path& dir, double bleu, double chrf, const std::vector<std::string>& hyps,
               const fs::path& ref, bool with_summary) {
  fs::create_directories(dir);
  for (const std::string split : {"dev", "test"}) {
    eval::EvalRecord r;
    r.data = split;
    r.sentences = hyps.size();
    r.beam = 4;
    r.precision = "bf16";
    r.heads_e_d_de = "1/2/3";
    r.ref_files = {ref.string()};
    eval::ReferenceScores s;
    s.name = "ref1";
    s.bleu = bleu;
    s.chrf = chrf;
    // A second reference and all of them together, listed first: the table takes ref1's.
    eval::ReferenceScores all = s;
    all.name = "all_refs";
    all.bleu = 99.0;
    all.chrf = 98.0;
    r.scores = {all, s};
    r.provenance = {
        {"commit", "abc1234"}, {"cpu", "Test CPU"}, {"cpu_flags", "avx2"}, {"libtorch", "1.13.0"}};
    if (!hyps.empty()) {
      std::string text;
      for (const auto& h : hyps) text += h + "\n";
      io::write_file_atomic(dir / fmt::format("eval-{}.hyp.txt", split), text);
    }
    eval::write_eval_record(dir / fmt::format("eval-{}.json", split), r);
  }
  if (with_summary)
    io::write_file_atomic(dir / "summary.json",
                          R"({"status": "finished", "steps": 1744, "train_seconds": 1500,
                              "provenance": {"commit": "abc1234", "cpu": "Test CPU",
                                             "cpu_flags": "avx2 avx512_bf16",
                                             "libtorch": "1.13.0"}})");
}

struct Fixture {
  TempDir dir;
  fs::path ref;
  Fixture() {
    std::vector<std::string> refs, worse;
    for (int i = 0; i < 40; ++i) {
      refs.push_back(
          fmt::format("the heads of layer {} attend to the word before the verb {}", i, i * 7));
      worse.push_back(fmt::format("heads layer {} attend word the verb", i));
    }
    ref = dir / "ref.en";
    std::string text;
    for (const auto& r : refs) text += r + "\n";
    io::write_file_atomic(ref, text);
    write_run(dir / "records" / "best", 40.5, 60.25, refs, ref, true);
    write_run(dir / "records" / "worse", 12.0, 30.0, worse, ref, false);
    write_run(dir / "records" / "same", 12.25, 30.5, worse, ref, false);
    write_run(dir / "records" / "nohyp", 11.0, 29.0, {}, ref, false);
  }
  fs::path spec(const std::string& text) const {
    io::write_file_atomic(dir / "table.yaml", text);
    return dir / "table.yaml";
  }
};

const char* kSpec = R"(runs:
  best: {path: records/best, label: the references}
  worse: records/worse
  same: records/same
  nohyp: records/nohyp
tables:
  - title: Four runs
    against: [worse]
    rows: [best, worse, same, nohyp]
)";

TEST(Table, RowsComeFromTheRecordsWithPairedTestsAgainstTheNamedRuns) {
  Fixture f;
  const auto spec = sweep::load_table_spec(f.spec(kSpec));
  const std::string md = sweep::render_tables(spec);
  EXPECT_NE(md.find("### Four runs"), std::string::npos) << md;
  EXPECT_NE(md.find("| run | heads e/d/de | dev BLEU | test BLEU | dev chrF | test chrF | vs "
                    "worse, dev | vs worse, test |"),
            std::string::npos)
      << md;
  // The references against the damaged translations: +28.50 BLEU, p = 1/1001 (no resample of
  // the centred differences reaches the observed one); the same translations as the compared
  // run: p = 1 (every centred difference is 0, as large as the observed 0); no translations
  // kept: the difference alone; the compared run's own cells empty.
  EXPECT_NE(md.find("| the references (best) | 1/2/3 | 40.50 | 40.50 | 60.25 | 60.25 | +28.50 "
                    "(p 0.001) | +28.50 (p 0.001) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| worse | 1/2/3 | 12.00 | 12.00 | 30.00 | 30.00 |  |  |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| same | 1/2/3 | 12.25 | 12.25 | 30.50 | 30.50 | +0.25 (p 1.000) | +0.25 "
                    "(p 1.000) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| nohyp | 1/2/3 | 11.00 | 11.00 | 29.00 | 29.00 | -1.00 | -1.00 |"),
            std::string::npos)
      << md;
  // Where: the summary's steps, minutes and where it trained; where the evaluation decoded (the
  // CPU flags tell a bf16 machine from an AVX2-only one).
  EXPECT_NE(md.find("| best | 1744 | 25.0 | commit abc1234, Test CPU (avx2 avx512_bf16), LibTorch "
                    "1.13.0 | commit abc1234, Test CPU (avx2), LibTorch 1.13.0 | bf16, beam 4 |"),
            std::string::npos)
      << md;
  EXPECT_NE(
      md.find("| worse | - | - | - | commit abc1234, Test CPU (avx2), LibTorch 1.13.0 | bf16, "
              "beam 4 |"),
      std::string::npos)
      << md;
}

TEST(Table, PairsCompareEachRunWithItsOther) {
  Fixture f;
  const auto spec = sweep::load_table_spec(
      f.spec("runs: {best: records/best, worse: records/worse, same: records/same}\n"
             "tables:\n  - title: Pairs\n    pairs: [[best, worse], [worse, same]]\n"));
  const std::string md = sweep::render_tables(spec);
  EXPECT_NE(md.find("| run | against | dev BLEU difference | test BLEU difference |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| best | worse | +28.50 (p 0.001) | +28.50 (p 0.001) |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| worse | same | -0.25 (p 1.000) | -0.25 (p 1.000) |"), std::string::npos)
      << md;
  const std::string e = error_of([&] {
    sweep::load_table_spec(
        f.spec("runs: {best: records/best}\ntables:\n  - {title: t, pairs: [[best]]}\n"));
  });
  EXPECT_NE(e.find("expected [RUN, OTHER]"), std::string::npos) << e;
  const std::string both = error_of([&] {
    sweep::load_table_spec(
        f.spec("runs: {best: records/best}\ntables:\n  - {title: t, rows: [best], pairs: [[best, "
               "best]]}\n"));
  });
  EXPECT_NE(both.find("one of them"), std::string::npos) << both;
}

TEST(Table, RunsMayNameTheirFilesAndFurtherScoresGetColumns) {
  Fixture f;
  // The evaluations and summary of a run under other names, as analyze compare writes them.
  const fs::path alt = f.dir / "records" / "best";
  for (const std::string split : {"dev", "test"}) {
    fs::rename(alt / fmt::format("eval-{}.json", split), alt / fmt::format("m-{}.json", split));
    fs::rename(alt / fmt::format("eval-{}.hyp.txt", split),
               alt / fmt::format("m-{}.hyp.txt", split));
  }
  fs::rename(alt / "summary.json", alt / "m-summary.json");
  const auto spec = sweep::load_table_spec(
      f.spec("scores: {all_refs: WEB+KJV}\nruns:\n  best: {path: records/best, eval: 'm-{split}', "
             "summary: m-summary.json}\n  worse: records/worse\ntables:\n  - {title: t, against: "
             "[worse], rows: [best, worse]}\n"));
  const std::string md = sweep::render_tables(spec);
  EXPECT_NE(md.find("| run | heads e/d/de | dev BLEU | test BLEU | dev BLEU (WEB+KJV) | test BLEU "
                    "(WEB+KJV) | dev chrF | test chrF | vs worse, dev | vs worse, test |"),
            std::string::npos)
      << md;
  // Its translations found beside its records (the p-value), the other score in its columns.
  EXPECT_NE(md.find("| best | 1/2/3 | 40.50 | 40.50 | 99.00 | 99.00 | 60.25 | 60.25 | +28.50 "
                    "(p 0.001) | +28.50 (p 0.001) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| best | 1744 | 25.0 |"), std::string::npos) << md;
  const std::string e = error_of([&] {
    sweep::load_table_spec(
        f.spec("runs:\n  best: {path: records/best, eval: m-dev}\ntables:\n  - "
               "{title: t, rows: [best]}\n"));
  });
  EXPECT_NE(e.find("runs: best: eval: expected a file name with {split}"), std::string::npos) << e;
}

TEST(Table, ColumnsReadEachRunsOwnRecords) {
  Fixture f;
  io::write_file_atomic(f.dir / "records" / "best" / "pruning.json",
                        R"({"parameters_after": 123, "seconds": {"pruning": 73.456}})");
  const auto spec = sweep::load_table_spec(
      f.spec("columns:\n  - {label: parameters, file: pruning.json, key: /parameters_after}\n"
             "  - {label: pruning s, file: pruning.json, key: /seconds/pruning, digits: 0}\n"
             "runs: {best: {path: records/best, label: the references}, worse: records/worse}\n"
             "tables:\n  - {title: t, rows: [best, worse]}\n"));
  const std::string md = sweep::render_tables(spec);
  EXPECT_NE(md.find("| run | heads e/d/de | parameters | pruning s | dev BLEU | test BLEU |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| the references (best) | 1/2/3 | 123 | 73 | 40.50 |"), std::string::npos)
      << md;
  // A run without the file: "-".
  EXPECT_NE(md.find("| worse | 1/2/3 | - | - | 12.00 |"), std::string::npos) << md;
  const std::string e = error_of([&] {
    sweep::load_table_spec(
        f.spec("columns: [{label: p, file: pruning.json}]\nruns: {best: "
               "records/best}\ntables:\n  - {title: t, rows: [best]}\n"));
  });
  EXPECT_NE(e.find("columns: p: key: expected a text"), std::string::npos) << e;
}

TEST(Table, VerboseColumnsGiveThePrecisionsAndBrevityPenalty) {
  Fixture f;
  const fs::path rec = f.dir / "records" / "best" / "eval-dev.json";
  auto r = *eval::read_eval_record(rec);
  for (auto& s : r.scores)
    if (s.name == "ref1")
      s.bleu_verbose =
          "66.1/41.1/27.4/19.1 (BP = 0.965 ratio = 0.966 hyp_len = 29174 ref_len = 30210)";
  eval::write_eval_record(rec, r);
  const std::string md = sweep::render_tables(sweep::load_table_spec(
      f.spec("verbose: [dev]\nruns: {best: records/best, worse: records/worse}\ntables:\n  - "
             "{title: t, rows: [best, worse]}\n")));
  EXPECT_NE(md.find("| dev chrF | test chrF | dev n-gram precisions, BP |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| 60.25 | 60.25 | 66.1/41.1/27.4/19.1, BP 0.965 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 30.00 | 30.00 | - |"), std::string::npos) << md;  // none recorded
  const std::string e = error_of([&] {
    sweep::load_table_spec(
        f.spec("verbose: [train]\nruns: {best: records/best}\ntables:\n  - {title: t, rows: "
               "[best]}\n"));
  });
  EXPECT_NE(e.find("verbose: 'train' is not one of the splits (dev, test)"), std::string::npos)
      << e;
}

TEST(Table, FiguresAreReadFromJsonAndTheLastMatchingJsonLine) {
  Fixture f;
  io::write_file_atomic(f.dir / "records" / "compare.json",
                        R"({"bleu": {"masked": 29.94321}, "method": "michel", "steps": 1200})");
  io::write_file_atomic(f.dir / "records" / "metrics.jsonl",
                        "{\"event\": \"eval\", \"step\": 600, \"open\": 108.027}\n"
                        "{\"event\": \"train\", \"step\": 600, \"open\": 1.0}\n"
                        "{\"event\": \"eval\", \"step\": 800, \"open\": 71.78}\n"
                        "{\"event\": \"eval\", \"step\": 600, \"open\": 108.5}\n");
  const std::string table =
      "runs: {worse: records/worse}\ntables:\n  - title: Cited\n    figures:\n"
      "      - {label: masked, file: records/compare.json, key: /bleu/masked}\n"
      "      - {label: method, file: records/compare.json, key: /method}\n"
      "      - {label: steps, file: records/compare.json, key: /steps}\n"
      "      - {label: open at 600, file: records/metrics.jsonl, key: /open, where: {event: eval, "
      "step: 600}, digits: 1}\n";
  const std::string md = sweep::render_tables(sweep::load_table_spec(f.spec(table)));
  EXPECT_NE(md.find("### Cited\n\n| figure | source | value |\n| --- | --- | ---: |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| masked | `records/compare.json` /bleu/masked | 29.94 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| method | `records/compare.json` /method | michel |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| steps | `records/compare.json` /steps | 1200 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("Where the runs ran"), std::string::npos) << md;  // figures alone: no runs
  // The last eval line of step 600, not the first nor the training line.
  EXPECT_NE(
      md.find("| open at 600 | `records/metrics.jsonl` /open (event eval, step 600) | 108.5 |"),
      std::string::npos)
      << md;
  // A file of figures alone needs no runs.
  EXPECT_NE(sweep::render_tables(
                sweep::load_table_spec(f.spec(
                    "tables:\n  - title: t\n    figures: [{label: m, file: records/compare.json, "
                    "key: /method}]\n")))
                .find("| m | `records/compare.json` /method | michel |"),
            std::string::npos);
  // A value the file does not hold is an error naming the file, the key and the line sought.
  std::string e = error_of([&] {
    sweep::render_tables(sweep::load_table_spec(f.spec(
        "runs: {worse: records/worse}\ntables:\n  - title: t\n    figures:\n      - {label: x, "
        "file: records/metrics.jsonl, key: /open, where: {step: 700}}\n")));
  });
  EXPECT_NE(e.find("metrics.jsonl has no /open in the last line with step 700"), std::string::npos)
      << e;
  e = error_of([&] {
    sweep::load_table_spec(
        f.spec("runs: {worse: records/worse}\ntables:\n  - title: t\n    "
               "figures: [{label: x, file: records/compare.json, key: bleu}]\n"));
  });
  EXPECT_NE(e.find("key: expected a JSON pointer"), std::string::npos) << e;
  e = error_of([&] {  // '~' must be followed by 0 or 1 in a JSON pointer
    sweep::load_table_spec(
        f.spec("runs: {worse: records/worse}\ntables:\n  - title: t\n    "
               "figures: [{label: x, file: records/compare.json, key: /a~2}]\n"));
  });
  EXPECT_NE(e.find("key: expected a JSON pointer (/field/sub), got '/a~2'"), std::string::npos)
      << e;
  e = error_of([&] {
    sweep::load_table_spec(
        f.spec("runs: {worse: records/worse}\ntables:\n  - title: t\n    "
               "figures: [{label: x, file: records/none.json, key: /a}]\n"));
  });
  EXPECT_NE(e.find("tables: figures: x: file: no "), std::string::npos) << e;
}

TEST(Table, ReadmeSectionIsReplacedBetweenItsMarkers) {
  Fixture f;
  const auto spec = sweep::load_table_spec(f.spec(kSpec));
  const std::string tables = sweep::render_tables(spec);
  const fs::path readme = f.dir / "README.md";
  io::write_file_atomic(readme, fmt::format("# Study\n\nprose\n\n{}\nold\n{}\n\nmore prose\n",
                                            sweep::kTableBegin, sweep::kTableEnd));
  sweep::replace_readme_section(readme, tables, sweep::kTableBegin, sweep::kTableEnd);
  EXPECT_EQ(io::read_file(readme), fmt::format("# Study\n\nprose\n\n{}\n\n{}\n{}\n\nmore prose\n",
                                               sweep::kTableBegin, tables, sweep::kTableEnd));
  // reproduce's markers are not table's.
  io::write_file_atomic(readme, fmt::format("{}\n{}\n", sweep::kReadmeBegin, sweep::kReadmeEnd));
  const std::string e = error_of(
      [&] { sweep::replace_readme_section(readme, tables, sweep::kTableBegin, sweep::kTableEnd); });
  EXPECT_NE(e.find(readme.string() + ": expected the line"), std::string::npos) << e;
  EXPECT_NE(e.find(sweep::kTableBegin), std::string::npos) << e;
}

TEST(Table, BestOfRunsTakeEveryScoreFromTheMemberBestOnTheChosenSplit) {
  Fixture f;
  // "same" is best on dev (50.00 against 40.50 and 12.00) but not on test (12.25): a best-of run
  // on dev takes its test score too; on test it takes "best"'s.
  const fs::path dev = f.dir / "records" / "same" / "eval-dev.json";
  auto r = *eval::read_eval_record(dev);
  for (auto& s : r.scores) s.bleu = s.name == "ref1" ? 50.0 : *s.bleu;
  eval::write_eval_record(dev, r);
  const auto spec = sweep::load_table_spec(
      f.spec("runs:\n  best: records/best\n  worse: records/worse\n  same: records/same\n"
             "  tuned: {best_of: [worse, best, same], label: tuned on dev}\n"
             "  by-test: {best_of: [worse, best, same], on: test}\n"
             "tables:\n  - {title: t, against: [worse], rows: [tuned, by-test]}\n"
             "  - {title: p, pairs: [[tuned, by-test]]}\n"));
  const std::string md = sweep::render_tables(spec);
  EXPECT_NE(md.find("| tuned on dev (tuned: same) | 1/2/3 | 50.00 | 12.25 | 30.50 | 30.50 | "
                    "+38.00 (p 1.000) | +0.25 (p 1.000) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| by-test: best | 1/2/3 | 40.50 | 40.50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| tuned: same | by-test: best | +9.50 (p 0.001) | -28.25 (p 0.001) |"),
            std::string::npos)
      << md;
  // The members' records are where the runs ran; a best-of run has no row there.
  EXPECT_NE(md.find("| same | - | - | - |"), std::string::npos) << md;
  EXPECT_EQ(md.find("| tuned | - |"), std::string::npos) << md;
  auto err = [&](const std::string& runs) {
    return error_of([&] {
      sweep::load_table_spec(f.spec("runs:\n  best: records/best\n" + runs +
                                    "tables:\n  - {title: t, rows: [best]}\n"));
    });
  };
  std::string e = err("  b: {best_of: [best, nope]}\n");
  EXPECT_NE(e.find("runs: b: best_of: 'nope' is not one of the file's runs"), std::string::npos)
      << e;
  e = err("  b: {best_of: [best]}\n  c: {best_of: [b]}\n");
  EXPECT_NE(e.find("runs: c: best_of: 'b' is not one of the file's runs with records"),
            std::string::npos)
      << e;
  e = err("  b: {best_of: [best], on: train}\n");
  EXPECT_NE(e.find("runs: b: on: 'train' is not one of the splits (dev, test)"), std::string::npos)
      << e;
  e = err("  b: {best_of: [best], path: records/best}\n");
  EXPECT_NE(e.find("runs: b: unknown key 'path'"), std::string::npos) << e;
}

TEST(Table, SeedTablesGiveTheMeanAndSpreadAndPairTheSeedsInOrder) {
  Fixture f;
  // Each fixture run scores the same on dev and test: best 40.5, worse 12.0, same 12.25, nohyp
  // 11.0. a = [best, worse]: mean 26.25, sd 28.5 / sqrt(2) = 20.15; b = [worse, nohyp]: 11.50 ±
  // 0.71. Against c = [same] (one run, paired with every seed): a's differences 28.25 and -0.25,
  // mean 14.00, sd 20.15, t = 14 / (20.15 / sqrt(2)) = 0.982 with 1 degree of freedom (Cauchy:
  // p = 1 - 2 atan(t) / pi = 0.506); b's -0.25 and -1.25: -0.75 ± 0.71, t = -1.5, p 0.374.
  const auto spec = sweep::load_table_spec(
      f.spec("runs:\n  best: records/best\n  worse: records/worse\n  same: records/same\n"
             "  nohyp: records/nohyp\n"
             "tables:\n  - title: seeds\n    against: [c]\n"
             "    seeds: {a: [best, worse], b: [worse, nohyp], c: [same]}\n"));
  const std::string md = sweep::render_tables(spec);
  EXPECT_NE(md.find("| setting | runs (one per seed) | heads e/d/de | dev BLEU | test BLEU | vs c, "
                    "dev | vs c, test |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| a | best, worse | 1/2/3 | 26.25 ± 20.15 | 26.25 ± 20.15 | +14.00 ± 20.15 "
                    "(p 0.506) | +14.00 ± 20.15 (p 0.506) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| b | worse, nohyp | 1/2/3 | 11.50 ± 0.71 | 11.50 ± 0.71 | -0.75 ± 0.71 "
                    "(p 0.374) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| c | same | 1/2/3 | 12.25 | 12.25 |  |  |"), std::string::npos) << md;
  EXPECT_NE(md.find("| nohyp | - | - | - |"), std::string::npos) << md;  // where it ran

  // Rows of different sizes. Against a = [best, worse]: e = [same] is paired with each of a's
  // seeds (12.25 - 40.5 = -28.25, 12.25 - 12.0 = 0.25: -14.00 ± 20.15, p 0.506 as above); g =
  // [best, best, worse] over the first two seeds only (0 and 28.5: mean 14.25, sd 28.5 / sqrt(2)
  // = 20.15, t = 14.25 / (20.15 / sqrt(2)) = 1, p = 1 - 2 atan(1) / pi = 0.500).
  const std::string uneven = sweep::render_tables(sweep::load_table_spec(
      f.spec("runs:\n  best: records/best\n  worse: records/worse\n  same: records/same\n"
             "tables:\n  - title: uneven\n    against: [a]\n"
             "    seeds: {a: [best, worse], e: [same], g: [best, best, worse]}\n")));
  EXPECT_NE(uneven.find("| e | same | 1/2/3 | 12.25 | 12.25 | -14.00 ± 20.15 (p 0.506) | "
                        "-14.00 ± 20.15 (p 0.506) |"),
            std::string::npos)
      << uneven;
  EXPECT_NE(uneven.find("| g | best, best, worse | 1/2/3 | 31.00 ± 16.45 | 31.00 ± 16.45 | +14.25 "
                        "± 20.15 (p 0.500) (first 2 seeds) |"),
            std::string::npos)
      << uneven;
  auto err = [&](const std::string& table) {
    return error_of([&] {
      sweep::load_table_spec(
          f.spec("runs:\n  best: records/best\n  worse: records/worse\n"
                 "tables:\n  - title: s\n" +
                 table));
    });
  };
  std::string e = err("    against: [best]\n    seeds: {a: [best, worse]}\n");
  EXPECT_NE(e.find("tables: s: against: 'best' is not one of the table's rows"), std::string::npos)
      << e;
  e = err("    seeds: {a: [best, nope]}\n");
  EXPECT_NE(e.find("tables: s: seeds: a: 'nope' is not one of the file's runs"), std::string::npos)
      << e;
  e = err("    seeds: [best, worse]\n");
  EXPECT_NE(e.find("tables: s: seeds: expected a map of rows"), std::string::npos) << e;
  e = err("    seeds: {a: [best]}\n    rows: [best]\n");
  EXPECT_NE(e.find("seeds (a map of rows to their runs, one per seed) or goals (a list of goals "
                   "checked on the runs), one of them"),
            std::string::npos)
      << e;
}

TEST(Table, GoalTablesJudgeTheMeanPairedChangeAgainstTheBound) {
  Fixture f;
  // Each fixture run scores the same on dev and test: best 40.5, worse 12.0, same 12.25, nohyp
  // 11.0. One run on each side: worse - nohyp = +1.00 (nohyp kept no translations: no p-value),
  // which meets "at least 1" and not "above 1"; best - worse = +28.50 with a bootstrap p-value.
  // Seeds: [best, worse] - [same] = 28.25 and -0.25 (+14.00 ± 20.15, p 0.506, as the seed table's
  // test derives); [same, same] - [worse, nohyp] = 0.25 and 1.25: mean 0.75, sd 0.71, t = 0.75 /
  // (0.7071 / sqrt(2)) = 1.5 with 1 degree of freedom, p = 1 - 2 atan(1.5) / pi = 0.374.
  const std::string md = sweep::render_tables(sweep::load_table_spec(f.spec(
      "runs:\n  best: records/best\n  worse: records/worse\n  same: records/same\n"
      "  nohyp: records/nohyp\n"
      "tables:\n  - title: goals\n    goals:\n"
      "      - {goal: g1, runs: [worse], against: [nohyp], split: dev, at_least: 1}\n"
      "      - {goal: g2, runs: [worse], against: [nohyp], split: test, above: 1.0}\n"
      "      - {goal: g3, runs: [best], against: [worse], split: dev, at_least: -0.5}\n"
      "      - {goal: g4, runs: [best, worse], against: [same], split: test, at_least: 14}\n"
      "      - {goal: g5, runs: [same, same], against: [worse, nohyp], split: dev, above: 0.75}\n"
      "      - {goal: g6, runs: [same, same], against: [worse, nohyp], split: dev, above: 0}\n")));
  EXPECT_NE(md.find("| goal | runs | against | split | change | needed | met |\n| --- | --- | --- "
                    "| --- | ---: | ---: | ---: |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| g1 | worse | nohyp | dev | +1.00 | ≥ +1.00 | yes |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| g2 | worse | nohyp | test | +1.00 | > +1.00 | no |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| g3 | best | worse | dev | +28.50 (p "), std::string::npos) << md;
  EXPECT_NE(md.find(") | ≥ -0.50 | yes |"), std::string::npos) << md;
  EXPECT_NE(md.find("| g4 | best, worse | same | test | +14.00 ± 20.15 (p 0.506), 2 pairs | ≥ "
                    "+14.00 | yes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| g5 | same, same | worse, nohyp | dev | +0.75 ± 0.71 (p 0.374), 2 pairs | "
                    "> +0.75 | no |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| g6 | same, same | worse, nohyp | dev | +0.75 ± 0.71 (p 0.374), 2 pairs | "
                    "> +0.00 | yes |"),
            std::string::npos)
      << md;

  auto err = [&](const std::string& goal) {
    return error_of([&] {
      sweep::load_table_spec(
          f.spec("runs:\n  best: records/best\n  worse: records/worse\n"
                 "tables:\n  - title: s\n    goals:\n      - " +
                 goal + "\n"));
    });
  };
  std::string e = err("{goal: a, runs: [best], against: [worse], split: dev}");
  EXPECT_NE(e.find("tables: s: goals: a: expected at_least"), std::string::npos) << e;
  e = err("{goal: a, runs: [best], against: [worse], split: dev, at_least: 0, above: 0}");
  EXPECT_NE(e.find("or above (it must exceed it), one of them"), std::string::npos) << e;
  e = err("{goal: a, runs: [best], against: [worse], split: dev, at_least: half}");
  EXPECT_NE(e.find("tables: s: goals: a: at_least: expected a number of BLEU points (-0.5), got "
                   "'half'"),
            std::string::npos)
      << e;
  e = err("{goal: a, runs: [best], against: [worse], split: train, at_least: 0}");
  EXPECT_NE(e.find("tables: s: goals: a: split: 'train' is not one of the splits (dev, test)"),
            std::string::npos)
      << e;
  e = err("{goal: a, runs: [best, nope], against: [worse], split: dev, at_least: 0}");
  EXPECT_NE(e.find("tables: s: goals: a: runs: 'nope' is not one of the file's runs"),
            std::string::npos)
      << e;
  e = err("{goal: a, runs: [best], split: dev, at_least: 0}");
  EXPECT_NE(e.find("tables: s: goals: a: expected against"), std::string::npos) << e;
  e = err("{goal: a, runs: [best], against: [worse], split: dev, at_least: 0, by: 1}");
  EXPECT_NE(e.find("unknown key 'by'"), std::string::npos) << e;
  e = error_of([&] {
    sweep::load_table_spec(
        f.spec("runs:\n  best: records/best\n  worse: records/worse\n"
               "tables:\n  - title: s\n    against: [worse]\n    goals:\n"
               "      - {goal: a, runs: [best], against: [worse], split: dev, at_least: 0}\n"));
  });
  EXPECT_NE(e.find("tables: s: against: a table of goals names them in each goal"),
            std::string::npos)
      << e;
}

TEST(Table, MalformedFilesAreClearErrors) {
  Fixture f;
  auto err = [&](const std::string& text) {
    return error_of([&] { sweep::load_table_spec(f.spec(text)); });
  };
  const std::string file = (f.dir / "table.yaml").string();
  std::string e = err("runs: {a: records/best}\ntables:\n  - {title: t, rows: [a, b]}\n");
  EXPECT_NE(e.find(file + ":3"), std::string::npos) << e;
  EXPECT_NE(e.find("'b' is not one of the file's runs"), std::string::npos) << e;
  e = err("runs: {a: records/best}\ntables:\n  - {title: t, rows: [a], colour: red}\n");
  EXPECT_NE(e.find("unknown key 'colour'"), std::string::npos) << e;
  e = err("runs: {a: records/missing}\ntables:\n  - {title: t, rows: [a]}\n");
  EXPECT_NE(e.find("runs: a: no "), std::string::npos) << e;
  EXPECT_NE(e.find("eval-dev.json"), std::string::npos) << e;
  e = err("runs: {a: records/best}\ntables:\n  - {title: t, against: [z], rows: [a]}\n");
  EXPECT_NE(e.find("tables: against: 'z' is not one of the file's runs"), std::string::npos) << e;
  e = err("runs: {a: {path: records/best, colour: red}}\ntables:\n  - {title: t, rows: [a]}\n");
  EXPECT_NE(e.find("runs: a: unknown key 'colour'"), std::string::npos) << e;
  e = err("runs: {a: records/best}\n");
  EXPECT_NE(e.find("tables: expected a list of tables"), std::string::npos) << e;
  e = err("runs: {a: records/best}\ntables:\n  - {title: t}\n");
  EXPECT_NE(e.find("expected rows"), std::string::npos) << e;
  e = err("runs: {a: records/best, a: records/worse}\ntables:\n  - {title: t, rows: [a]}\n");
  EXPECT_NE(e.find(file), std::string::npos) << e;
}

}  // namespace
}  // namespace headcount
