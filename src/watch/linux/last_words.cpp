// Linux: the pipe's read end is found in /proc/PID/fd (the entry that names the same pipe as
// fd 2 and is open for reading, per /proc/PID/fdinfo) and duplicated into this process with
// pidfd_getfd(2) (Linux 5.6; allowed to a parent of the same user under Yama's default).
#include "kwd/watch/last_words.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "kwd/util/unique_fd.hpp"

namespace kwd::watch {
namespace {

namespace fs = std::filesystem;

std::string link_of(const fs::path& p) {
  std::error_code ec;
  return fs::read_symlink(p, ec).string();
}

std::string pipe_name_of_fd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return {};
  return "pipe:[" + std::to_string(st.st_ino) + "]";
}

// The access mode from /proc/PID/fdinfo/N ("flags:\t0100000" in octal).
int access_mode(const fs::path& fdinfo) {
  std::ifstream in(fdinfo);
  std::string key;
  while (in >> key) {
    if (key == "flags:") {
      std::string octal;
      in >> octal;
      return static_cast<int>(std::stoul(octal, nullptr, 8)) & O_ACCMODE;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return -1;
}

class PidfdLastWords final : public LastWords {
 public:
  PidfdLastWords(pid_t pid, int our_pipe_fd) : pid_(pid), ours_(pipe_name_of_fd(our_pipe_fd)) {
    pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pidfd_) problem_ = std::string("pidfd_open: ") + std::strerror(errno);
  }

  bool try_attach() override {
    if (held_ || !problem_.empty()) return true;
    const fs::path proc = "/proc/" + std::to_string(pid_);
    const std::string stderr_pipe = link_of(proc / "fd" / "2");
    // Not yet redirected (or not a pipe: a kernel that keeps our pipe as its fd 2 loses
    // nothing, we read that pipe ourselves).
    if (!stderr_pipe.starts_with("pipe:[") || stderr_pipe == ours_) return false;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(proc / "fd", ec)) {
      const std::string name = entry.path().filename().string();
      if (name == "2" || link_of(entry.path()) != stderr_pipe) continue;
      if (access_mode(proc / "fdinfo" / name) != O_RDONLY) continue;
      const int target = std::stoi(name);
      held_.reset(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd_.get(), target, 0)));
      if (!held_) {
        problem_ = std::string("pidfd_getfd: ") + std::strerror(errno);
        return true;
      }
      return true;
    }
    return false;
  }

  std::string drain(std::size_t limit) override {
    std::string out;
    if (!held_) return out;
    // Only what is there: the kernel's children may still hold the write end, so a read
    // past the buffered bytes could block. O_NONBLOCK is not set: it would be set on the
    // description ipykernel's thread reads too.
    int available = 0;
    while (out.size() < limit && ::ioctl(held_.get(), FIONREAD, &available) == 0 && available > 0) {
      std::string chunk(
          std::min<std::size_t>(static_cast<std::size_t>(available), limit - out.size()), '\0');
      const ssize_t n = ::read(held_.get(), chunk.data(), chunk.size());
      if (n <= 0) break;
      out.append(chunk.data(), static_cast<std::size_t>(n));
    }
    return out;
  }

  [[nodiscard]] std::string problem() const override { return problem_; }

 private:
  pid_t pid_;
  std::string ours_;
  util::UniqueFd pidfd_;
  util::UniqueFd held_;
  std::string problem_;
};

}  // namespace

std::unique_ptr<LastWords> make_last_words(pid_t kernel_pid, int our_pipe_fd) {
  return std::make_unique<PidfdLastWords>(kernel_pid, our_pipe_fd);
}

}  // namespace kwd::watch
