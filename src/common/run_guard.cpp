#include "headcount/common/run_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include "headcount/common/check.h"
#include "headcount/common/io.h"

namespace headcount::io {

namespace {

constexpr const char* kLockFile = ".lock";

// "PID what" from a lock file; nullopt when unreadable.
std::optional<std::pair<pid_t, std::string>> read_holder(const fs::path& file) {
  std::ifstream in(file);
  long pid = 0;
  std::string what;
  if (!(in >> pid) || pid <= 0) return std::nullopt;
  // The rest of the line, at most 256 bytes (it is written as at most 200): the file is ours, but
  // a damaged one must not be read without bound.
  char c = 0;
  while (what.size() < 256 && in.get(c) && c != '\n') what += c;
  if (!what.empty() && what.front() == ' ') what.erase(0, 1);
  return std::make_pair(static_cast<pid_t>(pid), what);
}

// This process's command line, arguments joined by spaces (at most 200 characters).
std::string self_command() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  std::replace(raw.begin(), raw.end(), '\n', ' ');
  if (raw.size() > 200) raw = raw.substr(0, 197) + "...";
  return raw.empty() ? "headcount" : raw;
}

bool process_alive(pid_t pid) {
  return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

}  // namespace

RunLock RunLock::acquire(const fs::path& dir) {
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  const bool lock_existed = fs::exists(dir / kLockFile, ec);
  fs::create_directories(dir, ec);
  HC_CHECK(!ec, "cannot create {}: {}", dir.string(), ec.message());
  const fs::path file = dir / kLockFile;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  HC_CHECK(fd >= 0, "{}: cannot open the run folder's lock: {}", file.string(),
           std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      const auto h = read_holder(file);
      HC_FAIL(
          "{} is in use by another process{}: two writers would corrupt it; wait for it to "
          "end or stop it (a stopped run resumes where it was)",
          dir.string(),
          h ? fmt::format(" (PID {}, {})", h->first, h->second.empty() ? "?" : h->second) : "");
    }
    HC_FAIL("{}: cannot lock: {}", file.string(), std::strerror(err));
  }
  const std::string content = fmt::format("{} {}\n", getpid(), self_command());
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, content.data(), content.size(), 0) != static_cast<ssize_t>(content.size())) {
    const int err = errno;
    ::close(fd);
    HC_FAIL("{}: cannot write the lock file: {}", file.string(), std::strerror(err));
  }
  RunLock lock;
  lock.fd_ = fd;
  if (!existed) lock.created_ = dir;
  if (!lock_existed) lock.new_file_ = dir / kLockFile;
  return lock;
}

std::optional<pid_t> RunLock::holder(const fs::path& dir) {
  const fs::path file = dir / kLockFile;
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<pid_t> out;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    const auto h = read_holder(file);
    out = h ? h->first : pid_t{0};
  } else {
    flock(fd, LOCK_UN);
  }
  ::close(fd);
  return out;
}

RunLock::RunLock(RunLock&& other) noexcept
    : fd_(other.fd_), created_(std::move(other.created_)), new_file_(std::move(other.new_file_)) {
  other.fd_ = -1;
  other.created_.clear();
  other.new_file_.clear();
}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    created_ = std::move(other.created_);
    new_file_ = std::move(other.new_file_);
    other.fd_ = -1;
    other.created_.clear();
    other.new_file_.clear();
  }
  return *this;
}

RunLock::~RunLock() {
  release();
}

void RunLock::keep_file() {
  new_file_.clear();
}

void RunLock::release() noexcept {
  if (fd_ < 0) return;
  // A lock file this lock put into a folder that was refused (not kept): the folder is left as it
  // was found.
  if (!new_file_.empty()) {
    std::error_code ec;
    fs::remove(new_file_, ec);
  }
  // A folder this lock created that holds nothing but the lock: a run that failed before its
  // first write (a bad input). It goes, as if the command had not been run; removed while the
  // lock is still held, so no other process is using it.
  if (!created_.empty()) {
    std::error_code ec;
    bool only_lock = true;
    for (fs::directory_iterator it(created_, ec), end; !ec && it != end; it.increment(ec))
      only_lock = only_lock && it->path().filename() == kLockFile;
    if (!ec && only_lock) {
      fs::remove(created_ / kLockFile, ec);
      fs::remove(created_, ec);
    }
  }
  ::close(fd_);  // closing the last descriptor releases the flock
  fd_ = -1;
}

void append_line(const fs::path& file, const std::string& line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  HC_CHECK(fd >= 0, "{}: cannot open for appending: {}", file.string(), std::strerror(errno));
  const std::string data = line + "\n";
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      // Take back a partial line, so that the log stays a sequence of whole lines.
      if (done > 0) {
        struct stat st {};
        if (fstat(fd, &st) == 0) (void)ftruncate(fd, st.st_size - static_cast<off_t>(done));
      }
      ::close(fd);
      HC_FAIL("{}: write failed: {}", file.string(), std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

int remove_stale_temporaries(const fs::path& dir, const std::string& only_name) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] != '.') continue;
    size_t dot = name.rfind('.');
    if (dot == std::string::npos || dot == 0) continue;
    const std::string pid_text = name.substr(dot + 1);
    const std::string head = name.substr(0, dot);
    const bool temporary = head.size() > 4 && (head.compare(head.size() - 4, 4, ".tmp") == 0 ||
                                               head.compare(head.size() - 4, 4, ".old") == 0);
    if (!temporary || pid_text.empty() ||
        pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
      continue;
    // ".NAME.tmp": the temporary of NAME
    if (!only_name.empty() && head.compare(1, head.size() - 5, only_name) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == getpid() || process_alive(pid)) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (!rm) ++removed;
  }
  return removed;
}

void crash_point(const char* name) {
  static const char* spec = std::getenv("HEADCOUNT_CRASH_AT");
  if (spec == nullptr || *spec == '\0') return;
  static std::mutex mutex;
  static std::map<std::string, int> hits;
  std::string target = spec;
  int want = 1;
  if (const size_t hash = target.find('#'); hash != std::string::npos) {
    want = std::atoi(target.c_str() + hash + 1);
    target.resize(hash);
  }
  if (target != name) return;
  std::lock_guard<std::mutex> guard(mutex);
  if (++hits[target] == want) {
    std::fprintf(stderr, "[headcount] HEADCOUNT_CRASH_AT=%s: killing this process\n", spec);
    std::fflush(stderr);
    kill(getpid(), SIGKILL);
    pause();
  }
}

}  // namespace headcount::io
