#include "headcount/common/io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string_view>

#include "headcount/common/check.h"
#include "headcount/common/run_guard.h"
#include "headcount/common/text.h"

namespace headcount::io {

std::string read_file(const fs::path& path) {
  std::error_code ec;
  HC_CHECK(fs::exists(path, ec), "{}: file not found", path.string());
  HC_CHECK(!fs::is_directory(path, ec), "{}: is a directory, expected a file", path.string());
  // A regular file has a size; a pipe or a device (/dev/zero) may never end: read it once, with a
  // bound, so that the error names it instead of exhausting memory.
  if (!fs::is_regular_file(path, ec)) return read_file_bounded(path, kMaxStreamBytes, "a file");
  std::ifstream in(path, std::ios::binary);
  HC_CHECK(in.good(), "{}: cannot open for reading", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

void require_regular_file(const fs::path& path, const std::string& why) {
  std::error_code ec;
  HC_CHECK(fs::exists(path, ec), "{}: file not found", path.string());
  HC_CHECK(fs::is_regular_file(path, ec),
           "{}: not a regular file ({}): {}; write it to a file first", path.string(),
           fs::is_directory(path, ec) ? "a folder"
           : fs::is_fifo(path, ec)    ? "a pipe, such as <(...)"
                                      : "a device or socket",
           why);
}

// The most text read_lines holds (lines and their strings): far beyond any corpus a 2-core machine
// trains on, well before an endless stream exhausts memory.
constexpr size_t kMaxHeldTextBytes = size_t{4} << 30;

std::vector<std::string> read_lines(const fs::path& path, const ReadOptions& options) {
  // A file named "-" is read as such, not as standard input.
  return read_lines_or_stdin(path.string() == "-" ? "./-" : path.string(), options);
}

std::vector<std::string> read_lines_or_stdin(const std::string& path, const ReadOptions& options) {
  const std::string name = path == "-" ? "<stdin>" : path;
  const File in = open_input(path, name);
  std::vector<std::string> lines;
  std::string line;
  size_t line_no = 1;
  size_t held = 0;  // bytes of the lines read so far, with each string's own size
  bool any = false;
  auto finish_line = [&] {
    std::string_view view(line);
    if (options.strip_cr && !view.empty() && view.back() == '\r') view.remove_suffix(1);
    if (const auto bad = text::find_invalid_utf8(view)) {
      HC_FAIL("{}:{}: invalid UTF-8 at byte {} of the line", name, line_no, *bad + 1);
    }
    HC_CHECK(view.find('\0') == std::string_view::npos, "{}:{}: NUL byte in a text file", name,
             line_no);
    held += view.size() + sizeof(std::string);
    HC_CHECK(held <= kMaxHeldTextBytes,
             "{}:{}: more than {} GiB of text held in memory (an endless stream, such as the "
             "output of `yes`?); headcount reads its text inputs whole: split the file",
             name, line_no, kMaxHeldTextBytes >> 30);
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
               "{}:{}: line longer than {} bytes: expected lines of text", name, line_no,
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

namespace {

// An output that is not a regular file (a pipe such as >(...), a FIFO, /dev/stdout, a device) is
// written through, in place: a rename would put a regular file where its reader never looks.
void write_through(const fs::path& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  HC_CHECK(fd >= 0, "{}: cannot open for writing: {}", path.string(), std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      HC_FAIL("{}: write failed: {}", path.string(), std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  HC_CHECK(::close(fd) == 0, "{}: write failed: {}", path.string(), std::strerror(errno));
}

// Where writing `path` lands: through a symbolic link, the file it names (the link stays).
fs::path write_target(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(path, ec))) return path;
  const fs::path target = fs::weakly_canonical(path, ec);
  return ec ? path : target;
}

}  // namespace

void write_file_atomic(const fs::path& given, const std::string& content) {
  const fs::path path = write_target(given);
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (fs::exists(status) && !fs::is_regular_file(status) && !fs::is_directory(status)) {
    write_through(path, content);
    return;
  }
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  fs::create_directories(dir, ec);
  const fs::path tmp = dir / fmt::format(".{}.tmp.{}", path.filename().string(), getpid());
  // Nothing else removes what a killed writer of this file left, outside a run folder.
  remove_stale_temporaries(dir, path.filename().string());
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

namespace {

// XXH64's primes and steps, as in the reference implementation (xxhash.h).
constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}
// Little-endian loads (the format's byte order; x86 and ARM Linux are little-endian).
inline uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t xxh_round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  return rotl(acc, 31) * kP1;
}
inline uint64_t xxh_merge(uint64_t h, uint64_t acc) {
  h ^= xxh_round(0, acc);
  return h * kP1 + kP4;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed) : seed_(seed), acc_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1} {}

void Xxh64::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + size;
  total_ += size;
  const auto stripe = [this](const unsigned char* s) {
    for (int i = 0; i < 4; ++i) acc_[i] = xxh_round(acc_[i], load64(s + 8 * i));
  };
  if (buffered_ > 0) {
    const size_t take = std::min(size, sizeof(buffer_) - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    if (buffered_ < sizeof(buffer_)) return;
    stripe(buffer_);
    buffered_ = 0;
  }
  for (; end - p >= 32; p += 32) stripe(p);
  std::memcpy(buffer_, p, static_cast<size_t>(end - p));
  buffered_ = static_cast<size_t>(end - p);
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(acc_[0], 1) + rotl(acc_[1], 7) + rotl(acc_[2], 12) + rotl(acc_[3], 18);
    for (const uint64_t a : acc_) h = xxh_merge(h, a);
  } else {
    h = seed_ + kP5;
  }
  h += total_;
  // The last 0..31 bytes: 8, then 4, then 1 at a time.
  const unsigned char* p = buffer_;
  const unsigned char* const end = buffer_ + buffered_;
  for (; end - p >= 8; p += 8) h = rotl(h ^ xxh_round(0, load64(p)), 27) * kP1 + kP4;
  if (end - p >= 4) {
    h = rotl(h ^ (static_cast<uint64_t>(load32(p)) * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t xxh64(const void* data, size_t size, uint64_t seed) {
  Xxh64 h(seed);
  h.update(data, size);
  return h.digest();
}

uint64_t xxh64_file(const fs::path& path) {
  std::error_code ec;
  HC_CHECK(fs::is_regular_file(path, ec), "{}: file not found (expected a file)", path.string());
  std::ifstream in(path, std::ios::binary);
  HC_CHECK(in.good(), "{}: cannot open for reading", path.string());
  Xxh64 h;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    h.update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  HC_CHECK(in.eof(), "{}: read failed", path.string());
  return h.digest();
}

}  // namespace headcount::io
