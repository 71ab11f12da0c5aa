#include <algorithm>
#include <cctype>
#include <set>

#include "kwd/diagnosis/findings.hpp"
#include "kwd/timeline/trend.hpp"

namespace kwd::diagnosis {
namespace {

int strength_rank(const std::string& strength) {
  if (strength == "strong") return 3;
  if (strength == "supporting") return 2;
  return 1;
}

// Largest value of a series in memory.samples / memory.older_samples.
std::int64_t series_max(const ReportView& view, const std::string& series) {
  std::int64_t best = -1;
  for (const char* where : {"/memory/samples/", "/memory/older_samples/"})
    for (const auto& v : view.array(std::string(where) + series))
      if (const auto n = integer_of(v)) best = std::max(best, *n);
  if (auto peak = view.integer("/memory/peak/" + series)) best = std::max(best, *peak);
  return best;
}

std::int64_t series_min(const ReportView& view, const std::string& series) {
  std::int64_t best = -1;
  for (const char* where : {"/memory/samples/", "/memory/older_samples/"})
    for (const auto& v : view.array(std::string(where) + series))
      if (const auto n = integer_of(v); n && (best < 0 || *n < best)) best = *n;
  return best;
}

}  // namespace

bool DiagnosisInput::loaded(const std::string& framework) const {
  return std::find(frameworks.begin(), frameworks.end(), framework) != frameworks.end();
}

std::optional<std::string> DiagnosisInput::env(const std::string& name) const {
  return view.text("/fingerprint/environment/" + name);
}

const SignatureHit* DiagnosisInput::best_hit(CauseId cause) const {
  const std::string_view id = diagnosis::cause(cause).id;
  const SignatureHit* best = nullptr;
  auto key = [](const SignatureHit& h) {
    return std::make_tuple(h.recent(), strength_rank(h.signature->strength),
                           h.pointer == "/stderr_tail/text", h.line);
  };
  for (const auto& h : hits)
    if (h.signature->supports == id && (best == nullptr || key(h) > key(*best))) best = &h;
  return best;
}

Death read_death(const ReportView& view) {
  Death d;
  if (!view.has("/termination")) return d;
  d.known = true;
  d.signaled = view.text("/termination/kind").value_or("") == "signal";
  d.signal = static_cast<int>(view.integer("/termination/signal").value_or(0));
  d.signal_name = view.text("/termination/signal_name").value_or("");
  if (d.signaled && d.signal_name.empty() && d.signal > 0)
    d.signal_name = "signal " + std::to_string(d.signal);
  d.exit_code = view.integer("/termination/exit_code");
  d.core_dumped = view.flag("/termination/core_dumped");
  if (!d.signaled && !d.exit_code) d.known = false;
  return d;
}

std::optional<MemoryPressure> read_memory_pressure(const ReportView& view) {
  std::vector<MemoryPressure> candidates;
  // The kernel's own cgroup limit (memory.max / memory.limit_in_bytes).
  if (auto limit = view.integer("/cgroup/limit"); limit && *limit > 0) {
    MemoryPressure p;
    p.limit_name = "cgroup memory limit";
    p.limit_bytes = *limit;
    p.limit_pointer = "/cgroup/limit";
    if (auto max_usage = view.integer("/cgroup/max_usage"); max_usage && *max_usage >= 0) {
      p.used_bytes = *max_usage;
      p.used_pointer = "/cgroup/max_usage";
    }
    if (const auto peak = series_max(view, "cgroup_usage"); peak > p.used_bytes) {
      p.used_bytes = peak;
      p.used_pointer = "/memory/samples/cgroup_usage";
    }
    if (p.used_bytes < 0) {
      p.used_bytes = view.integer("/cgroup/usage").value_or(-1);
      p.used_pointer = "/cgroup/usage";
    }
    candidates.push_back(p);
  }
  // The tightest limit the timeline knew of, against the process tree's peak RSS: a host
  // memory limit only (the GPU's memory is not what RSS fills).
  if (auto bytes = view.integer("/memory/limits/tightest/bytes");
      bytes && *bytes > 0 &&
      view.text("/memory/limits/tightest/name").value_or("") != "gpu_total") {
    MemoryPressure p;
    p.limit_name = timeline::limit_in_words(
        view.text("/memory/limits/tightest/name").value_or("memory limit"));
    p.limit_bytes = *bytes;
    p.limit_pointer = "/memory/limits/tightest/bytes";
    p.used_bytes = series_max(view, "rss");
    p.used_pointer = "/memory/peak/rss";
    candidates.push_back(p);
  }
  // The whole machine: how low MemAvailable went.
  if (auto total = view.integer("/system_memory/mem_total"); total && *total > 0) {
    std::int64_t lowest = series_min(view, "mem_available");
    std::string pointer = "/memory/samples/mem_available";
    if (auto last = view.integer("/system_memory/mem_available");
        last && (lowest < 0 || *last < lowest)) {
      lowest = *last;
      pointer = "/system_memory/mem_available";
    }
    if (lowest >= 0) {
      MemoryPressure p;
      p.limit_name = "system memory";
      p.limit_bytes = *total;
      p.limit_pointer = "/system_memory/mem_total";
      p.used_bytes = *total - lowest;
      p.used_pointer = pointer;
      candidates.push_back(p);
    }
  }
  if (candidates.empty()) return std::nullopt;
  return *std::max_element(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.fraction() < b.fraction();
  });
}

std::vector<std::string> read_frameworks(const ReportView& view) {
  std::vector<std::string> names;
  for (const char* where : {"/fingerprint/frameworks", "/fingerprint/native_libraries"})
    for (const auto& entry : view.array(where))
      if (entry.is_object() && entry.contains("name") && entry["name"].is_string()) {
        std::string name = entry["name"].get<std::string>();
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        names.push_back(std::move(name));
      }
  return names;
}

std::string XidEvent::fact() const {
  std::string text = "NVIDIA Xid " + xid_text + " on GPU " + device;
  if (pid != 0) text += " for pid " + std::to_string(pid);
  return text;
}

std::set<std::int64_t> kernel_pids(const ReportView& view) {
  std::set<std::int64_t> pids;
  if (auto pid = view.integer("/kernel/pid")) pids.insert(*pid);
  for (const auto& m : view.array("/process_tree/members"))
    if (const auto pid = ReportView(m).integer("/pid")) pids.insert(*pid);
  return pids;
}

std::vector<XidEvent> read_xid_events(const ReportView& view) {
  const auto pids = kernel_pids(view);
  std::vector<XidEvent> events;
  const auto& xids = view.array("/gpu/xid_events");
  for (std::size_t i = 0; i < xids.size(); ++i) {
    if (!xids[i].is_object()) continue;
    const ReportView e(xids[i]);
    XidEvent event;
    event.index = i;
    event.pid = e.integer("/pid").value_or(0);
    if (event.pid != 0 && !pids.contains(event.pid)) continue;
    event.xid = e.integer("/xid").value_or(0);
    event.xid_text = e.scalar("/xid").value_or("?");
    event.device = e.scalar("/device").value_or("?");
    if (const auto at = e.integer("/t_ms")) {
      const auto placed = place_in_time(view, *at);
      event.cell = placed.cell;
      event.survived_until_cell = placed.survived_until_cell;
    }
    events.push_back(std::move(event));
  }
  return events;
}

}  // namespace kwd::diagnosis
