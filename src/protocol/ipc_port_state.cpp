#include <sys/stat.h>

#include <string>

#include "kwd/protocol/port_readiness.hpp"

namespace kwd::protocol {

PortState ipc_port_state(const ConnectionInfo& info, int port) {
  struct stat st {};
  const std::string path = info.ip + "-" + std::to_string(port);
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? PortState::listening
                                                                : PortState::not_yet;
}

}  // namespace kwd::protocol
