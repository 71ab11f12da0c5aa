#include <algorithm>
#include <set>

#include "kwd/diagnosis/findings.hpp"
#include "kwd/diagnosis/oom_message.hpp"

namespace kwd::diagnosis {
namespace {

// The whole line of a hit (its excerpt is shortened; the numbers may be past the cut).
std::string line_of(const ReportView& view, const SignatureHit& hit) {
  const auto text = view.text(hit.pointer);
  if (!text || hit.offset >= text->size()) return hit.excerpt;
  const auto end = text->find('\n', hit.offset);
  return text->substr(hit.offset, end == std::string::npos ? std::string::npos : end - hit.offset);
}

}  // namespace

std::string GpuNeighbour::label(std::size_t command_columns) const {
  std::string out = "pid " + std::to_string(pid);
  if (!notebook.empty() || !kernel_id.empty()) {
    out += notebook.empty() ? " (the Jupyter kernel " + kernel_id.substr(0, 8)
                            : " (the kernel of " + notebook;
    return out + (watched ? ", watched by kernel-watchdog)" : ")");
  }
  if (command_line.empty()) return out;
  std::string command = command_line;
  if (command.size() > command_columns) command = command.substr(0, command_columns) + "…";
  return out + " (" + command + ")";
}

std::optional<GpuContention> read_gpu_contention(const ReportView& view,
                                                 const std::vector<SignatureHit>& hits) {
  GpuContention c;
  const auto ours = kernel_pids(view);
  // The framework's own numbers, from the most recent GPU-OOM line that has any.
  for (auto h = hits.rbegin(); h != hits.rend(); ++h) {
    if (h->signature->supports != cause(CauseId::gpu_out_of_memory).id) continue;
    const auto n = parse_oom_numbers(line_of(view, *h));
    if (!n.any()) continue;
    c.requested = n.requested;
    c.capacity = n.capacity;
    c.free = n.free;
    c.kernel_held = n.this_process;
    c.message_pointer = h->pointer;
    c.message_line = h->line;
    for (const auto& holder : n.holders)
      if (!ours.contains(holder.pid)) {
        GpuNeighbour named;
        named.pid = holder.pid;
        named.bytes = holder.bytes;
        named.pointer = h->pointer;
        c.others.push_back(std::move(named));
      }
    break;
  }
  // NVML's view: the other processes on the devices the kernel used (or on every device
  // when the kernel's own use was not seen).
  std::set<std::int64_t> our_devices;
  std::int64_t kernel_gpu = 0;
  for (const auto& p : view.array("/gpu/processes")) {
    const ReportView proc(p);
    if (!ours.contains(proc.integer("/pid").value_or(0))) continue;
    our_devices.insert(proc.integer("/device").value_or(0));
    kernel_gpu += std::max<std::int64_t>(proc.integer("/used_memory").value_or(0), 0);
  }
  if (!c.kernel_held && kernel_gpu > 0) c.kernel_held = kernel_gpu;
  // The watchdog lists others under other_processes; other writers (and older fact sets)
  // list every process on the device under processes.
  std::vector<std::pair<const nlohmann::json*, std::string>> listed;
  for (const char* where : {"/gpu/other_processes", "/gpu/processes"}) {
    const auto& items = view.array(where);
    for (std::size_t i = 0; i < items.size(); ++i)
      listed.emplace_back(&items[i], std::string(where) + "/" + std::to_string(i));
  }
  for (const auto& [item, pointer] : listed) {
    const ReportView o(*item);
    const auto pid = o.integer("/pid").value_or(0);
    const auto device = o.integer("/device").value_or(0);
    if (pid == 0 || ours.contains(pid)) continue;
    if (!our_devices.empty() && !our_devices.contains(device)) continue;
    GpuNeighbour n;
    n.pid = pid;
    n.bytes = o.integer("/used_memory").value_or(0);
    n.command_line = o.text("/command_line").value_or("");
    n.pointer = pointer;
    for (const auto& f : o.array("/frameworks"))
      if (f.is_string()) n.frameworks.push_back(f.get<std::string>());
    n.notebook = o.text("/notebook").value_or("");
    n.kernel_id = o.text("/kernel_id").value_or("");
    n.watched = o.flag("/watched");
    // The same process named by the message and by NVML: NVML's entry says more.
    const auto same = std::find_if(c.others.begin(), c.others.end(),
                                   [&](const GpuNeighbour& x) { return x.pid == pid; });
    if (same != c.others.end()) {
      n.bytes = std::max(n.bytes, same->bytes);
      *same = std::move(n);
    } else {
      c.others.push_back(std::move(n));
    }
  }
  std::int64_t total = 0;
  std::int64_t largest = 0;
  for (const auto& item : view.array("/gpu/devices")) {
    const ReportView d(item);
    if (our_devices.empty() || our_devices.contains(d.integer("/index").value_or(0))) {
      const auto memory = std::max<std::int64_t>(d.integer("/memory_total").value_or(0), 0);
      total += memory;
      largest = std::max(largest, memory);
    }
  }
  c.one_device = c.capacity;  // the message's: "GPU 0 has a total capacity of ..."
  c.one_device_from_message = c.one_device.has_value();
  if (!c.one_device && largest > 0) c.one_device = largest;
  if (!c.capacity && total > 0) c.capacity = total;
  std::sort(c.others.begin(), c.others.end(),
            [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  for (const auto& o : c.others)
    c.held += o.bytes;
  if (c.others.empty() && c.message_pointer.empty()) return std::nullopt;
  return c;
}

}  // namespace kwd::diagnosis
