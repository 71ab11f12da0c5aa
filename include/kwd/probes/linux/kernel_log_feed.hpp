#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "kwd/probes/linux/kernel_log.hpp"
#include "kwd/probes/linux/oom_kill_count.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// The kernel log's OOM-killer lines, read from one /dev/kmsg descriptor for the whole process
// (a HostSources source: every watched kernel's OomKillerProbe reads it). The descriptor is
// non-blocking and starts at the log's end; what arrives is read when a reader asks and the
// last read is older than the interval it gives, or at once when it must (a kernel's death).
// Only OOM-killer lines are kept, the newest kKept of them, each numbered so that every
// reader follows them with a cursor of its own.
//
// Beside the lines, the feed keeps the machine's count of OOM kills (OomKillCount) against
// the "Killed process" lines it has read: the kernel counts a kill, signals the victim and
// only then logs the line, so at a SIGKILL's reap a count ahead of the lines read says that a
// victim's line is still on its way, and a count level with them says the OOM killer killed
// no one whose line is not here (no need to wait for the log at all).
class KernelLogFeed {
 public:
  explicit KernelLogFeed(const std::string& path = "/dev/kmsg",
                         const std::string& vmstat_path = "/proc/vmstat");

  struct Entry {
    std::uint64_t number = 0;  // 1, 2, 3… in the order read
    OomLine oom;
    std::string message;
  };

  [[nodiscard]] bool valid() const { return fd_.valid(); }
  [[nodiscard]] const std::string& problem() const { return problem_; }  // when not valid
  [[nodiscard]] int fd() const { return fd_.get(); }

  // Reads what the kernel logged since the last read, if that read is older than
  // `min_age_ms` (0: now, whatever the age).
  void read_new(std::int64_t min_age_ms = 0);

  // The cursor of a reader that wants only what comes from now on.
  [[nodiscard]] std::uint64_t end() const { return next_number_; }
  // Calls f(entry) for each entry after `cursor`, oldest first, and moves the cursor past
  // them; returns how many entries the reader missed because newer ones had pushed them out.
  template <typename F>
  std::uint64_t follow(std::uint64_t& cursor, F&& f) const {
    std::uint64_t missed = 0;
    const std::uint64_t first = entries_.empty() ? next_number_ : entries_.front().number;
    if (cursor < first) {
      missed = first - cursor;
      cursor = first;
    }
    for (auto it = entries_.begin() + static_cast<std::ptrdiff_t>(cursor - first);
         it != entries_.end(); ++it)
      f(*it);
    cursor = next_number_;
    return missed;
  }
  // Records the kernel's ring overwrote before they could be read, since this feed opened.
  [[nodiscard]] std::int64_t records_lost() const { return records_lost_; }
  // The first read that failed other than for want of news or an overwritten record ("" when
  // none did): the lines after it may be missing.
  [[nodiscard]] const std::string& read_failure() const { return read_failure_; }

  // "Killed process" lines read since the feed opened.
  [[nodiscard]] std::int64_t kill_lines_read() const { return kill_lines_read_; }
  // The OOM kills the kernel has counted since the feed opened, read now, comparable with
  // kill_lines_read(); nullopt when the machine's count cannot be read.
  [[nodiscard]] std::optional<std::int64_t> oom_kills_counted();
  [[nodiscard]] bool counts_oom_kills() const { return count_base_.has_value(); }

  static constexpr std::size_t kKept = 256;

 private:
  util::UniqueFd fd_;
  std::string problem_;
  std::deque<Entry> entries_;
  std::uint64_t next_number_ = 1;
  std::int64_t records_lost_ = 0;
  std::string read_failure_;
  std::int64_t last_read_ms_ = -1;

  // Keeps the count's base current at the periodic reads: kills counted before the feed
  // opened whose lines it read anyway, and kills whose line never came (the ring overwrote
  // it) would otherwise make every later reap wait for a line.
  void settle_count();

  OomKillCount count_;
  std::optional<std::int64_t> count_base_;  // the machine's count that kill_lines_read_ matches
  std::int64_t kill_lines_read_ = 0;
  std::int64_t lines_due_at_last_settle_ = 0;
};

}  // namespace kwd::probes::linux_proc
