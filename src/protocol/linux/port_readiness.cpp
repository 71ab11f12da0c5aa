#include "kwd/protocol/port_readiness.hpp"

#include <sys/stat.h>

#include <charconv>
#include <fstream>
#include <string>

namespace kwd::protocol {
namespace {

constexpr std::string_view kListen = "0A";  // TCP_LISTEN in /proc/net/tcp's "st" column

// Lines of /proc/PID/net/tcp{,6}: "sl local_address rem_address st ...", addresses as
// HEX_IP:HEX_PORT. The kernel's own network namespace is the one that counts.
bool listening_in(const std::string& path, int port, bool& readable) {
  std::ifstream in(path);
  if (!in) return false;
  readable = true;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    // Fields are separated by runs of spaces.
    std::string_view rest(line);
    std::string_view fields[4];
    for (auto& f : fields) {
      const auto start = rest.find_first_not_of(' ');
      if (start == std::string_view::npos) return false;
      rest.remove_prefix(start);
      const auto end = rest.find(' ');
      f = rest.substr(0, end);
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
    }
    if (fields[3] != kListen) continue;
    const auto colon = fields[1].rfind(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view hex = fields[1].substr(colon + 1);
    unsigned value = 0;
    const auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
    if (ec == std::errc() && static_cast<int>(value) == port) return true;
  }
  return false;
}

}  // namespace

PortState port_state(pid_t kernel_pid, const ConnectionInfo& info, int port) {
  if (port <= 0) return PortState::not_yet;
  if (info.transport == Transport::ipc) {
    struct stat st {};
    const std::string path = info.ip + "-" + std::to_string(port);
    return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? PortState::listening
                                                                  : PortState::not_yet;
  }
  const std::string base = "/proc/" + std::to_string(kernel_pid) + "/net/";
  bool readable = false;
  if (listening_in(base + "tcp", port, readable) || listening_in(base + "tcp6", port, readable))
    return PortState::listening;
  return readable ? PortState::not_yet : PortState::cannot_tell;
}

}  // namespace kwd::protocol
