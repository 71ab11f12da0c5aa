#pragma once

#include <sys/types.h>

#include <optional>
#include <string_view>

namespace kwd::util {

// Whether a process with this pid exists, whoever owns it: kill(pid, 0) failing with EPERM
// still means it does. A zombie exists until it is reaped.
bool process_exists(pid_t pid);

// "PREFIX1234..." -> 1234, the pid a watchdog or writer put in the name of something it
// owns (a temporary file, a shim directory, a cgroup), so that what dead owners left can be
// swept; nullopt if `name` does not start with the prefix and a number.
std::optional<pid_t> pid_after_prefix(std::string_view name, std::string_view prefix);

}  // namespace kwd::util
