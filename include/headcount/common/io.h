// File helpers: validated line reading, atomic writes, content hashing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace headcount::io {

namespace fs = std::filesystem;

struct ReadOptions {
  bool allow_empty_file = false;  // an empty (or missing-content) file is an error by default
  bool strip_cr = true;           // drop a trailing '\r' (files written on Windows)
};

// Reads a text file as lines (without '\n'). Errors name the file and the line: a missing or
// unreadable file, an empty file (unless allowed), invalid UTF-8, a NUL byte.
std::vector<std::string> read_lines(const fs::path& path, const ReadOptions& options = {});
std::string read_file(const fs::path& path);
// read_lines, with "-" meaning standard input (same checks, named "<stdin>").
std::vector<std::string> read_lines_or_stdin(const std::string& path,
                                             const ReadOptions& options = {});

// Writes `content` to `path` through a temporary file in the same folder and a rename, so a
// reader never sees a half-written file and an interrupted write leaves the old file intact.
void write_file_atomic(const fs::path& path, const std::string& content);
void write_lines_atomic(const fs::path& path, const std::vector<std::string>& lines);

// 64-bit FNV-1a, for cache keys (not for security).
uint64_t fnv1a(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ULL);
uint64_t hash_file(const fs::path& path, uint64_t seed = 0xcbf29ce484222325ULL);
std::string hex64(uint64_t v);

}  // namespace headcount::io
