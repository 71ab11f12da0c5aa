#include "kwd/daemon/service_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kwd/util/unique_fd.hpp"

namespace kwd::daemon {

void notify_service(std::string_view state) {
  const char* socket_path = std::getenv("NOTIFY_SOCKET");
  if (socket_path == nullptr || *socket_path == '\0') return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::size_t length = std::strlen(socket_path);
  if (length >= sizeof addr.sun_path) return;
  std::memcpy(addr.sun_path, socket_path, length);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // an abstract socket
  util::UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return;
  const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);
  ::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
           reinterpret_cast<const sockaddr*>(&addr), size);
}

std::optional<std::chrono::milliseconds> service_watchdog_interval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr) return std::nullopt;
  long long value = 0;
  const auto [end, ec] = std::from_chars(usec, usec + std::strlen(usec), value);
  if (ec != std::errc() || value <= 0) return std::nullopt;
  // Only for us: WATCHDOG_PID, when set, names the process that must ping.
  if (const char* pid = std::getenv("WATCHDOG_PID"); pid != nullptr && std::atol(pid) != ::getpid())
    return std::nullopt;
  return std::chrono::milliseconds(std::max<long long>(value / 2000, 1));
}

}  // namespace kwd::daemon
