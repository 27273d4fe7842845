#include "headcount/common/outputs.h"

#include "headcount/common/check.h"

namespace headcount::io {

namespace fs = std::filesystem;

namespace {

bool given(const fs::path& p) {
  return !p.empty() && p != "-";
}

// The path with its links and "." / ".." resolved as far as it exists ("./x" and "x" agree).
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  const fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? p.lexically_normal() : r;
}

bool same_file(const fs::path& a, const fs::path& b) {
  if (!given(a) || !given(b)) return false;
  std::error_code ec;
  if (fs::equivalent(a, b, ec) && !ec) return true;
  return resolved(a) == resolved(b);
}

// Whether `p` lies inside the folder `dir` (by resolved paths).
bool inside(const fs::path& p, const fs::path& dir) {
  const fs::path rp = resolved(p), rd = resolved(dir);
  auto it = rp.begin();
  for (auto d = rd.begin(); d != rd.end(); ++d, ++it)
    if (it == rp.end() || *it != *d) return false;
  return it != rp.end();
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
      HC_CHECK(!same_file(out.path, other.path),
               "{} and {} are the same file ({}): give each its own", out.what, other.what,
               out.path.string());
    }
  }
}

void refuse_writing_into(const std::vector<NamedPath>& outputs, const NamedPath& folder) {
  if (!given(folder.path)) return;
  for (const auto& out : outputs) {
    if (!given(out.path)) continue;
    HC_CHECK(!inside(out.path, folder.path),
             "{} {} is inside {} ({}), which this command reads: refusing to write there; write "
             "the output elsewhere",
             out.what, out.path.string(), folder.what, folder.path.string());
  }
}

}  // namespace headcount::io
