#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kwd/probes/kernel_processes.hpp"

namespace kwd::probes::linux_proc {

// A process that is not the kernel's but shares a resource with it (its memory cgroup, its
// GPU): who else was there when memory ran out.
struct Neighbour {
  pid_t pid = 0;
  std::int64_t rss = -1;     // bytes; -1 when /proc did not say
  std::string command_line;  // arguments joined by spaces, shortened; "" when hidden
};

// The command line of `pid` as `ps` shows it, at most `max_bytes` long ("" when unreadable).
std::string command_line_of(pid_t pid, const std::string& proc_root = "/proc",
                            std::size_t max_bytes = 200);

// The processes listed in `cgroup_dir`/cgroup.procs that do not belong to the kernel, the
// `keep` largest by RSS first. Reads at most kMaxScanned pids: a container's cgroup may hold
// thousands, and this runs at a death.
std::vector<Neighbour> cgroup_neighbours(const std::string& cgroup_dir,
                                         const KernelProcesses& kernel, std::size_t keep,
                                         const std::string& proc_root = "/proc");

nlohmann::json neighbours_to_json(const std::vector<Neighbour>& neighbours);

}  // namespace kwd::probes::linux_proc
