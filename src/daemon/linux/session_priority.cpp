#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "kwd/daemon/scheduling_priority.hpp"
#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::daemon {
namespace {

bool autogroup_enabled() {
  // Absent: a kernel built without autogroup.
  const auto flag =
      platform::linux_proc::read_small_file("/proc/sys/kernel/sched_autogroup_enabled");
  return flag && !flag->empty() && flag->front() == '1';
}

// "/autogroup-17 nice 0": the session's nice value.
std::optional<int> session_nice() {
  const auto text = platform::linux_proc::read_small_file("/proc/self/autogroup");
  if (!text) return std::nullopt;
  const auto at = text->rfind("nice ");
  if (at == std::string::npos) return std::nullopt;
  int value = 0;
  const char* first = text->data() + at + 5;
  if (std::from_chars(first, text->data() + text->size(), value).ec != std::errc{})
    return std::nullopt;
  return value;
}

}  // namespace

std::string raise_session_priority(int wanted) {
  if (wanted >= 0 || !autogroup_enabled()) return {};
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, 0);  // what was granted, maybe less than asked
  if (errno != 0 || nice >= 0) return {};
  if (::getsid(0) != ::getpid())
    return fmt::format(
        "session priority left as it is: the kernel's autogroup scheduling shares the CPU "
        "between sessions first, and this daemon is not its session's leader (run it as a "
        "service, or under setsid, for nice {} to count against kernels' sessions)",
        nice);
  if (const auto current = session_nice(); current && *current <= nice)
    return fmt::format("session priority: nice {} kept (autogroup scheduling is on)", *current);
  const std::string value = std::to_string(nice);
  // Without CAP_SYS_ADMIN, one such change on the whole machine per tenth of a second: a few
  // daemons started together (one per user) take turns.
  if (util::UniqueFd fd(::open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC)); fd) {
    for (int attempt = 0;; ++attempt) {
      if (::write(fd.get(), value.data(), value.size()) == static_cast<ssize_t>(value.size()))
        return fmt::format("session priority: nice {} (autogroup scheduling is on)", nice);
      if (errno != EAGAIN || attempt == 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(110));
    }
  }
  return fmt::format("session priority left as it is: /proc/self/autogroup: {}",
                     std::strerror(errno));
}

}  // namespace kwd::daemon
