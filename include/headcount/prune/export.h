// What a prune run's records turn into without any training: physically pruned checkpoints (from
// its gates, or without a given set of heads) and the head-removal log. The analyses use these
// without depending on the trainer.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "headcount/model/architecture.h"

namespace headcount::prune {

namespace fs = std::filesystem;

// Writes a physically pruned checkpoint of any checkpoint of a prune run (its gates.pt): the
// eval gates, or in target mode the top prune.target_heads heads. Returns the new architecture.
model::Architecture export_pruned(const fs::path& checkpoint, const fs::path& out);

// The step a prune run's checkpoint says its mask was fixed at (prune_state.json's
// "mask_fixed_at", written from the fixing step on), or -1: not fixed, or not a prune checkpoint.
int64_t mask_fixed_at(const fs::path& checkpoint);

// Writes a physically pruned copy of any checkpoint without the given heads (e.g. the least
// important ones by Michel et al.'s I_h), as a starting point for fine-tuning
// (`train --init-from`). Returns the new architecture.
model::Architecture export_without_heads(const fs::path& checkpoint,
                                         const std::vector<model::HeadId>& removed,
                                         const fs::path& out);

// The heads a prune run (L0 or Fisher) removed, read from its head_removal.csv: the rows with a
// removal step.
std::vector<model::HeadId> removed_heads_of(const fs::path& run_dir);

// Writes a physically pruned copy of an unpruned checkpoint of the model a prune run pruned (the
// same shape; e.g. its prune.init_from) without the heads that run removed: the run's mask on
// other weights, e.g. to fine-tune the unpruned model under it without gates.
model::Architecture export_with_mask_of(const fs::path& checkpoint, const fs::path& run_dir,
                                        const fs::path& out);

// Reads gates.jsonl and metrics.jsonl of a run and writes head_removal.csv (one row per gated
// head in the order heads were removed). Returns the rows as CSV text too.
std::string write_head_removal_log(const fs::path& run_dir);

}  // namespace headcount::prune
