#include "headcount/common/outputs.h"

#include "headcount/common/check.h"

namespace headcount::io {

namespace {

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (a.empty() || b.empty() || a == "-" || b == "-") return false;
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

}  // namespace

void refuse_overwriting(const std::vector<NamedPath>& outputs,
                        const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& out = outputs[i];
    for (const auto& in : inputs) {
      HC_CHECK(!same_file(out.path, in.path),
               "{} {} is {} ({}): refusing to overwrite an input; write the output elsewhere",
               out.what, out.path.string(), in.what, in.path.string());
    }
    for (size_t k = i + 1; k < outputs.size(); ++k) {
      const auto& other = outputs[k];
      // Two outputs to one path: the second would replace the first (the file may not exist yet).
      const bool same = !out.path.empty() && out.path != "-" &&
                        (out.path == other.path || same_file(out.path, other.path));
      HC_CHECK(!same, "{} and {} are the same file ({}): give each its own", out.what, other.what,
               out.path.string());
    }
  }
}

}  // namespace headcount::io
