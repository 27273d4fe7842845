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

// An error naming both when an output is one of `inputs` or another output (by any spelling of
// the path, or through a link); "-" (stdout or stdin) is never a file.
void refuse_overwriting(const std::vector<NamedPath>& outputs,
                        const std::vector<NamedPath>& inputs);
// An error when an output lies inside `folder` (a checkpoint the command reads): writing there
// would replace one of its files.
void refuse_writing_into(const std::vector<NamedPath>& outputs, const NamedPath& folder);

}  // namespace headcount::io
