#include "kwd/stacks/linux/python_dump.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/stacks/pure.hpp"
#include "kwd/stacks/stacks.hpp"
#include "kwd/util/unique_dir.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::stacks::linux_stacks {
namespace {

using Clock = std::chrono::steady_clock;

// /proc/PID/fd/N of the shim's memory file, or why there is none.
std::optional<std::string> find_memfd(pid_t pid, std::string& why) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  const util::UniqueDir fds(::opendir(dir.c_str()));
  if (!fds) {
    why = errno == EACCES ? "not permitted to read " + dir + " (another user's kernel?)"
                          : "cannot list " + dir + ": " + std::strerror(errno);
    return std::nullopt;
  }
  const std::string wanted = std::string("/memfd:") + kPythonDumpMemfd;
  while (const dirent* entry = ::readdir(fds.get())) {
    if (entry->d_name[0] == '.') continue;
    const std::string path = dir + "/" + entry->d_name;
    char target[256];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    if (std::string_view(target, static_cast<std::size_t>(n)).starts_with(wanted)) return path;
  }
  why =
      "the kernel was not started by `kernel-watchdog run` with its Python shim (or its Python "
      "has no os.memfd_create), so it has no all-threads dump to ask for";
  return std::nullopt;
}

std::size_t size_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0;
}

}  // namespace

PythonDump request_python_dump(pid_t pid, pid_t thread, std::chrono::milliseconds budget) {
  PythonDump out;
  const auto deadline = Clock::now() + budget;
  const auto path = find_memfd(pid, out.missing);
  if (!path) return out;
  const int signo = SIGRTMIN + kPythonDumpSignalOffset;
  const auto status =
      platform::linux_proc::read_small_file("/proc/" + std::to_string(pid) + "/status");
  if (!status || !catches_signal(*status, signo)) {
    out.missing = "the kernel does not catch signal " + std::to_string(signo) + " (SIGRTMIN+" +
                  std::to_string(kPythonDumpSignalOffset) +
                  "): its shim's dump was not registered, and the signal would kill it";
    return out;
  }
  const util::UniqueFd file(::open(path->c_str(), O_RDWR | O_CLOEXEC));
  if (!file) {
    out.missing = "cannot open " + *path + ": " + std::strerror(errno);
    return out;
  }
  // Another watchdog asking at the same moment (the daemon and `stacks`): one at a time.
  while (::flock(file.get(), LOCK_EX | LOCK_NB) != 0) {
    if (Clock::now() >= deadline) {
      out.missing = "another capture held the kernel's dump file for the whole budget";
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // The shim opened it O_APPEND: the dump starts at 0 after this.
  if (::ftruncate(file.get(), 0) != 0) {
    out.missing = std::string("cannot empty the kernel's dump file: ") + std::strerror(errno);
    return out;
  }
  // faulthandler registers its handler without SA_NODEFER: the signal stays blocked in the
  // thread that runs it until the handler returns, and the dump is whole once the thread's
  // status shows it neither pending nor blocked. Only for a thread that did not block it
  // already; otherwise the signal goes to the process, and the dump is taken as whole once
  // the file has stopped growing for a moment (it has no end mark).
  const std::string thread_status =
      thread > 0 ? "/proc/" + std::to_string(pid) + "/task/" + std::to_string(thread) + "/status"
                 : std::string();
  bool directed = false;
  if (thread > 0) {
    const auto before = platform::linux_proc::read_small_file(thread_status);
    directed = before && !signal_in_mask(*before, "SigBlk", signo);
  }
  const int sent =
      directed ? static_cast<int>(::syscall(SYS_tgkill, pid, thread, signo)) : ::kill(pid, signo);
  if (sent != 0) {
    out.missing = std::string("cannot signal the kernel: ") + std::strerror(errno);
    return out;
  }
  constexpr auto kSettled = std::chrono::milliseconds(20);
  std::size_t seen = 0;
  auto grew_at = Clock::now();
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(directed ? 500 : 2000));
    const std::size_t now = size_of(file.get());
    if (now != seen) {
      seen = now;
      grew_at = Clock::now();
    }
    if (directed) {
      const auto text = platform::linux_proc::read_small_file(thread_status);
      if (!text) {
        directed = false;  // the thread ended: back to waiting for the file to settle
        continue;
      }
      // Neither bit and nothing written is the moment between the signal's dequeue and the
      // handler's start: not done yet.
      if (seen > 0 && !signal_in_mask(*text, "SigPnd", signo) &&
          !signal_in_mask(*text, "SigBlk", signo)) {
        seen = size_of(file.get());
        break;
      }
    } else if (seen > 0 && Clock::now() - grew_at >= kSettled) {
      break;
    }
  }
  if (seen == 0) {
    out.missing = "the kernel wrote no dump within " + std::to_string(budget.count()) +
                  " ms of the signal (every thread blocks it?)";
    return out;
  }
  out.text.resize(seen);
  const ssize_t got = ::pread(file.get(), out.text.data(), seen, 0);
  out.text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  if (::ftruncate(file.get(), 0) != 0) {
    // Left for the next asker to empty; nothing is lost.
  }
  ::flock(file.get(), LOCK_UN);
  return out;
}

}  // namespace kwd::stacks::linux_stacks
