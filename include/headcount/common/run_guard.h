// What keeps a run folder consistent when processes die, disks fill up or two commands meet on
// one folder: an exclusive lock per folder, checked appends, removal of temporaries left by dead
// processes, and named crash points through which the tests kill a process at a chosen moment.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

namespace headcount {
// The exit status of a command whose run was interrupted (SIGINT, SIGTERM) after saving a
// checkpoint it resumes from: distinct from success (0) and failure (1).
constexpr int kExitInterrupted = 3;
}  // namespace headcount

namespace headcount::io {

namespace fs = std::filesystem;

// An exclusive lock on a run folder: a `.lock` file in it, held with flock(2) for the life of the
// object, so the kernel releases it when the process dies (even by SIGKILL); the file records the
// holder's PID and command for the error message of a second writer. A folder the lock created
// and that holds nothing else when it is released (a run that failed before writing) is removed.
// Not copyable; movable.
class RunLock {
 public:
  // Takes the lock, creating the folder if needed. A folder locked by another process is an
  // error naming it, the holder's PID and command line.
  static RunLock acquire(const fs::path& dir);
  // The PID holding `dir`'s lock, if a live process holds it (without taking it).
  static std::optional<pid_t> holder(const fs::path& dir);
  RunLock() = default;
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();
  bool held() const { return fd_ >= 0; }

  // The folder is the run's (it passed its checks): its lock file stays when the lock is released.
  // Until then a lock file that acquire created goes with the lock, so that a refused folder is
  // left as it was found.
  void keep_file();

 private:
  void release() noexcept;
  int fd_ = -1;
  fs::path created_;   // the folder, when acquire created it
  fs::path new_file_;  // the lock file, when acquire created it and keep_file was not called
};

// Appends one line (plus '\n') to an event log; a failed write (disk full) is an error naming the
// file, not a silently shortened log.
void append_line(const fs::path& file, const std::string& line);

// Removes the `.NAME.tmp.PID` and `.NAME.old.PID` entries that `dir` holds (not recursively)
// whose process is gone: what a process killed while writing leaves behind. Returns how many.
// With `only_name`, only the temporaries of that one file or folder: in a folder headcount does
// not own (the user's, where an --out lands), nothing but what headcount itself would write there.
int remove_stale_temporaries(const fs::path& dir, const std::string& only_name = "");

// A named moment in a sequence of writes. When the environment variable HEADCOUNT_CRASH_AT is
// "NAME" or "NAME#K", the process kills itself with SIGKILL at the first (or K-th) time it passes
// NAME: how the tests interrupt a save at every window between its writes. Costs one getenv
// otherwise.
void crash_point(const char* name);

}  // namespace headcount::io
