// File helpers: validated line reading, atomic writes, content hashing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace headcount::io {

namespace fs = std::filesystem;

// The longest line read as text (sentences, records, links): a sentence of the longest
// model.max_positions (100000 subwords) fits; a 1 MiB line is data without line breaks.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;
// The largest config or sweep file: hand-written YAML is a few KiB.
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;
// The most read_file takes from a pipe or a device, which has no size to check first.
inline constexpr size_t kMaxStreamBytes = size_t{256} << 20;

struct ReadOptions {
  bool allow_empty_file = false;  // an empty (or missing-content) file is an error by default
  bool strip_cr = true;           // drop a trailing '\r' (files written on Windows)
  size_t max_line_bytes = kMaxLineBytes;
};

// Reads a text file as lines (without '\n'), one bounded chunk at a time, so that neither a huge
// line nor a stream without line breaks (/dev/zero) is ever held whole. Errors name the file and
// the line: a missing or unreadable file, an empty file (unless allowed), invalid UTF-8, a NUL
// byte, a line longer than max_line_bytes (found as soon as it is read past). A pipe is read once.
std::vector<std::string> read_lines(const fs::path& path, const ReadOptions& options = {});
// The whole file; from a pipe or device at most kMaxStreamBytes (an error naming it beyond).
std::string read_file(const fs::path& path);
// read_lines, with "-" meaning standard input (same checks, named "<stdin>").
std::vector<std::string> read_lines_or_stdin(const std::string& path,
                                             const ReadOptions& options = {});
// The whole file, or an error naming it when it is larger than `max_bytes` (a device such as
// /dev/zero included: it is read up to the limit, never further). `what` names the expected
// content in the messages ("a YAML config file").
std::string read_file_bounded(const fs::path& path, size_t max_bytes, const std::string& what);
// Refuses what is not a regular file (a pipe such as <(head ...), a device, a folder), naming it
// and `why` it must be a file: for an input that is read more than once.
void require_regular_file(const fs::path& path, const std::string& why);

// Writes `content` to `path` through a temporary file in the same folder and a rename, so a
// reader never sees a half-written file and an interrupted write leaves the old file intact.
// Temporaries of `path` that a killed process left (.NAME.tmp.PID, PID gone) are removed first.
void write_file_atomic(const fs::path& path, const std::string& content);
void write_lines_atomic(const fs::path& path, const std::vector<std::string>& lines);

// 64-bit FNV-1a, for cache keys (not for security).
uint64_t fnv1a(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ULL);
uint64_t hash_file(const fs::path& path, uint64_t seed = 0xcbf29ce484222325ULL);
std::string hex64(uint64_t v);

// XXH64 (Yann Collet's xxHash, 64-bit; the value `xxhsum -H1` prints), for content checks of large
// files: about 5 GB/s against FNV-1a's 0.6 GB/s here (10 ms against 90 ms for a 52 MB model.pt).
// Detects damage, not tampering. Fed in pieces of any size, it gives the one-shot value.
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  uint64_t seed_;
  uint64_t acc_[4];
  uint64_t total_ = 0;
  unsigned char buffer_[32];  // a stripe not yet complete
  size_t buffered_ = 0;
};
uint64_t xxh64(const void* data, size_t size, uint64_t seed = 0);
// XXH64 of a file's content, read in pieces.
uint64_t xxh64_file(const fs::path& path);

}  // namespace headcount::io
