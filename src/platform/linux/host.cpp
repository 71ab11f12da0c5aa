#include "kwd/platform/host.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "kwd/platform/linux/enter_cgroup.hpp"
#include "kwd/platform/linux/procfs.hpp"

namespace kwd::platform {
namespace fs = std::filesystem;

fs::path self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p;
}

std::string default_opener() {
  return "xdg-open";
}

fs::path jupyter_user_data_dir() {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg != nullptr && *xdg != '\0') return fs::path(xdg) / "jupyter";
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : "") / ".local" / "share" / "jupyter";
}

std::optional<int> run_internal_step(int argc, char** argv) {
  // `run --memory-limit` starts the kernel through this step (see enter_cgroup.hpp); it
  // must exec the kernel before anything else is set up.
  if (argc > 1 && std::string_view(argv[1]) == linux_cgroup::kEnterCgroupVerb)
    return linux_cgroup::enter_cgroup_and_exec(argc, argv);
  return std::nullopt;
}

std::string boot_id() {
  auto text = linux_proc::read_small_file("/proc/sys/kernel/random/boot_id").value_or("");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

std::int64_t self_resident_bytes() {
  const auto text = linux_proc::read_small_file("/proc/self/statm");
  const auto pages = text ? linux_proc::parse_statm_resident(*text) : std::nullopt;
  return pages ? *pages * ::sysconf(_SC_PAGESIZE) : -1;
}

}  // namespace kwd::platform
