#pragma once

#include <spdlog/sinks/sink.h>

#include <memory>

namespace kwd::platform {

// The service manager's own log, when this process's stderr is connected to it: on Linux,
// systemd's journal ($JOURNAL_STREAM names the stderr it gave us), reached through
// libsystemd's sd_journal_sendv, loaded with dlopen only then, so that each record keeps its
// LogFields as journal fields (KERNEL_ID=, CAUSE=, REPORT=) and its level as PRIORITY=.
// Null when there is none (a terminal, a file, launchd's log paths, no libsystemd): the
// caller logs text to stderr, which a service manager captures line by line anyway.
std::shared_ptr<spdlog::sinks::sink> service_log_sink();

}  // namespace kwd::platform
