#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include "kwd/platform/regular_file.hpp"
#include "kwd/stacks/system_crash_report.hpp"

namespace kwd::stacks {
namespace {

constexpr std::size_t kMaxIpsBytes = 8 << 20;
constexpr auto kLookInterval = std::chrono::milliseconds(50);

// ReportCrash writes a process's report into its user's ~/Library/Logs/DiagnosticReports; the
// kernel runs as the watchdog's user. The password database first: under sudo, $HOME can be
// another user's.
std::string reports_directory() {
  std::string home;
  if (const passwd* entry = ::getpwuid(::geteuid()); entry && entry->pw_dir) home = entry->pw_dir;
  if (home.empty())
    if (const char* env = std::getenv("HOME")) home = env;
  if (home.empty()) return {};
  return home + "/Library/Logs/DiagnosticReports";
}

bool ends_with_ips(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".ips") == 0;
}

}  // namespace

bool system_writes_crash_reports() {
  return true;
}

CrashStack read_system_crash_report(pid_t pid, int signal, std::int64_t died_at_ms,
                                    std::chrono::milliseconds budget) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + budget;
  CrashStack out;
  out.fault.pid = pid;
  out.fault.signal = signal;
  const auto finish = [&](CrashStack& result) {
    result.capture_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - started)
                            .count();
    return result;
  };
  const std::string directory = reports_directory();
  if (directory.empty()) {
    out.missing = "no home directory for this user: macOS's crash reports were not looked for";
    return finish(out);
  }
  // Reports already read and found to be another process's are not read again.
  std::set<std::string> others;
  // File times have a second's grain, and a report is written after the death, never before.
  const std::int64_t oldest_s = died_at_ms / 1000 - 2;
  for (;;) {
    util::UniqueFd dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir) {
      util::UniqueFd listing(::dup(dir.get()));
      for (const auto& name : platform::names_in_directory(std::move(listing))) {
        if (!ends_with_ips(name) || others.contains(name)) continue;
        auto file = platform::open_regular_file(dir.get(), name.c_str(), O_NOFOLLOW);
        if (!file.fd || file.st.st_mtime < oldest_s ||
            static_cast<std::size_t>(file.st.st_size) > kMaxIpsBytes)
          continue;
        const auto text = platform::read_up_to(file.fd.get(), kMaxIpsBytes);
        if (!text) continue;
        const auto report = parse_ips_crash(*text);
        // Unreadable now may be a report still being written: looked at again next time.
        if (!report) continue;
        if (report->pid != pid) {
          others.insert(name);
          continue;
        }
        auto stack = crash_stack_from(*report);
        stack.system_report = directory + "/" + name;
        if (stack.fault.signal == 0) stack.fault.signal = signal;
        return finish(stack);
      }
    }
    if (std::chrono::steady_clock::now() + kLookInterval > deadline) break;
    std::this_thread::sleep_for(kLookInterval);
  }
  out.missing = "macOS wrote no crash report for pid " + std::to_string(pid) + " in " + directory +
                " within " + std::to_string(budget.count()) +
                " ms of its death (ReportCrash may be off, or slower than that)";
  return finish(out);
}

}  // namespace kwd::stacks
