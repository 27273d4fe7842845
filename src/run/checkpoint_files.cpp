#include "headcount/run/checkpoint_files.h"

#include <fmt/format.h>

#include "headcount/common/check.h"

namespace headcount::run {

std::string checkpoint_folder_problem(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "";
  return fmt::format("{} is a file; a checkpoint is a folder: pass its folder {}", path.string(),
                     path.has_parent_path() ? path.parent_path().string() : std::string("."));
}

void require_ungated(const std::filesystem::path& dir, const std::string& what) {
  std::error_code ec;
  const CheckpointFolder ckpt{dir};
  HC_CHECK(!std::filesystem::exists(ckpt.gates(), ec),
           "{} is a checkpoint of a prune run in training: its heads are scaled by the gates in "
           "{}, which {} would leave out. Use the run's pruned/ folder (the model its gates "
           "chose), or write one for this step: headcount export-pruned --checkpoint {} --out DIR",
           dir.string(), CheckpointFolder::kGates, what, dir.string());
}

}  // namespace headcount::run
