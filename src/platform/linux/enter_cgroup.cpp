#include "kwd/platform/linux/enter_cgroup.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace kwd::platform::linux_cgroup {

std::vector<std::string> enter_cgroup_argv(const std::string& self_exe,
                                           const std::string& procs_file,
                                           const std::vector<std::string>& kernel_argv) {
  std::vector<std::string> argv{self_exe, std::string(kEnterCgroupVerb), procs_file, "--"};
  argv.insert(argv.end(), kernel_argv.begin(), kernel_argv.end());
  return argv;
}

int enter_cgroup_and_exec(int argc, char** argv) {
  // argv: self __enter-cgroup PROCS -- KERNEL...
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) {
    std::fprintf(stderr, "kernel-watchdog: usage: %s PROCS_FILE -- KERNEL_ARGV...\n",
                 kEnterCgroupVerb.data());
    return 2;
  }
  // Plain syscalls only: this runs between spawn and exec, and should cost nothing.
  const std::string pid = std::to_string(::getpid());
  const int fd = ::open(argv[2], O_WRONLY | O_CLOEXEC);
  const bool entered =
      fd >= 0 && ::write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!entered)
    std::fprintf(stderr,
                 "kernel-watchdog: cannot enter the kernel's memory cgroup (%s: %s); the kernel "
                 "runs without the memory limit\n",
                 argv[2], std::strerror(err));
  char** kernel = argv + 4;
  ::execvp(kernel[0], kernel);
  const int exec_err = errno;
  std::fprintf(stderr, "kernel-watchdog: cannot start %s: %s\n", kernel[0],
               std::strerror(exec_err));
  return exec_err == ENOENT ? 127 : 126;
}

}  // namespace kwd::platform::linux_cgroup
