#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::daemon {

// What the kubelet keeps on the node about a pod, read without asking the API server (the
// daemon holds no cluster credentials): its directory /var/lib/kubelet/pods/<uid>/.
//   etc-hosts                    the pod's /etc/hosts, written by the kubelet; its own entry
//                                (the last, before any HostAliases) names the pod's hostname,
//                                which is the pod's name unless spec.hostname says otherwise
//   containers/<name>/<id>       each container's termination-log file, bind-mounted into it
//                                at /dev/termination-log
//   volumes/kubernetes.io~projected/kube-api-access-*/namespace
//                                the service-account volume: the pod's namespace (absent
//                                when the pod does not mount a token)
struct PodRecords {
  std::string namespace_name;           // "" when not recorded
  std::string pod_name;                 // "" when not recorded
  std::vector<std::string> containers;  // the names under containers/
};
PodRecords read_pod_records(const std::filesystem::path& kubelet_root, const std::string& pod_uid);

// The pod's hostname from the etc-hosts the kubelet wrote; "" for another file (a
// host-network pod's copy of the node's /etc/hosts says so in its first line).
std::string pod_name_from_etc_hosts(std::string_view text);
// The container's name from its process's mountinfo: the source of its /dev/termination-log
// is .../pods/<uid>/containers/<name>/<id>. "" when no such mount is there.
std::string container_name_from_mountinfo(std::string_view mountinfo, std::string_view pod_uid);
// A Kubernetes object name as the API allows it (DNS label or subdomain, at most 253 bytes):
// safe as a directory name and as a label value.
bool is_object_name(std::string_view name);

}  // namespace kwd::daemon
