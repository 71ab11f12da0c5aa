#include "kwd/watch/flight_evidence.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "kwd/platform/linux/cgroup_fs.hpp"
#include "kwd/platform/linux/procfs.hpp"
#include "kwd/probes/linux/kernel_log.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::watch {
namespace {

constexpr int kMaxRecords = 200'000;  // a ring of 16 MiB holds fewer

}  // namespace

CgroupMark mark_memory_cgroup(pid_t kernel_pid) {
  CgroupMark mark;
  if (const auto cgroup = platform::linux_proc::memory_cgroup_of(kernel_pid)) {
    struct stat st {};
    if (::stat(cgroup->dir.c_str(), &st) != 0) return mark;
    mark.dir = cgroup->dir;
    mark.inode = st.st_ino;
    mark.version = cgroup->version;
    mark.oom_kills = cgroup_oom_kills(mark.dir, mark.inode, mark.version);
  }
  return mark;
}

std::optional<std::int64_t> cgroup_oom_kills(const std::string& dir, std::uint64_t inode,
                                             int version) {
  if (dir.empty() || (version != 1 && version != 2)) return std::nullopt;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || (inode != 0 && st.st_ino != inode)) return std::nullopt;
  const auto text = platform::linux_proc::read_small_file(
      dir + (version == 2 ? "/memory.events" : "/memory.oom_control"));
  if (!text) return std::nullopt;
  const auto fields = platform::linux_proc::parse_flat_keyed(*text);
  const auto it = fields.find("oom_kill");  // absent from v1 before Linux 4.13
  if (it == fields.end()) return std::nullopt;
  return it->second;
}

std::uint64_t own_pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
}

KernelLogKills oom_kills_in_kernel_log(const std::vector<pid_t>& pids, std::int64_t since_wall_ms) {
  KernelLogKills out;
  // A new reader of /dev/kmsg starts at the oldest record the ring buffer still holds.
  util::UniqueFd kmsg(::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!kmsg) {
    out.why_not = std::string("/dev/kmsg: ") + std::strerror(errno);
    return out;
  }
  // The log's times count from boot on the monotonic clock: dated by that clock's offset
  // from the wall clock now (to the millisecond; /proc/stat's btime is whole seconds).
  timespec mono{};
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  const std::int64_t boot_ms =
      util::wall_ms() - (static_cast<std::int64_t>(mono.tv_sec) * 1000 + mono.tv_nsec / 1'000'000);
  out.readable = true;
  std::array<char, 8192> buf{};  // a record is at most 1 KiB of text plus its dictionary
  // Bounded: a log flooded as fast as it is read would keep this loop going.
  for (int records = 0; records < kMaxRecords; ++records) {
    const ssize_t n = ::read(kmsg.get(), buf.data(), buf.size());
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;  // EPIPE: overwritten, go on
    if (n <= 0) break;                                          // EAGAIN: read to the end
    const auto record = probes::linux_proc::parse_kmsg_record(
        std::string_view(buf.data(), static_cast<std::size_t>(n)));
    if (!record) continue;
    const auto line = probes::linux_proc::parse_oom_line(record->message);
    if (!line || line->kind != probes::linux_proc::OomLineKind::killed) continue;
    if (std::find(pids.begin(), pids.end(), line->pid) == pids.end()) continue;
    const std::int64_t at_ms = boot_ms + record->since_boot_us / 1000;
    // A pid is reused: a kill from before this kernel started was another process's.
    if (at_ms + 100 < since_wall_ms) continue;
    out.kills.push_back({line->pid, at_ms, line->rss_bytes});
  }
  return out;
}

}  // namespace kwd::watch
