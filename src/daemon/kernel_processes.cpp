#include "kwd/daemon/kernel_processes.hpp"

#include <unistd.h>

#include <filesystem>
#include <optional>

#include "kwd/probes/process_record.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::daemon {
namespace {

// A process of ours (of anyone's with `all_users`) whose argv names a connection file, or
// nothing.
std::optional<KernelProcess> examine_process(pid_t pid, uid_t me, bool all_users) {
  const auto record = probes::ProcessRecord::open(pid);
  if (!record || (!all_users && record->owner() != me)) return std::nullopt;
  auto argv = record->argv();
  if (argv.size() < 2) return std::nullopt;
  const auto file = protocol::find_connection_file(argv);
  if (!file || !file->ends_with(".json")) return std::nullopt;
  KernelProcess k;
  k.pid = pid;
  k.uid = record->owner();
  std::filesystem::path path(*file);
  // Another user's (a container's) relative path is its own cwd's, in its own file system.
  if (path.is_relative() && all_users) return std::nullopt;
  if (path.is_relative()) {
    const auto cwd = record->cwd();
    if (cwd.empty()) return std::nullopt;
    path = cwd / path;
  }
  k.connection_file = path.lexically_normal().string();
  const auto lineage = record->lineage();
  // A fork of a kernel carries its argv but is part of that kernel, also once orphaned (its
  // kernel OOM-killed): not a kernel of its own.
  if (!lineage || lineage->forked_without_exec) return std::nullopt;
  k.start_time = lineage->start_time;
  k.started_at_ms = lineage->started_at_ms;
  // The launcher itself names the file too (it is in the kernel's argv it carries).
  k.under_launcher = protocol::is_watchdog_launcher(argv);
  if (const auto parent =
          lineage->ppid > 1 ? probes::ProcessRecord::open(lineage->ppid) : std::nullopt) {
    const auto parent_argv = parent->argv();
    k.under_launcher = k.under_launcher || protocol::is_watchdog_launcher(parent_argv);
    // Where the platform cannot tell a fork (macOS), one with its parent's argv is taken
    // for one.
    if (parent_argv == argv) return std::nullopt;
  }
  k.argv = std::move(argv);
  return k;
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

KernelProcessScanner::Found KernelProcessScanner::scan(ScanKind kind) {
  const uid_t me = ::getuid();
  const pid_t self = ::getpid();
  const std::int64_t now_ms = util::steady_ms();
  const bool regular = kind == ScanKind::regular;
  const std::uint64_t scan = ++scans_;
  for (const pid_t pid : probes::list_processes()) {
    if (pid == self) continue;
    auto [it, added] = seen_.try_emplace(pid);
    Seen& entry = it->second;
    if (added) entry.first_seen_ms = now_ms;
    entry.listed_in = scan;
    // A kernel stays one while its pid stays in the table: the daemon watches it already. One
    // under a launcher is looked at again, though: if the launcher dies (SIGKILL, the OOM
    // killer) the kernel lives on, reparented, and is the daemon's to watch.
    const bool recheck =
        regular && (regular_scans_ + static_cast<std::uint64_t>(pid)) % kRecheckEvery == 0;
    const bool young = !execs_announced_ && now_ms - entry.first_seen_ms < kNewForMs;
    const bool examine = entry.examined == 0 || (!entry.kernel && (young || recheck)) ||
                         (entry.kernel && entry.process.under_launcher && recheck);
    if (examine) {
      auto k = examine_process(pid, me, all_users_);
      entry.kernel = k.has_value();
      entry.process = k ? std::move(*k) : KernelProcess{};
      ++entry.examined;
    }
  }
  // A pid missing from this listing has exited: if it comes back, it is another process.
  std::erase_if(seen_, [&](const auto& item) { return item.second.listed_in != scan; });
  if (regular) ++regular_scans_;
  return known();
}

KernelProcessScanner::Found KernelProcessScanner::known() const {
  Found out;
  for (const auto& [pid, entry] : seen_)
    if (entry.kernel) out.push_back(&entry.process);
  return out;
}

KernelProcessScanner::Found KernelProcessScanner::examine_now(const std::vector<pid_t>& pids) {
  Found out;
  const uid_t me = ::getuid();
  const pid_t self = ::getpid();
  const std::int64_t now_ms = util::steady_ms();
  for (const pid_t pid : pids) {
    if (pid == self) continue;
    auto k = examine_process(pid, me, all_users_);
    // Every exec on the machine comes here: a pid the scans do not know yet is remembered
    // only when it is a kernel (the next scan judges the rest as new), so that a long scan
    // interval on a busy host does not pile up verdicts.
    auto it = seen_.find(pid);
    if (it == seen_.end()) {
      if (!k) continue;
      it = seen_.try_emplace(pid).first;
      it->second.first_seen_ms = now_ms;
      it->second.listed_in = scans_;  // as if listed: an exec'd pid is in the table
    }
    Seen& entry = it->second;
    entry.kernel = k.has_value();
    entry.process = k ? std::move(*k) : KernelProcess{};
    ++entry.examined;
    if (entry.kernel) out.push_back(&entry.process);
  }
  return out;
}

}  // namespace kwd::daemon
