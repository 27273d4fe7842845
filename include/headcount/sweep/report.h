// `headcount report DIR`: one table of a sweep's runs against the baseline and against each run's
// zero-pruning control (results.csv, results.md) and its plots (BLEU against heads kept; per run, a
// layer x head grid per attention type coloured by when each head was removed). Works on a partial
// sweep, marking what is missing.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace headcount::sweep {

namespace fs = std::filesystem;

// The paired bootstrap p-value (1,000 resamples, sacreBLEU's seed) of the BLEU of `system`'s
// translations against `baseline`'s, files of the same segments line by line, scored against
// `reference`: the figure of `headcount bleu SYSTEM REFERENCE --paired-bs BASELINE`. nullopt,
// with a warning naming the files, where one cannot be read or their line counts differ.
std::optional<double> paired_bleu_p(const fs::path& system, const fs::path& baseline,
                                    const fs::path& reference);

struct ReportOptions {
  fs::path dir;  // the sweep's --out folder (holds sweep.json)
  // The sweep file, for a folder without sweep.json: its runs' committed records (run folders
  // without checkpoints, whose recorded eval-SPLIT.json evaluations stand).
  fs::path sweep_file;
  fs::path executable;  // headcount, for --split evaluations
  // Empty: dev BLEU as the runs logged it (eval subset and beam of their configs);
  // {"dev"}, {"test"}, {"dev", "test"}, ...: evaluate every checkpoint on each split with its
  // decode.* settings (cached in the run folder as eval-SPLIT.json). The LAST split listed is the
  // primary one (ReportRow::bleu, the change columns and the plot); the analysis uses the first.
  std::vector<std::string> splits;
  bool plots = true;
  // > 0: also analyse every finished prune run on this many sentences of the split (`headcount
  // analyze heads` on its pruned checkpoint, `analyze compare` against its init_from; cached in
  // RUN/analysis/, RUN/analysis-test/ for the test split): the functions of the kept heads, and L0
  // against importance pruning.
  int analysis_sentences = 0;
  // Dependency parses (CoNLL-U) of the split's source sentences: syntactic heads in the analysis.
  fs::path conllu;
};

// One checkpoint's scores on one split (`headcount eval`): against the split's first reference and,
// when the split has several, against all of them together.
struct SplitScores {
  std::optional<double> bleu, bleu_all_refs, chrf, chrf_all_refs, sentences_per_s;
  // Where it was decoded (provenance::describe and the precision); "" where not recorded.
  std::string decoded_on;
  // The translations (RUN/eval-SPLIT.hyp.txt, when the evaluation wrote them) and the first
  // reference they were scored against (the evaluation's ref_files): what a paired test needs.
  fs::path hyp_file, ref_file;
};

struct ReportRow {
  std::string name;  // "baseline" or the run's name
  std::string state;
  bool is_control = false;  // a zero-pruning control (prune.lambda 0) of the sweep
  std::string control;      // the name of this run's control ("" : none)
  std::vector<std::pair<std::string, std::string>> values;
  std::optional<std::vector<int64_t>> heads;  // kept per type: enc_self, dec_self, enc_dec
  std::optional<int64_t> parameters;
  // The primary figures: the logged dev BLEU, or the last split's (first reference).
  std::optional<double> bleu, bleu_scratch, chrf, delta, sentences_per_s;
  std::string decoded_on;               // of the primary split's evaluation ("" : not recorded)
  std::optional<double> delta_control;  // BLEU minus its control's BLEU
  // The paired bootstrap p-value of that difference (1,000 resamples of the primary split's
  // segments, `headcount bleu --paired-bs`), where both translations are recorded.
  std::optional<double> p_control;
  // The same against the baseline (the change in `delta`).
  std::optional<double> p_baseline;
  std::string scratch_state;
  // Per split evaluated (ReportOptions::splits): the run's checkpoint and its from-scratch
  // retraining.
  std::map<std::string, SplitScores> scores, scratch_scores;
};

struct Report {
  std::vector<std::string> axes;
  std::vector<ReportRow> rows;      // the baseline first when the sweep names one
  std::vector<std::string> splits;  // evaluated, in the order listed (empty: logged dev BLEU)
  std::string bleu_label;           // what the BLEU column is
  std::string markdown;
  std::string analysis_markdown;  // with analysis_sentences > 0
  std::vector<fs::path> plots;
};

// Reads the sweep folder and writes results.csv, results.md and plots/ into it.
Report write_report(const ReportOptions& options);

// "12/40/31" from heads kept per type.
std::string heads_summary(const std::vector<int64_t>& heads);

}  // namespace headcount::sweep
