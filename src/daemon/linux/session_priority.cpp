#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "kwd/daemon/scheduling_priority.hpp"
#include "kwd/platform/regular_file.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::daemon {
namespace {

bool autogroup_enabled() {
  util::UniqueFd fd(::open("/proc/sys/kernel/sched_autogroup_enabled", O_RDONLY | O_CLOEXEC));
  if (!fd) return false;  // a kernel built without it
  const auto flag = platform::read_up_to(fd.get(), 16);
  return flag && !flag->empty() && flag->front() == '1';
}

}  // namespace

std::string raise_session_priority() {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, 0);
  if (errno != 0 || nice >= 0 || !autogroup_enabled()) return {};
  if (::getsid(0) != ::getpid())
    return fmt::format(
        "session priority left as it is: the kernel's autogroup scheduling shares the CPU "
        "between sessions first, and this daemon is not its session's leader (run it as a "
        "service, or under setsid, for nice {} to count against kernels' sessions)",
        nice);
  util::UniqueFd fd(::open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC));
  const std::string value = std::to_string(nice);
  if (!fd || ::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size()))
    return fmt::format("session priority left as it is: /proc/self/autogroup: {}",
                       std::strerror(errno));
  return fmt::format("session priority: nice {} (autogroup scheduling is on)", nice);
}

}  // namespace kwd::daemon
