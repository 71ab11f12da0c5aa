#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::platform::linux_proc {

// The fields of /proc/PID/stat we use.
struct ProcStat {
  pid_t pid = 0;
  std::string comm;
  char state = '?';
  pid_t ppid = 0;
  std::uint32_t flags = 0;  // the kernel's PF_* flags of the task
  std::int64_t threads = 0;
  std::uint64_t start_time = 0;  // clock ticks since boot
  std::uint64_t vsize = 0;       // bytes of address space: changes with every (un)mapping
  std::int64_t rss_pages = 0;
  // Field 52 (Linux >= 3.5): a zombie's wait status, as waitpid would give it to the parent;
  // 0 when we may not read it (another user's process) or the process still runs.
  std::optional<int> exit_code;
};

std::optional<ProcStat> parse_proc_stat(std::string_view text);
// A process's start (ProcStat::start_time, clock ticks since boot) in ms since boot; -1 when
// the tick rate is unknown.
std::int64_t start_ticks_to_ms(std::uint64_t start_ticks);
// When the machine booted (wall clock, ms; /proc/stat's btime, whole seconds): what a
// process's start_time, in clock ticks since boot, counts from. Read once.
std::optional<std::int64_t> boot_time_ms();
// A process's start (ProcStat::start_time) on the wall clock, in ms; -1 when unknown.
std::int64_t started_at_ms(std::uint64_t start_ticks);
// The pids in `proc_root` (a procfs mount: /proc, or the host's as a node daemon sees it),
// as one readdir pass finds them; empty when it cannot be read.
std::vector<pid_t> list_pids(const std::string& proc_root = "/proc");
// The resident pages of /proc/PID/statm ("size resident shared text lib data dt").
std::optional<std::int64_t> parse_statm_resident(std::string_view text);
// Its first field: the size of the address space in pages (stat's vsize, in bytes, costs the
// kernel more to print: stat formats 52 fields).
std::optional<std::int64_t> parse_statm_size(std::string_view text);

// Value in bytes of a "Key:   1234 kB" line in /proc/PID/status, /proc/meminfo, smaps_rollup.
std::optional<std::int64_t> find_kb_field(std::string_view text, std::string_view key);

// Whole small file (procfs, sysfs, cgroupfs); nullopt when it cannot be read.
std::optional<std::string> read_small_file(const std::string& path);
// pread from offset 0 into `buf` (procfs regenerates the text); nullopt on error/empty. One
// read: for files the kernel writes in one piece (stat, statm, status, meminfo, loadavg).
std::optional<std::string_view> pread_all(int fd, std::string& buf);
// The same for files of many records (mountinfo, maps): the kernel hands those out about a
// page per read, so they are read on until the end.
std::optional<std::string_view> pread_to_end(int fd, std::string& buf);

}  // namespace kwd::platform::linux_proc
