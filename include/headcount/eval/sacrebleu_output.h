// The outputs of sacreBLEU 2.x's command line, byte for byte: the score line, --score-only,
// --format json (per corpus, or one compact line per sentence) and the paired tests' report.
#pragma once

#include <string>

#include "headcount/eval/bleu.h"
#include "headcount/eval/chrf.h"
#include "headcount/eval/significance.h"

namespace headcount::eval {

struct OutputStyle {
  int width = 2;            // decimals of the scores (--width)
  bool json = false;        // --format json
  bool score_only = false;  // --score-only: the number alone
  bool compact = false;     // json on one line (per sentence)
};

std::string format_bleu(const BleuScore& score, const std::string& signature,
                        const OutputStyle& style);
// `name`: the metric's name with its beta ("chrF2", "chrF2++").
std::string format_chrf(const ChrfScore& score, const std::string& name,
                        const std::string& signature, const OutputStyle& style);
// The paired test of the system file against the baseline file (both named in the report),
// without a final newline; several lines unless json or score_only.
std::string format_paired(const PairedComparison& comparison, const std::string& baseline_file,
                          const std::string& system_file, const OutputStyle& style);

}  // namespace headcount::eval
