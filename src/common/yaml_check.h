// Checks on parsed YAML that yaml-cpp does not make.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace headcount {

// A mapping (at any depth under `node`) that gives one key twice is an error naming
// "origin:line" of both: yaml-cpp keeps both entries and a reader would take one silently.
void check_unique_keys(const YAML::Node& node, const std::string& origin);

// `text` parsed, its keys checked as above; a syntax error names "origin:line:column".
YAML::Node parse_yaml(const std::string& text, const std::string& origin);

}  // namespace headcount
