#include "kwd/probes/linux/kernel_log_feed.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {

KernelLogFeed::KernelLogFeed(const std::string& path)
    : fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
  if (!fd_) {
    problem_ = "cannot read " + path + " (" + std::strerror(errno) + ")";
    return;
  }
  // What the kernel logged before we came concerns no kernel we watch.
  ::lseek(fd_.get(), 0, SEEK_END);
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
      break;  // EAGAIN: nothing more now
    }
    if (n == 0) break;
    const auto record =
        parse_kmsg_record(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    if (!record) continue;
    const auto oom = parse_oom_line(record->message);
    if (!oom) continue;
    if (entries_.size() == kKept) entries_.pop_front();
    entries_.push_back({next_number_++, *oom, std::string(record->message)});
  }
}

}  // namespace kwd::probes::linux_proc
