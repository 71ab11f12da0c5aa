#include "kwd/platform/run_program.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace kwd::platform {
namespace {

// The spawn's file actions: none, or every standard stream on /dev/null.
class FileActions {
 public:
  explicit FileActions(bool quiet) {
    if (!quiet || ::posix_spawn_file_actions_init(&actions_) != 0) return;
    ready_ = true;
    for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
      ::posix_spawn_file_actions_addopen(&actions_, fd, "/dev/null",
                                         fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0);
  }
  ~FileActions() {
    if (ready_) ::posix_spawn_file_actions_destroy(&actions_);
  }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  [[nodiscard]] const posix_spawn_file_actions_t* get() const {
    return ready_ ? &actions_ : nullptr;
  }

 private:
  posix_spawn_file_actions_t actions_{};
  bool ready_ = false;
};

}  // namespace

ProgramEnd run_program(const std::vector<std::string>& argv, const RunOptions& options) {
  ProgramEnd end;
  if (argv.empty()) {
    end.problem = "cannot run an empty command line";
    return end;
  }
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const FileActions actions(options.quiet);
  pid_t pid = -1;
  if (const int err = ::posix_spawn(&pid, args[0], actions.get(), nullptr, args.data(), environ);
      err != 0) {
    end.problem = "cannot run " + argv[0] + ": " + std::strerror(err);
    return end;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + options.limit.value_or(std::chrono::milliseconds(0));
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, options.limit ? WNOHANG : 0);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      end.problem = "cannot wait for " + argv[0] + ": " + std::strerror(errno);
      return end;
    }
    if (!options.limit) continue;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      end.timed_out = true;
      return end;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status))
    end.exit_status = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    end.signal = WTERMSIG(status);
  return end;
}

}  // namespace kwd::platform
