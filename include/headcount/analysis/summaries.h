// What `analyze relevance`, `analyze align` and `analyze compare` print: each analysis's result as
// the few lines a reader takes in at a glance (the files hold the rest).
#pragma once

#include <string>

#include "headcount/analysis/align_report.h"
#include "headcount/analysis/compare.h"
#include "headcount/analysis/relevance_report.h"

namespace headcount::analysis {

// "all" for --sentences 0 (the whole split), the number otherwise: how the analyses' logs and
// summaries name the sentences they ran over.
std::string sentence_count(int sentences);

// Each text ends with a newline.
std::string relevance_summary(const RelevanceRecord& r, const std::string& split, double epsilon);
std::string align_summary(const AlignRecord& r);
std::string compare_summary(const CompareResult& r, const std::string& run, int sentences,
                            const std::string& split, int beam, const std::string& written);

}  // namespace headcount::analysis
