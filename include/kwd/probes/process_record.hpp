#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kwd/util/unique_fd.hpp"

namespace kwd::probes {

// Another process, read as one: everything a record answers describes the process that was
// `open`ed, not one that took its pid meanwhile (Linux: its /proc directory is held open;
// macOS: its start time is read again and compared). Answers are empty once it is gone.
// Platform folders implement it.
class ProcessRecord {
 public:
  static std::optional<ProcessRecord> open(pid_t pid);

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] uid_t owner() const { return owner_; }  // effective user
  [[nodiscard]] std::vector<std::string> argv() const;
  // As the process was started (later changes are not seen).
  [[nodiscard]] std::vector<std::string> environment() const;

  struct Lineage {
    pid_t ppid = 0;
    std::uint64_t start_time = 0;  // distinguishes a reused pid; units are the platform's
    // A fork that has not exec'd (a worker of a multiprocessing pool or DataLoader, a
    // subprocess on its way to exec): it runs its parent's program, not one of its own.
    // Linux knows it (PF_FORKNOEXEC); macOS reads false.
    bool forked_without_exec = false;
    std::int64_t started_at_ms = -1;  // its start on the wall clock; -1 when not known
  };
  [[nodiscard]] std::optional<Lineage> lineage() const;
  [[nodiscard]] std::filesystem::path cwd() const;  // empty when not known

 private:
  explicit ProcessRecord(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  uid_t owner_ = static_cast<uid_t>(-1);
  util::UniqueFd dir_;  // Linux: /proc/PID
  Lineage opened_;      // macOS: as read when opened
};

// The start time of process `pid` (Lineage::start_time); nullopt when it cannot be read (gone,
// or not ours to read: a descriptor limit, hidepid). What tells a process from a later one
// that took its pid.
inline std::optional<std::uint64_t> start_time_of(pid_t pid) {
  const auto record = ProcessRecord::open(pid);
  const auto lineage = record ? record->lineage() : std::nullopt;
  if (!lineage) return std::nullopt;
  return lineage->start_time;
}

// The pid of every process in the table (this one's included); empty when unreadable.
std::vector<pid_t> list_processes();

}  // namespace kwd::probes
