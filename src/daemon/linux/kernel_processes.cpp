#include "kwd/daemon/kernel_processes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::daemon {
namespace {

std::string read_small(int dir_fd, const char* name) {
  util::UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0 || out.size() > (1u << 20)) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

std::vector<std::string> split_nul(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Fields after the command name in /proc/PID/stat: ppid is the 2nd, starttime the 20th.
bool parse_stat(const std::string& stat, pid_t& ppid, std::uint64_t& start_time) {
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::string_view rest(stat);
  rest.remove_prefix(close + 2);
  int field = 0;  // rest starts at field 3 (state)
  std::size_t pos = 0;
  while (pos < rest.size()) {
    auto space = rest.find(' ', pos);
    if (space == std::string_view::npos) space = rest.size();
    const std::string_view token = rest.substr(pos, space - pos);
    if (field == 1) std::from_chars(token.data(), token.data() + token.size(), ppid);
    if (field == 19) {
      std::from_chars(token.data(), token.data() + token.size(), start_time);
      return true;
    }
    ++field;
    pos = space + 1;
  }
  return false;
}

// `kernel-watchdog [options] run ... -- KERNEL...` or `kernel-watchdog smoke ...`: they watch
// their kernels themselves.
bool is_launcher_argv(const std::vector<std::string>& argv) {
  if (argv.size() < 2) return false;
  const bool ours = std::filesystem::path(argv[0]).filename() == "kernel-watchdog";
  for (std::size_t i = 1; ours && i < argv.size(); ++i) {
    if (argv[i] == "run" || argv[i] == "smoke") return true;
    if (argv[i] == "--") break;
  }
  return false;
}

bool is_launcher(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  util::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return fd && is_launcher_argv(split_nul(read_small(fd.get(), "cmdline")));
}

}  // namespace

namespace {

// One entry of /proc: a process of ours whose argv names a connection file, or nothing.
std::optional<KernelProcess> examine_process(int proc_fd, const char* name, pid_t pid, uid_t me) {
  util::UniqueFd dir(::openat(proc_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return std::nullopt;
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0 || st.st_uid != me) return std::nullopt;  // someone else's
  auto argv = split_nul(read_small(dir.get(), "cmdline"));
  if (argv.size() < 2) return std::nullopt;
  const auto file = protocol::find_connection_file(argv);
  if (!file || !file->ends_with(".json")) return std::nullopt;
  KernelProcess k;
  k.pid = pid;
  std::filesystem::path path(*file);
  if (path.is_relative()) {
    std::error_code error;
    const auto cwd = std::filesystem::read_symlink("/proc/" + std::string(name) + "/cwd", error);
    if (error) return std::nullopt;
    path = cwd / path;
  }
  k.connection_file = path.lexically_normal().string();
  pid_t ppid = 0;
  if (!parse_stat(read_small(dir.get(), "stat"), ppid, k.start_time)) return std::nullopt;
  // The launcher itself names the file too (it is in the kernel's argv it carries).
  k.under_launcher = is_launcher_argv(argv) || (ppid > 1 && is_launcher(ppid));
  k.argv = std::move(argv);
  return k;
}

// Calls `each(pid, name)` for every process in /proc but this one.
template <typename Each>
void for_each_process(Each&& each) {
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return;
  const pid_t self = ::getpid();
  while (const dirent* entry = ::readdir(proc.get())) {
    pid_t pid = 0;
    const char* name = entry->d_name;
    const auto [end, ec] = std::from_chars(name, name + std::strlen(name), pid);
    if (ec != std::errc() || *end != '\0' || pid <= 0 || pid == self) continue;
    each(::dirfd(proc.get()), name, pid);
  }
}

// How long a new pid is examined at every scan: long enough for a forked child to exec, even
// on a machine busy starting fifty kernels at once (a scan that saw one between fork and exec
// left it to the one-in-five rechecks: found up to 11 s after its start in daemon_bench).
constexpr std::int64_t kNewForMs = 5000;
// After that, a pid that is no kernel (or a kernel under a launcher) is examined again in one
// regular scan of this many (spread by pid), so that a process that exec's into a kernel
// later, or a pid reused between two scans, is seen.
constexpr std::uint64_t kRecheckEvery = 5;

}  // namespace

std::vector<KernelProcess> KernelProcessScanner::scan(ScanKind kind) {
  std::vector<KernelProcess> out;
  const uid_t me = ::getuid();
  const std::int64_t now_ms = util::steady_ms();
  const bool regular = kind == ScanKind::regular;
  std::unordered_map<pid_t, Seen> now;
  now.reserve(seen_.size());
  for_each_process([&](int proc_fd, const char* name, pid_t pid) {
    Seen entry;
    if (auto it = seen_.find(pid); it != seen_.end())
      entry = std::move(it->second);
    else
      entry.first_seen_ms = now_ms;
    // A kernel stays one while its pid stays in the table: the daemon watches it already. One
    // under a launcher is looked at again, though: if the launcher dies (SIGKILL, the OOM
    // killer) the kernel lives on, reparented, and is the daemon's to watch.
    const bool recheck =
        regular && (regular_scans_ + static_cast<std::uint64_t>(pid)) % kRecheckEvery == 0;
    const bool examine = entry.examined == 0 ||
                         (!entry.kernel && (now_ms - entry.first_seen_ms < kNewForMs || recheck)) ||
                         (entry.kernel && entry.process.under_launcher && recheck);
    if (examine) {
      auto k = examine_process(proc_fd, name, pid, me);
      entry.kernel = k.has_value();
      entry.process = k ? std::move(*k) : KernelProcess{};
      ++entry.examined;
    }
    if (entry.kernel) out.push_back(entry.process);
    now.emplace(pid, std::move(entry));
  });
  // A pid missing from this scan has exited: if it comes back, it is another process.
  seen_ = std::move(now);
  if (regular) ++regular_scans_;
  return out;
}

}  // namespace kwd::daemon
