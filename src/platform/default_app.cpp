#include "kwd/platform/default_app.hpp"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "kwd/platform/host.hpp"
#include "kwd/platform/run_program.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/self_exe.hpp"

namespace kwd::platform {

std::string open_with_default_app(const std::filesystem::path& file) {
  const std::string opener = default_opener();
  const auto program = util::find_on_path(opener);
  if (!program) return opener + " was not found on PATH; open " + file.string() + " yourself";
  const auto end = run_program({program->string(), file.string()}, {});
  if (!end.problem.empty()) return end.problem;
  if (end.exit_status == 0) return {};
  return program->string() + " failed (" +
         (end.exit_status ? "exit status " + std::to_string(*end.exit_status)
                          : "signal " + std::to_string(end.signal)) +
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
