// `headcount table`: tables of evaluated runs from their records (eval-SPLIT.json with the kept
// translations, summary.json), each row against named runs with paired bootstrap tests, printed or
// written into an experiment README's generated section. A table file (YAML):
//
//   splits: [dev, test]                       # optional (default dev, test)
//   runs:                                     # name: folder (relative to this file), or
//     control: ../voita-table-cpu/records/all-l0          #  {path: FOLDER, label: TEXT}
//     michel-72-1x: {path: records/michel-72-1x, label: Michel + fine-tuning}
//   tables:
//     - title: 72 heads, 1,200 steps
//       against: [control, michel-72-1x]      # runs each row is compared with (optional)
//       rows: [control, michel-72-1x]         # runs, in this order
//     - title: Variants against each other    # or a table of pairs, each run against its other
//       pairs: [[kd-fix-72-1x, recovery-72-1x]]
//     - title: Figures the text cites         # or single values read from records (JSON files,
//       figures:                              # or JSON lines: the last line that matches `where`;
//                                             # a file of figures alone needs no runs)
//         - {label: expected open heads at step 600, file: target-36/metrics.jsonl,
//            key: /expected_open, where: {event: eval, step: 600}, digits: 1}
//
// A run may name its files otherwise: {path: FOLDER, eval: PREFIX, summary: FILE}, where PREFIX
// (default "eval-{split}"; quoted in YAML) gives PREFIX.json and PREFIX.hyp.txt with {split}
// replaced, and FILE (default summary.json) is where it was trained; both relative to the run's
// folder. `scores: {all_refs: WEB+KJV}` adds a BLEU column per split for another score of the
// evaluations (a split's column only where a row of the table has that score); `columns: [{label:
// parameters, file: pruning.json, key: /parameters_after}]` a column of values from each run's own
// records (after the heads; "-" where a run has none); `verbose: [dev]` a column of each row's
// n-gram precisions and brevity penalty on those splits.
//
// A run may instead be the best of others, chosen on one split: {best_of: [lp0.6, lp1.0, lp1.4],
// on: dev, label: TEXT} takes, for every split, the evaluations of the member with the highest
// BLEU on `on` (default: the first split; the first member where two tie), so that models are
// compared each at a setting tuned on dev (a decoder's length penalty) and scored on test with it.
// Its cells name the member chosen; the members are runs of the file, not best-of runs themselves.
//
// A table over seeds gathers the runs of one setting trained with different seeds into a row:
//
//     - title: 72 heads over two seeds
//       against: [control]                   # rows of this table
//       seeds:                               # ROW: [the run of seed 1, of seed 2, ...]
//         control: [control, control-1x-s2]
//         michel: [michel-72-1x, michel-72-1x-s2]
//
// Each cell is the mean ± the sample standard deviation of the row's runs' BLEU; against a row it
// is the mean ± standard deviation of the paired differences (the i-th run of one row with the
// i-th of the other, or with the other's only run) and the two-sided p-value of a paired t test
// over the seeds. The rows' runs may be best-of runs.
//
// A table of goals checks each goal on the records:
//
//     - title: Where the goals stand
//       goals:
//         - goal: 72 heads within 0.5 dev BLEU of the control
//           runs: [l0-72, l0-72-s2]              # one per seed
//           against: [control, control-s2]       # the same seeds
//           split: dev
//           at_least: -0.5                       # or above: 0 (strictly)
//
// Its change is the mean ± standard deviation of the paired differences with the paired t test's
// p-value, as a seed table gives it, or with one run on each side their difference with the
// paired bootstrap p-value; the goal is met where the mean change reaches the bound.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace headcount::sweep {

namespace fs = std::filesystem;

struct TableSpec {
  struct Run {
    std::string name, label;
    fs::path path;                      // absolute
    std::string eval = "eval-{split}";  // the evaluations' files, relative to path, without .json
    std::string summary = "summary.json";
    std::vector<std::string> best_of;  // a best-of run: its members (path then unused)
    std::string on;                    // the split that chooses among them
  };
  // A value read from a record: `key` is a JSON pointer into `file` (JSON, or JSON lines: the last
  // line whose fields equal `where`'s), printed with `digits` decimals where it is a real number.
  struct Figure {
    std::string label, key;
    fs::path file;                                           // absolute
    std::vector<std::pair<std::string, std::string>> where;  // field, value as written
    int digits = 2;
  };
  // A goal (`goals: [{goal, runs, against, split, at_least | above}]`): the change of `runs` (a
  // run per seed) against `against` on `split`, met where its mean is at least (or above) `bound`.
  struct Goal {
    std::string text, split;
    std::vector<std::string> runs, against;
    double bound = 0;
    bool strict = false;  // `above`: the mean must exceed the bound
  };
  struct Table {
    std::string title;
    std::vector<std::string> against, rows;  // run names
    // A table of pairs instead (`pairs: [[RUN, OTHER], ...]`): each run against its other.
    std::vector<std::pair<std::string, std::string>> pairs;
    // A table of figures instead (`figures: [...]`).
    std::vector<Figure> figures;
    // A table over seeds instead (`seeds: {ROW: [RUN, ...]}`, a run per seed; `against` then
    // names rows of the table).
    std::vector<std::pair<std::string, std::vector<std::string>>> seeds;
    // A table of goals instead (`goals: [...]`).
    std::vector<Goal> goals;
  };
  fs::path file;
  std::vector<std::string> splits = {"dev", "test"};
  // Further BLEU columns (`scores: {NAME: LABEL}`): an evaluation's score NAME (ref2, all_refs).
  std::vector<std::pair<std::string, std::string>> scores;
  // Further columns of the rows' tables (`columns: [{label, file, key, where, digits}]`), each a
  // value of a file in the run's folder (`file` relative to it; "-" where a run has none).
  std::vector<Figure> columns;
  // Splits whose n-gram precisions and brevity penalty (the first reference's) get a column
  // (`verbose: [dev]`).
  std::vector<std::string> verbose;
  std::vector<Run> runs;  // in file order
  std::vector<Table> tables;
};

// Reads and checks a table file: errors name the file, line and key (unknown keys, a run named
// twice, rows or against naming no run, a run folder without its evaluations, a figure's file
// missing).
TableSpec load_table_spec(const fs::path& file);

// The tables in Markdown: per row its heads, BLEU and chrF per split, and per run of `against`
// the difference in BLEU with the paired bootstrap p-value (report.h's paired_bleu_p, from the
// kept translations and the reference file each evaluation recorded, relative paths from the
// current folder; the difference alone where a file is missing); then where each run was trained
// and decoded (commit, machine, LibTorch, precision, minutes). A figure that its file does not
// hold is an error naming the file, the key and the line it looked for.
std::string render_tables(const TableSpec& spec);

// The markers of `headcount table --readme`'s section (each alone on its line).
inline constexpr const char* kTableBegin =
    "<!-- begin: generated by headcount table --readme; do not edit -->";
inline constexpr const char* kTableEnd = "<!-- end: generated by headcount table -->";

}  // namespace headcount::sweep
