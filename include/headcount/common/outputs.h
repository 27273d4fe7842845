// Checks of a command's output paths against its inputs, before any work: an output that is an
// input (the same file by any path or link) would destroy that input when written.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace headcount::io {

struct NamedPath {
  std::string what;  // "--out", "the source file", ...
  std::filesystem::path path;
};

// An error naming both when an output is one of `inputs` or another output; "-" (stdout or stdin)
// and paths that do not exist yet are never the same file.
void refuse_overwriting(const std::vector<NamedPath>& outputs,
                        const std::vector<NamedPath>& inputs);

}  // namespace headcount::io
