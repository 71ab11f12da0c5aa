#include "kwd/probes/linux/process_neighbours.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kwd/probes/linux/procfs.hpp"
#include "kwd/probes/process_identity.hpp"
#include "kwd/protocol/kernel_argv.hpp"

namespace kwd::probes::linux_proc {
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

namespace {

std::vector<std::string> argv_of(pid_t pid) {
  std::vector<std::string> argv;
  const auto text = linux_proc::read_small_file("/proc/" + std::to_string(pid) + "/cmdline");
  if (!text) return argv;
  std::size_t start = 0;
  while (start < text->size()) {
    const auto end = std::min(text->find('\0', start), text->size());
    argv.emplace_back(*text, start, end - start);
    start = end + 1;
  }
  return argv;
}

// `kernel-watchdog run ...` / `smoke ...`: the parent that launched the kernel and watches it.
bool launched_by_watchdog(pid_t pid) {
  const auto stat = linux_proc::read_small_file("/proc/" + std::to_string(pid) + "/stat");
  const auto parsed = stat ? linux_proc::parse_proc_stat(*stat) : std::nullopt;
  if (!parsed || parsed->ppid <= 1) return false;
  const auto parent = argv_of(parsed->ppid);
  if (parent.size() < 2 || std::filesystem::path(parent[0]).filename() != "kernel-watchdog")
    return false;
  return std::any_of(parent.begin() + 1, parent.end(),
                     [](const std::string& a) { return a == "run" || a == "smoke"; });
}

}  // namespace

ProcessIdentity identify_process(pid_t pid) {
  ProcessIdentity id;
  id.command_line = linux_proc::command_line_of(pid);
  if (const auto file = protocol::find_connection_file(argv_of(pid))) {
    std::filesystem::path path(*file);
    if (path.is_relative()) {
      std::error_code error;
      const auto cwd =
          std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/cwd", error);
      if (!error) path = cwd / path;
    }
    id.kernel_id = protocol::kernel_id_from_connection_file(path.string());
    id.notebook = notebook_of_kernel(path.string(), pid).path;
    id.watched = launched_by_watchdog(pid);
  }
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

std::string environment_variable(pid_t pid, std::string_view name) {
  const auto text = linux_proc::read_small_file("/proc/" + std::to_string(pid) + "/environ");
  if (!text) return "";
  std::size_t start = 0;
  while (start < text->size()) {
    const auto end = std::min(text->find('\0', start), text->size());
    const std::string_view entry(text->data() + start, end - start);
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
      return std::string(entry.substr(name.size() + 1));
    start = end + 1;
  }
  return "";
}

}  // namespace kwd::probes
