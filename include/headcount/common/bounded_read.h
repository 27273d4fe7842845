// Reading with limits: a line or a file larger than a sentence or a config can be is an error
// found while reading, before it is held in memory, tokenised or padded into a batch.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace headcount::io {

namespace fs = std::filesystem;

// The longest line read as a sentence (translate and eval inputs, corpus files, bleu inputs).
// A sentence of the longest model.max_positions (100000 subwords) fits; a 1 MiB line is data
// without line breaks, not a sentence.
inline constexpr size_t kMaxSentenceBytes = size_t{1} << 20;
// The largest config or sweep file: hand-written YAML is a few KiB.
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;

struct BoundedLineOptions {
  size_t max_line_bytes = kMaxSentenceBytes;
  bool allow_empty_file = false;
  bool strip_cr = true;  // drop a trailing '\r' (files written on Windows)
};

// Lines of a text file ("-": standard input, named "<stdin>"), without '\n'. As io::read_lines,
// errors name the file and the line: missing or unreadable, empty (unless allowed), invalid
// UTF-8, a NUL byte; and a line longer than max_line_bytes, found as soon as it is read past.
std::vector<std::string> read_lines_bounded(const std::string& path,
                                            const BoundedLineOptions& options = {});

// The whole file, or an error naming it when it is larger than `max_bytes` (a device such as
// /dev/zero included: it is read up to the limit, never further). `what` names the expected
// content in the messages ("a YAML config file").
std::string read_file_bounded(const fs::path& path, size_t max_bytes, const std::string& what);

}  // namespace headcount::io
