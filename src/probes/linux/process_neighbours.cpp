#include "kwd/probes/linux/process_neighbours.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/probes/process_identity.hpp"
#include "kwd/probes/process_record.hpp"

namespace kwd::probes::linux_proc {

using platform::linux_proc::parse_statm_resident;
using platform::linux_proc::read_small_file;

namespace {

constexpr std::size_t kMaxScanned = 512;

std::string pid_file(const std::string& proc_root, pid_t pid, const char* name) {
  return proc_root + "/" + std::to_string(pid) + "/" + name;
}

}  // namespace

std::string command_line_of(pid_t pid, const std::string& proc_root, std::size_t max_bytes) {
  auto text = read_small_file(pid_file(proc_root, pid, "cmdline"));
  if (!text) return "";
  while (!text->empty() && text->back() == '\0')
    text->pop_back();
  std::replace(text->begin(), text->end(), '\0', ' ');
  // Whatever the process put there is shown to people: no control characters.
  std::replace_if(
      text->begin(), text->end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }, '?');
  if (text->size() > max_bytes) {
    text->resize(max_bytes);
    *text += "…";
  }
  return *text;
}

std::vector<Neighbour> cgroup_neighbours(const std::string& cgroup_dir,
                                         const KernelProcesses& kernel, std::size_t keep,
                                         const std::string& proc_root) {
  std::vector<Neighbour> out;
  const auto procs = read_small_file(cgroup_dir + "/cgroup.procs");
  if (!procs) return out;
  static const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  std::size_t scanned = 0;
  const char* p = procs->data();
  const char* end = p + procs->size();
  while (p < end && scanned < kMaxScanned) {
    pid_t pid = 0;
    const auto [next, ec] = std::from_chars(p, end, pid);
    p = next + 1;
    if (ec != std::errc() || pid <= 0 || kernel.belongs(pid)) continue;
    ++scanned;
    Neighbour n;
    n.pid = pid;
    if (const auto statm = read_small_file(pid_file(proc_root, pid, "statm")))
      if (const auto resident = parse_statm_resident(*statm)) n.rss = *resident * page;
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rss > b.rss; });
  if (out.size() > keep) out.resize(keep);
  for (auto& n : out)
    n.command_line = command_line_of(n.pid, proc_root);
  return out;
}

nlohmann::json neighbours_to_json(const std::vector<Neighbour>& neighbours) {
  auto out = nlohmann::json::array();
  for (const auto& n : neighbours)
    out.push_back({{"pid", n.pid},
                   {"rss", n.rss >= 0 ? nlohmann::json(n.rss) : nlohmann::json(nullptr)},
                   {"command_line", n.command_line}});
  return out;
}

}  // namespace kwd::probes::linux_proc

namespace kwd::probes {

ProcessIdentity identify_process(pid_t pid) {
  ProcessIdentity id;
  id.command_line = linux_proc::command_line_of(pid);
  if (const auto record = ProcessRecord::open(pid)) identify_kernel(*record, id);
  // The frameworks by the files they map: a few MiB of text for a framework process, read
  // once at a death, for the few processes that shared the GPU.
  const auto maps = linux_proc::read_small_file("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) return id;
  constexpr std::pair<const char*, const char*> kMarkers[] = {
      {"/jaxlib/", "jax"},
      {"/tensorflow/", "tensorflow"},
      {"/torch/lib/", "torch"},
      {"/cupy", "cupy"},
  };
  for (const auto& [marker, name] : kMarkers)
    if (maps->find(marker) != std::string::npos) id.frameworks.emplace_back(name);
  return id;
}

}  // namespace kwd::probes
