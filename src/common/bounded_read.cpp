#include "headcount/common/bounded_read.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "headcount/common/check.h"
#include "headcount/common/text.h"

namespace headcount::io {
namespace {

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

int close_nothing(FILE*) {
  return 0;
}

// `path` opened for reading, or stdin for "-" (not closed at the end).
File open_input(const std::string& path, const std::string& name) {
  if (path == "-") return File(stdin, close_nothing);
  std::error_code ec;
  HC_CHECK(fs::exists(path, ec), "{}: file not found", name);
  HC_CHECK(!fs::is_directory(path, ec), "{}: is a folder, expected a file", name);
  errno = 0;
  FILE* f = std::fopen(path.c_str(), "rb");
  HC_CHECK(f != nullptr, "{}: cannot open for reading: {}", name, std::strerror(errno));
  return File(f, std::fclose);
}

}  // namespace

std::vector<std::string> read_lines_bounded(const std::string& path,
                                            const BoundedLineOptions& options) {
  const std::string name = path == "-" ? "<stdin>" : path;
  const File in = open_input(path, name);
  std::vector<std::string> lines;
  std::string line;
  size_t line_no = 1;
  bool any = false;
  auto finish_line = [&] {
    std::string_view view(line);
    if (options.strip_cr && !view.empty() && view.back() == '\r') view.remove_suffix(1);
    if (const auto bad = text::find_invalid_utf8(view)) {
      HC_FAIL("{}:{}: invalid UTF-8 at byte {} of the line", name, line_no, *bad + 1);
    }
    HC_CHECK(view.find('\0') == std::string_view::npos, "{}:{}: NUL byte in a text file", name,
             line_no);
    lines.emplace_back(view);
    line.clear();
    ++line_no;
  };
  // One bounded chunk at a time: an overlong line stops the read at max_line_bytes + chunk, so
  // neither a huge line nor a stream without line breaks (/dev/zero) is ever held whole.
  std::vector<char> buf(64 * 1024);
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), in.get());
    if (n == 0) {
      HC_CHECK(!std::ferror(in.get()), "{}: read error: {}", name, std::strerror(errno));
      break;
    }
    any = true;
    size_t start = 0;
    while (start < n) {
      const void* nl = std::memchr(buf.data() + start, '\n', n - start);
      const size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buf.data()) : n;
      line.append(buf.data() + start, end - start);
      HC_CHECK(line.size() <= options.max_line_bytes,
               "{}:{}: line longer than {} bytes: expected one sentence a line", name, line_no,
               options.max_line_bytes);
      if (!nl) break;
      finish_line();
      start = end + 1;
    }
  }
  if (!line.empty()) finish_line();
  HC_CHECK(options.allow_empty_file || any, "{}: file is empty", name);
  return lines;
}

std::string read_file_bounded(const fs::path& path, size_t max_bytes, const std::string& what) {
  const File in = open_input(path.string(), path.string());
  std::string out;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), in.get());
    if (n == 0) {
      HC_CHECK(!std::ferror(in.get()), "{}: read error: {}", path.string(), std::strerror(errno));
      break;
    }
    out.append(buf.data(), n);
    HC_CHECK(out.size() <= max_bytes, "{}: larger than {} bytes: expected {}", path.string(),
             max_bytes, what);
  }
  return out;
}

}  // namespace headcount::io
