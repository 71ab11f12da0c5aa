#include "kwd/platform/default_app.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kwd/platform/host.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/self_exe.hpp"

extern char** environ;

namespace kwd::platform {

std::string open_with_default_app(const std::filesystem::path& file) {
  const std::string opener = default_opener();
  const auto program = util::find_on_path(opener);
  if (!program) return opener + " was not found on PATH; open " + file.string() + " yourself";
  std::vector<std::string> args{program->string(), file.string()};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (const int err = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
      err != 0)
    return "cannot run " + args[0] + ": " + std::strerror(err);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return "cannot wait for " + args[0] + ": " + std::strerror(errno);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  return args[0] + " failed (" +
         (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                            : "signal " + std::to_string(WTERMSIG(status))) +
         "); the page is " + file.string();
}

std::filesystem::path user_cache_dir(const std::string& what) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return std::filesystem::path(xdg) / "kernel-watchdog" / what;
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home == '/')
    return std::filesystem::path(home) / ".cache" / "kernel-watchdog" / what;
  return util::shared_temp_dir() / ("kernel-watchdog-" + std::to_string(::geteuid())) / what;
}

}  // namespace kwd::platform
