#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace kwd::daemon {

// Tells the service manager how the daemon is (systemd's notify protocol: a datagram to
// $NOTIFY_SOCKET, e.g. "READY=1", "WATCHDOG=1", "STOPPING=1"); a no-op when not started by
// one, and on platforms without it.
void notify_service(std::string_view state);
// How often to send "WATCHDOG=1" (half of $WATCHDOG_USEC), when the manager asks for it.
std::optional<std::chrono::milliseconds> service_watchdog_interval();

}  // namespace kwd::daemon
