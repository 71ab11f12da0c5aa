#include "kwd/daemon/scheduling_priority.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kwd::daemon {
namespace {

// The lowest nice value an unprivileged process may take: RLIMIT_NICE's soft limit counts
// down from 20 (Linux only; elsewhere only a privileged process goes below its own).
int lowest_allowed_nice(int current) {
#ifdef RLIMIT_NICE
  rlimit limit{};
  if (::getrlimit(RLIMIT_NICE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    return std::min(current, 20 - static_cast<int>(limit.rlim_cur));
#endif
  return current;
}

}  // namespace

std::string raise_scheduling_priority(int wanted) {
  errno = 0;
  const int current = ::getpriority(PRIO_PROCESS, 0);
  if (current == -1 && errno != 0)
    return fmt::format("scheduling priority left as it is: getpriority: {}", std::strerror(errno));
  if (wanted >= current)
    return fmt::format("scheduling priority: nice {} (--nice {} asks for no more)", current,
                       wanted);
  if (::setpriority(PRIO_PROCESS, 0, wanted) == 0)
    return fmt::format("scheduling priority: nice {} (was {})", wanted, current);
  const int refused = errno;
  if (const int floor = lowest_allowed_nice(current);
      floor < current && ::setpriority(PRIO_PROCESS, 0, floor) == 0)
    return fmt::format(
        "scheduling priority: nice {} (was {}; RLIMIT_NICE allows no "
        "lower than {}, --nice asked for {})",
        floor, current, floor, wanted);
  return fmt::format(
      "scheduling priority: nice {} kept ({} for nice {}: a higher "
      "priority needs root, CAP_SYS_NICE or RLIMIT_NICE); under load "
      "new kernels may be found later",
      current, std::strerror(refused), wanted);
}

}  // namespace kwd::daemon
