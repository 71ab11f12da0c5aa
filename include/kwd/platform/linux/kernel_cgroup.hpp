#pragma once

#include <sys/types.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kwd::platform::linux_cgroup {

struct CgroupError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `run --memory-limit`: a memory cgroup of the kernel's own, made as a child of the
// watchdog's memory cgroup (v2 when the unified hierarchy carries the memory controller,
// else v1), so an OOM takes the kernel alone and the cgroup's OOM-kill counter is
// conclusive. The limit caps memory and swap together (memory.swap.max 0 on v2,
// memory.memsw.limit_in_bytes = limit on v1 where swap accounting exists), so a runaway
// cell ends in an OOM kill instead of thrashing swap. Removed by remove(), or failing that
// on destruction (the supervisor ends with _exit/raise, so it calls remove() itself).
class KernelCgroup {
 public:
  // Throws CgroupError saying what could not be done and why, in words for the user.
  static KernelCgroup create(std::uint64_t limit_bytes, const std::string& proc_root = "/proc");

  KernelCgroup(KernelCgroup&& other) noexcept;
  KernelCgroup& operator=(KernelCgroup&& other) noexcept;
  KernelCgroup(const KernelCgroup&) = delete;
  KernelCgroup& operator=(const KernelCgroup&) = delete;
  ~KernelCgroup();

  [[nodiscard]] int version() const noexcept { return version_; }
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }
  [[nodiscard]] std::string procs_file() const { return dir_ + "/cgroup.procs"; }
  [[nodiscard]] std::uint64_t limit_bytes() const noexcept { return limit_; }

  // Moves a process in (the watchdog does this for the kernel only when it could not start
  // it inside: see enter_cgroup.hpp).
  void add(pid_t pid) const;
  // After the kernel died: kills whatever it left in the cgroup (orphaned workers the
  // manager would kill with the process group anyway), waits for them, removes the
  // directory. Returns "" on success, else what went wrong.
  std::string remove();

 private:
  KernelCgroup(int version, std::string dir, std::uint64_t limit)
      : version_(version), dir_(std::move(dir)), limit_(limit) {}

  int version_ = 0;
  std::string dir_;  // empty once removed or moved from
  std::uint64_t limit_ = 0;
};

// Removes cgroups left by watchdogs that died without removing theirs (SIGKILL), among the
// siblings of a new one: "kernel-watchdog-PID" whose PID is gone and that hold nothing.
int sweep_stale_cgroups(const std::string& parent_dir);

}  // namespace kwd::platform::linux_cgroup
