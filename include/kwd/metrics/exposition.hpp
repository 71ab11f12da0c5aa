#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kwd::metrics {

// What the daemon knows at one instant, for Prometheus. Bytes and seconds (base units).

// A ceiling a kernel's memory is held to (the report's memory.limits): "cgroup", "mem_total"
// (the machine's memory) or "gpu_total" (all GPUs' memory).
struct LimitFigures {
  std::string name;
  std::int64_t bytes = 0;
  std::int64_t used = 0;                  // what counts against it now
  std::optional<double> time_to_limit_s;  // at the rate of the last 10 s; nullopt: not growing
};

struct KernelFigures {
  std::string kernel_id;
  std::string notebook;     // "" when not known
  std::string kernel_name;  // the kernelspec's name, "" when not known
  int pid = 0;              // tells two processes of one connection file apart (a restart)
  std::string state;        // idle, busy, starting, hung, unknown
  std::int64_t rss_bytes = -1;
  std::int64_t gpu_bytes = -1;  // -1: no GPU watched
  // Its pod's, on a Kubernetes node ("" for a kernel of the node itself, or not known).
  std::string namespace_name;
  std::string pod;
  std::string container;
  std::vector<LimitFigures> limits;
};

// The newest death of one (cause, namespace): which report tells it.
struct DeathFigures {
  std::string report_id;  // "" when no report could be written
  std::string notebook;   // "" when not known
  std::string pod;        // its pod's, on a Kubernetes node
  double at_seconds = 0;  // since the epoch
};

struct DaemonFigures {
  std::string version;
  std::vector<KernelFigures> kernels;
  std::int64_t kernels_under_launcher = 0;  // left to `kernel-watchdog run`
  // A node's daemon (--all-users): every kernel's samples carry namespace, pod and container
  // (DCGM exporter's label names), and the deaths their namespace.
  bool kubernetes = false;
  // (cause, namespace) -> deaths nobody asked for; the namespace is "" off Kubernetes.
  std::map<std::pair<std::string, std::string>, std::int64_t> deaths_by_cause;
  // The same keys: the newest death of each.
  std::map<std::pair<std::string, std::string>, DeathFigures> last_death_by_cause;
  std::int64_t reports_written = 0;
  // Reports that did not reach the report store (written to the fallback store, or nowhere).
  std::int64_t report_write_failures = 0;
  double cpu_seconds = 0;
  std::int64_t resident_bytes = -1;
  double start_time_seconds = 0;  // since the epoch
};

// The Prometheus text exposition format (version 0.0.4): HELP and TYPE for each family,
// label values escaped, names per Prometheus conventions (_bytes, _total, _seconds).
// `process_metrics`: the daemon's own CPU, RSS and start time under the standard process_*
// names (for /metrics; a textfile leaves them out, node_exporter has its own by those names).
std::string render(const DaemonFigures& figures, bool process_metrics = true);

// The content type a scrape answer carries.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace kwd::metrics
