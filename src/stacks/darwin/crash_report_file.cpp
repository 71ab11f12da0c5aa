#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kwd/platform/regular_file.hpp"
#include "kwd/stacks/system_crash_report.hpp"

namespace kwd::stacks {
namespace {

constexpr std::size_t kMaxIpsBytes = 8 << 20;

// ReportCrash writes a user's process's report into that user's
// ~/Library/Logs/DiagnosticReports, and root's processes' into /Library/Logs/DiagnosticReports.
// The kernel runs as the watchdog's user. The password database first: under sudo, $HOME can
// be another user's.
std::vector<std::string> report_directories() {
  std::vector<std::string> out;
  std::string home;
  if (const passwd* entry = ::getpwuid(::geteuid()); entry && entry->pw_dir) home = entry->pw_dir;
  if (home.empty())
    if (const char* env = std::getenv("HOME")) home = env;
  if (!home.empty()) out.push_back(home + "/Library/Logs/DiagnosticReports");
  if (::geteuid() == 0) out.emplace_back("/Library/Logs/DiagnosticReports");
  return out;
}

bool ends_with_ips(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".ips") == 0;
}

}  // namespace

bool system_writes_crash_reports() {
  return true;
}

std::optional<CrashStack> look_for_system_crash_report(SystemCrashReportSearch& search) {
  // File times have a second's grain, and a report is written after the death, never before.
  const std::int64_t oldest_s = search.died_at_ms / 1000 - 2;
  for (const auto& directory : report_directories()) {
    util::UniqueFd dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) continue;
    util::UniqueFd listing(::dup(dir.get()));
    for (const auto& name : platform::names_in_directory(std::move(listing))) {
      const std::string path = directory + "/" + name;
      if (!ends_with_ips(name) || search.read_before.contains(path)) continue;
      auto file = platform::open_regular_file(dir.get(), name.c_str(), O_NOFOLLOW);
      if (!file.fd || file.st.st_mtime < oldest_s ||
          static_cast<std::size_t>(file.st.st_size) > kMaxIpsBytes)
        continue;
      const auto text = platform::read_up_to(file.fd.get(), kMaxIpsBytes);
      if (!text) continue;
      // Not readable yet may be a report still being written: looked at again next time.
      const auto kind = ips_kind(*text);
      if (kind == IpsKind::unreadable) continue;
      const auto report = kind == IpsKind::crash ? parse_ips_crash(*text) : std::nullopt;
      if (!report || report->pid != search.pid) {
        search.read_before.insert(path);
        continue;
      }
      auto stack = crash_stack_from(*report);
      stack.system_report = path;
      if (stack.fault.signal == 0) stack.fault.signal = search.signal;
      return stack;
    }
  }
  return std::nullopt;
}

}  // namespace kwd::stacks
