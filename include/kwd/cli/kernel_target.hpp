#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace kwd::cli {

// The kernel process a user named: a pid (a `kernel-watchdog run` launcher's pid stands for
// the kernel it started, as Jupyter only sees the launcher), a kernel id, or a connection
// file (path or file name) found in a running process's command line. nullopt, with `why`,
// when none matches.
std::optional<pid_t> find_kernel_process(const std::string& target, std::string& why);

}  // namespace kwd::cli
