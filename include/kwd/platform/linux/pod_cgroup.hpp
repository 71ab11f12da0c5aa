#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kwd::platform::linux_proc {

// Where a process sits in Kubernetes, as its cgroup path says: kubelet names a pod's cgroup
// after its QoS class and UID, and the container runtime names the container's below it.
//   cgroupfs driver: /kubepods/burstable/pod<uid>/<container id>        (guaranteed: no QoS dir)
//                    /kubepods/besteffort/pod<uid>/crio-<id>
//   systemd driver:  /kubepods.slice/kubepods-burstable.slice/
//                      kubepods-burstable-pod<uid, '-' written '_'>.slice/cri-containerd-<id>.scope
//                    (crio-<id>.scope, docker-<id>.scope; guaranteed: kubepods-pod<uid>.slice)
// The same on cgroup v1 (each hierarchy) and v2, wherever kubelet's --cgroup-root puts
// kubepods, and seen from another cgroup namespace ("/../../kubepods-…").
struct PodCgroup {
  std::string pod_uid;         // as the API writes it: dashes, lower case
  std::string qos_class;       // Guaranteed, Burstable or BestEffort
  std::string driver;          // cgroupfs or systemd
  std::string container_id;    // "" when the path ends at the pod itself
  std::string runtime;         // containerd, cri-o, docker; "" when the name does not say
  std::string pod_path;        // the pod's cgroup path (a prefix of the one parsed)
  std::string container_path;  // the container's; "" without a container
  // The runtime's monitor (CRI-O's conmon), not a container's process.
  bool monitor = false;
};

// Nullopt when the path is not a pod's, or a part of it is not what kubelet writes.
std::optional<PodCgroup> parse_pod_cgroup(std::string_view cgroup_path);

}  // namespace kwd::platform::linux_proc
