// The YAML helpers sweep files and experiment files share (src/sweep/sweep.cpp).
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "headcount/sweep/sweep.h"

namespace headcount::sweep::detail {

// "FILE:LINE" of a node, for errors.
std::string where(const fs::path& file, const YAML::Node& node);
// A value as YAML text that `--set key=TEXT` parses back to the same value.
std::string yaml_text(const YAML::Node& node);
// A value as it appears in a run name: sequences joined with '+', unsafe characters replaced.
std::string name_text(const std::string& yaml_value);
// A file name or a list of them (`key` names it in errors).
std::vector<std::string> string_list(const YAML::Node& node, const fs::path& file,
                                     const std::string& key);
// Appends the sweep's thread settings for a child run (threads.intra_op=-1, threads.blas=N) unless
// `a` or `b` set threads.* themselves (the user decides) or `threads_blas` is 0.
void add_threads(std::vector<std::string>& args, const Assignments& a, const Assignments& b,
                 int threads_blas);
// A sweep or experiment file's YAML ("sweep file", "experiment file"), checked: it exists, parses,
// has no key twice and is a map (else "FILE: expected EXPECTED").
YAML::Node read_yaml_file(const fs::path& file, const std::string& what,
                          const std::string& expected);
// A map whose keys are all in `allowed` (else "FILE:LINE: WHAT: unknown key 'K' (expected one of:
// ...)"); a node that is not a map: "FILE:LINE: WHAT: expected a map".
void check_keys(const YAML::Node& node, const fs::path& file, const std::string& what,
                const std::set<std::string>& allowed);
// A map of config keys to values ({} for a missing node).
Assignments assignments(const YAML::Node& node, const fs::path& file, const std::string& key);

}  // namespace headcount::sweep::detail
