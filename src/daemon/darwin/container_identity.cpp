#include "kwd/daemon/container_identity.hpp"

// Kubernetes nodes are Linux: no process here is in a pod's container.

namespace kwd::daemon {

std::optional<ContainerIdentity> container_of_process(pid_t, const NodeOptions&) {
  return std::nullopt;
}

ContainerMemory container_memory(const ContainerIdentity&) {
  return {};
}

}  // namespace kwd::daemon
