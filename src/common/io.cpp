#include "headcount/common/io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "headcount/common/check.h"
#include "headcount/common/text.h"

namespace headcount::io {

std::string read_file(const fs::path& path) {
  std::error_code ec;
  HC_CHECK(fs::exists(path, ec), "{}: file not found", path.string());
  HC_CHECK(!fs::is_directory(path, ec), "{}: is a directory, expected a file", path.string());
  std::ifstream in(path, std::ios::binary);
  HC_CHECK(in.good(), "{}: cannot open for reading", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

std::vector<std::string> split_lines(const std::string& data, const std::string& name,
                                     const ReadOptions& options) {
  HC_CHECK(options.allow_empty_file || !data.empty(), "{}: file is empty", name);
  std::vector<std::string> lines;
  size_t start = 0;
  size_t line_no = 1;
  while (start < data.size()) {
    size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    std::string_view line(data.data() + start, end - start);
    if (options.strip_cr && !line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (const auto bad = text::find_invalid_utf8(line)) {
      HC_FAIL("{}:{}: invalid UTF-8 at byte {} of the line", name, line_no, *bad + 1);
    }
    HC_CHECK(line.find('\0') == std::string_view::npos, "{}:{}: NUL byte in a text file", name,
             line_no);
    lines.emplace_back(line);
    start = end + 1;
    ++line_no;
  }
  return lines;
}

}  // namespace

std::vector<std::string> read_lines(const fs::path& path, const ReadOptions& options) {
  return split_lines(read_file(path), path.string(), options);
}

std::vector<std::string> read_lines_or_stdin(const std::string& path, const ReadOptions& options) {
  if (path != "-") return read_lines(path, options);
  std::ostringstream ss;
  ss << std::cin.rdbuf();
  return split_lines(ss.str(), "<stdin>", options);
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path tmp = dir / fmt::format(".{}.tmp.{}", path.filename().string(), getpid());
  bool written = false;
  errno = 0;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    HC_CHECK(out.good(), "{}: cannot open for writing: {}", tmp.string(), std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    written = out.good();
  }
  if (!written) {
    const int err = errno;
    fs::remove(tmp, ec);  // a failed write leaves nothing behind, and the old file as it was
    HC_FAIL("{}: write failed: {}", path.string(),
            err != 0 ? std::strerror(err) : "disk full or file too large?");
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    HC_FAIL("{}: cannot rename into place: {}", path.string(), ec.message());
  }
}

void write_lines_atomic(const fs::path& path, const std::vector<std::string>& lines) {
  std::string content;
  size_t total = 0;
  for (const auto& l : lines) total += l.size() + 1;
  content.reserve(total);
  for (const auto& l : lines) {
    content += l;
    content += '\n';
  }
  write_file_atomic(path, content);
}

uint64_t fnv1a(const void* data, size_t size, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t hash_file(const fs::path& path, uint64_t seed) {
  const std::string data = read_file(path);
  return fnv1a(data.data(), data.size(), seed);
}

std::string hex64(uint64_t v) {
  return fmt::format("{:016x}", v);
}

}  // namespace headcount::io
