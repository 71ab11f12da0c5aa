#include "kwd/daemon/service_notify.hpp"

namespace kwd::daemon {

// launchd has no readiness or watchdog protocol: KeepAlive restarts a daemon that exits.
void notify_service(std::string_view) {}

std::optional<std::chrono::milliseconds> service_watchdog_interval() {
  return std::nullopt;
}

}  // namespace kwd::daemon
