#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kwd/probes/probe.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// The kernel and every descendant (multiprocessing workers, data loaders): RSS and thread
// counts at full rate from /proc/PID/stat (kept open and re-read with pread), swap from
// /proc/PID/status and PSS from /proc/PID/smaps_rollup at a lower rate. Descendants are
// found by a /proc scan, done only when /proc/loadavg says a process was created since
// the last one.
class ProcessTreeProbe final : public Probe {
 public:
  explicit ProcessTreeProbe(const ProbeOptions& options, std::string proc_root = "/proc");

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;

  [[nodiscard]] std::vector<pid_t> members() const;

 private:
  struct Member {
    util::UniqueFd stat_fd;
    std::uint64_t start_time = 0;  // guards against pid reuse
    std::string comm;
    std::int64_t rss = 0;
    std::int64_t peak_rss = 0;
    std::int64_t swap = 0;
    std::int64_t pss = -1;
    std::int64_t threads = 0;
  };

  void rescan_if_needed(std::int64_t now_ms);
  void rescan();
  bool read_stat(pid_t pid, Member& m);
  void read_slow(pid_t pid, Member& m);

  pid_t root_;
  std::string proc_;
  std::int64_t page_size_;
  std::int64_t rescan_interval_ms_;
  std::int64_t slow_interval_ms_;
  std::int64_t last_rescan_ms_ = -1;
  std::int64_t last_slow_ms_ = -1;
  std::string last_created_pid_;
  util::UniqueFd loadavg_fd_;
  std::unordered_map<pid_t, Member> members_;
  std::unordered_map<pid_t, std::string> departed_;  // descendants seen and gone, by comm
  bool available_ = true;
  std::string reason_;
};

}  // namespace kwd::probes::linux_proc
