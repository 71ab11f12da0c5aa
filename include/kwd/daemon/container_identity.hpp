#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kwd::daemon {

// Where the node's daemon finds the kubelet's records, and /proc.
struct NodeOptions {
  std::filesystem::path kubelet_root = "/var/lib/kubelet";
  std::string proc_root = "/proc";
};

// The container a kernel runs in, on a Kubernetes node: its pod and container from the
// cgroup path (kubelet's naming), the names from the kubelet's records on the node.
struct ContainerIdentity {
  std::string pod_uid;
  std::string namespace_name;  // "" when the kubelet's records do not say
  std::string pod_name;        // ""  likewise
  std::string container_id;
  std::string container_name;  // "" likewise
  std::string runtime;         // containerd, cri-o, docker, "" (the cgroup name does not say)
  std::string qos_class;
  std::string cgroup_driver;
  int cgroup_version = 0;
  std::string container_cgroup;      // the memory hierarchy's path of the container
  std::string container_cgroup_dir;  // its directory here ("" when not mounted here)
  std::string pod_cgroup_dir;
  std::string names_from;  // where the names came from, in words

  // "namespace/pod" as far as known: what a person or a log line calls it.
  [[nodiscard]] std::string pod_ref() const;
  // The report's "kubernetes" section, without the memory facts.
  [[nodiscard]] nlohmann::json to_json() const;
};

// The container of process `pid`; nullopt when it is not in a pod's container (a process of
// the node itself, or a runtime's monitor).
std::optional<ContainerIdentity> container_of_process(pid_t pid, const NodeOptions& node);

// The container's memory as its cgroups tell it now: limits of container and pod, the OOM
// kills counted in the container's cgroup, whether the kernel kills the whole group
// (memory.oom.group, cgroup v2) and how many processes the container still holds.
struct ContainerMemory {
  std::optional<std::int64_t> container_limit;
  std::optional<std::int64_t> pod_limit;
  std::optional<std::int64_t> oom_kills;  // memory.events oom_kill / memory.oom_control
  std::optional<bool> oom_group;          // nullopt: v1, which has no group kill
  std::optional<std::int64_t> processes_left;
};
ContainerMemory container_memory(const ContainerIdentity& container);

}  // namespace kwd::daemon
