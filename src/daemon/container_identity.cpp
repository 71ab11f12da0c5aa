#include "kwd/daemon/container_identity.hpp"

// What is the same on every platform; finding a process's container is Linux's
// (linux/container_identity.cpp).

namespace kwd::daemon {

std::string ContainerIdentity::pod_ref() const {
  const std::string pod = pod_name.empty() ? "pod " + pod_uid : pod_name;
  return namespace_name.empty() ? pod : namespace_name + "/" + pod;
}

nlohmann::json ContainerIdentity::to_json() const {
  const auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
  };
  return {{"namespace", or_null(namespace_name)},
          {"pod", or_null(pod_name)},
          {"pod_uid", pod_uid},
          {"container", or_null(container_name)},
          {"container_id", container_id},
          {"runtime", or_null(runtime)},
          {"qos_class", or_null(qos_class)},
          {"cgroup_driver", or_null(cgroup_driver)},
          {"cgroup_version", cgroup_version},
          {"container_cgroup", or_null(container_cgroup)},
          {"names_from", or_null(names_from)}};
}

}  // namespace kwd::daemon
