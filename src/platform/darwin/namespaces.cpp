#include "kwd/platform/namespaces.hpp"

#include <stdexcept>

// macOS has no network namespaces: every process shares the one network.

namespace kwd::platform {

std::optional<std::uint64_t> net_namespace_of(pid_t) {
  return std::nullopt;
}
std::optional<std::uint64_t> own_net_namespace() {
  return std::nullopt;
}

NetNamespaceEntered::NetNamespaceEntered(pid_t) {
  throw std::runtime_error("network namespaces need Linux");
}

NetNamespaceEntered::~NetNamespaceEntered() = default;

std::string enter_cgroup_namespace_of(pid_t) {
  return "";
}

}  // namespace kwd::platform
