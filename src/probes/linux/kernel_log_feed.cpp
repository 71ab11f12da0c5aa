#include "kwd/probes/linux/kernel_log_feed.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {

KernelLogFeed::KernelLogFeed(const std::string& path, const std::string& vmstat_path)
    : fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)), count_(vmstat_path) {
  if (!fd_) {
    problem_ = "cannot read " + path + " (" + std::strerror(errno) + ")";
    return;
  }
  // What the kernel logged before we came concerns no kernel we watch.
  ::lseek(fd_.get(), 0, SEEK_END);
  // Counted after the seek: a kill counted before it whose line comes after it makes the
  // lines one ahead of the count, which settle_count() takes back (the other order would
  // leave the count one ahead, a line awaited that was skipped).
  count_base_ = count_.read();
}

std::optional<std::int64_t> KernelLogFeed::oom_kills_counted() {
  if (!count_base_) return std::nullopt;
  const auto now = count_.read();
  if (!now) return std::nullopt;
  return *now - *count_base_;
}

void KernelLogFeed::settle_count() {
  const auto counted = oom_kills_counted();
  if (!counted) return;
  const std::int64_t due = *counted - kill_lines_read_;
  std::int64_t settled = 0;
  if (due < 0) {
    settled = due;  // lines of kills counted before the feed opened
  } else if (due > 0 && lines_due_at_last_settle_ > 0) {
    // A line is due a microsecond after its kill is counted: one due a whole period ago too
    // is lost.
    settled = std::min(due, lines_due_at_last_settle_);
  }
  *count_base_ += settled;
  lines_due_at_last_settle_ = due - settled;
}

void KernelLogFeed::read_new(std::int64_t min_age_ms) {
  if (!fd_) return;
  const std::int64_t now = util::steady_ms();
  if (min_age_ms > 0 && last_read_ms_ >= 0 && now - last_read_ms_ < min_age_ms) return;
  last_read_ms_ = now;
  std::array<char, 8192> buf;  // a record is at most 1 KiB of text plus its dictionary
  for (;;) {
    const ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE) {  // the ring overwrote records before we read them
        ++records_lost_;
        continue;
      }
      if (errno != EAGAIN && read_failure_.empty())
        read_failure_ = std::string("read: ") + std::strerror(errno);
      break;  // EAGAIN: nothing more now
    }
    if (n == 0) break;
    const auto record =
        parse_kmsg_record(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    if (!record) continue;
    const auto oom = parse_oom_line(record->message);
    if (!oom) continue;
    if (oom->kind == OomLineKind::killed) ++kill_lines_read_;
    if (entries_.size() == kKept) entries_.pop_front();
    entries_.push_back({next_number_++, *oom, std::string(record->message)});
  }
  // The count is read after the log: a line read is never of a kill not counted yet.
  if (min_age_ms > 0) settle_count();
}

}  // namespace kwd::probes::linux_proc
