#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kwd::platform {

// Runs argv (argv[0] a path) with no input and its output discarded, and waits for it up to
// `limit` (then kills it). Its exit status, or nullopt when it could not be run, was killed by
// a signal or ran past the limit.
std::optional<int> exit_status_of_quiet_run(const std::vector<std::string>& argv,
                                            std::chrono::milliseconds limit);

}  // namespace kwd::platform
