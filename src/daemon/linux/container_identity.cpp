#include "kwd/daemon/container_identity.hpp"

#include <algorithm>

#include "kwd/daemon/kubelet_records.hpp"
#include "kwd/platform/linux/cgroup_fs.hpp"
#include "kwd/platform/linux/pod_cgroup.hpp"
#include "kwd/platform/linux/procfs.hpp"

namespace kwd::daemon {
namespace {

namespace lp = platform::linux_proc;

// `dir` is the directory of cgroup `path`; the directory of its ancestor `prefix` is `dir`
// with the same tail taken off.
std::string ancestor_dir(const std::string& dir, const std::string& path,
                         const std::string& prefix) {
  if (prefix.empty() || !path.starts_with(prefix)) return "";
  const std::string tail = path.substr(prefix.size());
  if (!dir.ends_with(tail)) return "";
  return dir.substr(0, dir.size() - tail.size());
}

std::optional<std::int64_t> number_in(const std::string& file) {
  const auto text = lp::read_small_file(file);
  return text ? lp::parse_number(*text) : std::nullopt;
}

std::optional<std::int64_t> limit_in(const std::string& file) {
  const auto text = lp::read_small_file(file);
  if (!text) return std::nullopt;
  // "max" / v1's page-counter maximum: no limit, said as -1 so that the report can tell
  // "unlimited" from "unknown".
  return lp::parse_memory_limit(*text).value_or(-1);
}

// Processes in a cgroup and the cgroups below it (a container may make its own).
std::int64_t processes_in(const std::filesystem::path& dir, int depth) {
  const auto procs = lp::read_small_file((dir / "cgroup.procs").string());
  if (!procs) return -1;
  std::int64_t n = std::count(procs->begin(), procs->end(), '\n');
  if (depth >= 4) return n;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_directory(ec) && !entry.is_symlink(ec))
      n += std::max<std::int64_t>(0, processes_in(entry.path(), depth + 1));
  return n;
}

}  // namespace

std::optional<ContainerIdentity> container_of_process(pid_t pid, const NodeOptions& node) {
  const auto memory = lp::memory_cgroup_of(pid, node.proc_root);
  std::optional<lp::PodCgroup> pod;
  if (memory) pod = lp::parse_pod_cgroup(memory->path);
  if (!pod) {
    // No memory controller that names a pod: the unified hierarchy may still.
    const auto text = lp::read_small_file(node.proc_root + "/" + std::to_string(pid) + "/cgroup");
    if (!text) return std::nullopt;
    const auto membership = lp::parse_proc_cgroup(*text);
    if (membership.v2) pod = lp::parse_pod_cgroup(*membership.v2);
    if (!pod) return std::nullopt;
  }
  if (pod->monitor || pod->container_id.empty()) return std::nullopt;
  ContainerIdentity id;
  id.pod_uid = pod->pod_uid;
  id.container_id = pod->container_id;
  id.runtime = pod->runtime;
  id.qos_class = pod->qos_class;
  id.cgroup_driver = pod->driver;
  id.container_cgroup = pod->container_path;
  if (memory && lp::parse_pod_cgroup(memory->path)) {
    id.cgroup_version = memory->version;
    id.container_cgroup_dir = ancestor_dir(memory->dir, memory->path, pod->container_path);
    id.pod_cgroup_dir = ancestor_dir(memory->dir, memory->path, pod->pod_path);
  }
  const PodRecords records = read_pod_records(node.kubelet_root, id.pod_uid);
  id.namespace_name = records.namespace_name;
  id.pod_name = records.pod_name;
  const auto mountinfo =
      lp::read_small_file(node.proc_root + "/" + std::to_string(pid) + "/mountinfo");
  if (mountinfo) id.container_name = container_name_from_mountinfo(*mountinfo, id.pod_uid);
  if (id.container_name.empty() && records.containers.size() == 1)
    id.container_name = records.containers.front();
  if (!id.pod_name.empty() || !id.namespace_name.empty() || !id.container_name.empty())
    id.names_from = "the kubelet's pod directory " +
                    (node.kubelet_root / "pods" / id.pod_uid).string() +
                    (mountinfo && !id.container_name.empty() ? " and the container's mounts" : "");
  return id;
}

ContainerMemory container_memory(const ContainerIdentity& c) {
  ContainerMemory m;
  if (c.container_cgroup_dir.empty()) return m;
  const std::string& dir = c.container_cgroup_dir;
  if (c.cgroup_version == 2) {
    m.container_limit = limit_in(dir + "/memory.max");
    if (!c.pod_cgroup_dir.empty()) m.pod_limit = limit_in(c.pod_cgroup_dir + "/memory.max");
    if (const auto events = lp::read_small_file(dir + "/memory.events")) {
      const auto keyed = lp::parse_flat_keyed(*events);
      if (const auto it = keyed.find("oom_kill"); it != keyed.end()) m.oom_kills = it->second;
    }
    if (const auto group = number_in(dir + "/memory.oom.group")) m.oom_group = *group != 0;
  } else {
    m.container_limit = limit_in(dir + "/memory.limit_in_bytes");
    if (!c.pod_cgroup_dir.empty())
      m.pod_limit = limit_in(c.pod_cgroup_dir + "/memory.limit_in_bytes");
    if (const auto control = lp::read_small_file(dir + "/memory.oom_control")) {
      const auto keyed = lp::parse_flat_keyed(*control);
      if (const auto it = keyed.find("oom_kill"); it != keyed.end()) m.oom_kills = it->second;
    }
  }
  if (const auto n = processes_in(dir, 0); n >= 0) m.processes_left = n;
  return m;
}

}  // namespace kwd::daemon
