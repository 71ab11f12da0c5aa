#include "kwd/metrics/exposition.hpp"

#include <fmt/format.h>

#include <array>
#include <set>

namespace kwd::metrics {
namespace {

// The length of the UTF-8 sequence at text[i], 0 if it is not one (Prometheus rejects a
// scrape whose label values are not UTF-8, and a file name may be any bytes).
std::size_t utf8_length(const std::string& text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t n = 0;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    n = 2;
  else if (lead >= 0xE0 && lead <= 0xEF)
    n = 3;
  else if (lead >= 0xF0 && lead <= 0xF4)
    n = 4;
  else
    return 0;
  if (i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

// Label values may hold anything a notebook path holds: the format escapes \, " and newline;
// bytes that are not UTF-8 become U+FFFD.
std::string escape(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size();) {
    const std::size_t n = utf8_length(value, i);
    const char c = value[i];
    if (n == 0)
      out += "\xEF\xBF\xBD";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out.append(value, i, n);
    i += n == 0 ? 1 : n;
  }
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

std::string kernel_labels(const KernelFigures& k, bool kubernetes) {
  std::string labels =
      fmt::format("kernel_id=\"{}\",notebook=\"{}\",kernel_name=\"{}\",pid=\"{}\"",
                  escape(k.kernel_id), escape(k.notebook), escape(k.kernel_name), k.pid);
  if (kubernetes)
    labels += fmt::format(",namespace=\"{}\",pod=\"{}\",container=\"{}\"", escape(k.namespace_name),
                          escape(k.pod), escape(k.container));
  return labels;
}

}  // namespace

std::string render(const DaemonFigures& f, bool process_metrics) {
  std::string out;
  family(out, "kernel_watchdog_build_info", "gauge",
         "Always 1; the version of kernel-watchdog in a label.");
  out += fmt::format("kernel_watchdog_build_info{{version=\"{}\"}} 1\n", escape(f.version));

  family(out, "kernel_watchdog_kernels", "gauge",
         "Kernels watched by the daemon, by state (idle, busy, starting, hung, unknown) and, on "
         "a Kubernetes node, namespace.");
  constexpr std::array<const char*, 5> kStates{"idle", "busy", "starting", "hung", "unknown"};
  // On a Kubernetes node every state of each namespace that has a kernel, and of "" (kernels of
  // the node itself) always, so that a sum over the node has a sample at every state.
  std::set<std::string> namespaces{""};
  if (f.kubernetes)
    for (const auto& k : f.kernels)
      namespaces.insert(k.namespace_name);
  for (const auto& namespace_name : namespaces) {
    const std::string where =
        f.kubernetes ? fmt::format(",namespace=\"{}\"", escape(namespace_name)) : std::string();
    for (const char* state : kStates) {
      std::int64_t n = 0;
      for (const auto& k : f.kernels)
        n += k.state == state && (!f.kubernetes || k.namespace_name == namespace_name) ? 1 : 0;
      out += fmt::format("kernel_watchdog_kernels{{state=\"{}\"{}}} {}\n", state, where, n);
    }
  }

  family(out, "kernel_watchdog_kernels_under_launcher", "gauge",
         "Kernels found under `kernel-watchdog run` or `smoke`, which watch them themselves.");
  out += fmt::format("kernel_watchdog_kernels_under_launcher {}\n", f.kernels_under_launcher);

  // One gauge per kernel; a kernel whose figure is unknown (-1) is left out of it.
  const auto per_kernel = [&](const char* name, const char* help,
                              std::int64_t KernelFigures::*figure) {
    family(out, name, "gauge", help);
    for (const auto& k : f.kernels)
      if (k.*figure >= 0)
        out += fmt::format("{}{{{}}} {}\n", name, kernel_labels(k, f.kubernetes), k.*figure);
  };
  per_kernel("kernel_watchdog_kernel_resident_memory_bytes",
             "Resident memory of a watched kernel's whole process tree.",
             &KernelFigures::rss_bytes);
  per_kernel("kernel_watchdog_kernel_gpu_memory_bytes",
             "GPU memory held by a watched kernel's processes (NVML); absent without a GPU.",
             &KernelFigures::gpu_bytes);

  // One gauge per kernel and limit (label `limit`), from the kernel's live memory.limits.
  const auto per_limit = [&](const char* name, const char* help, const auto& value) {
    family(out, name, "gauge", help);
    for (const auto& k : f.kernels)
      for (const auto& l : k.limits)
        if (const auto v = value(l))
          out += fmt::format("{}{{{},limit=\"{}\"}} {}\n", name, kernel_labels(k, f.kubernetes),
                             escape(l.name), *v);
  };
  per_limit(
      "kernel_watchdog_kernel_memory_limit_bytes",
      "A ceiling a watched kernel's memory is held to: limit=cgroup (its memory cgroup's "
      "limit), mem_total (the machine's memory), gpu_total (all GPUs' memory).",
      [](const LimitFigures& l) { return std::optional<std::string>(std::to_string(l.bytes)); });
  per_limit(
      "kernel_watchdog_kernel_memory_limit_used_bytes",
      "What counts against that ceiling now: the cgroup's usage, the machine's memory in "
      "use (MemTotal - MemAvailable), all GPUs' memory in use.",
      [](const LimitFigures& l) { return std::optional<std::string>(std::to_string(l.used)); });
  per_limit("kernel_watchdog_kernel_time_to_memory_limit_seconds",
            "When the kernel reaches that ceiling at the rate of the last 10 s; absent while "
            "what counts against it is not growing.",
            [](const LimitFigures& l) {
              return l.time_to_limit_s ? std::optional(fmt::format("{:.3f}", *l.time_to_limit_s))
                                       : std::nullopt;
            });

  family(out, "kernel_watchdog_kernel_deaths_total", "counter",
         "Kernel deaths nobody asked for since the daemon started, by diagnosed cause (and, "
         "on a Kubernetes node, the kernel's namespace).");
  for (const auto& [key, n] : f.deaths_by_cause) {
    const auto& [cause, namespace_name] = key;
    if (f.kubernetes)
      out +=
          fmt::format("kernel_watchdog_kernel_deaths_total{{cause=\"{}\",namespace=\"{}\"}} {}\n",
                      escape(cause), escape(namespace_name), n);
    else
      out +=
          fmt::format("kernel_watchdog_kernel_deaths_total{{cause=\"{}\"}} {}\n", escape(cause), n);
  }

  family(out, "kernel_watchdog_kernel_last_death_timestamp_seconds", "gauge",
         "When the newest kernel death of each cause (and namespace) was, in seconds since the "
         "epoch; the report that tells it in report_id (\"\" when none could be written).");
  for (const auto& [key, death] : f.last_death_by_cause) {
    const auto& [cause, namespace_name] = key;
    const std::string where = f.kubernetes ? fmt::format(",namespace=\"{}\",pod=\"{}\"",
                                                         escape(namespace_name), escape(death.pod))
                                           : std::string();
    out += fmt::format(
        "kernel_watchdog_kernel_last_death_timestamp_seconds{{cause=\"{}\"{},notebook=\"{}\","
        "report_id=\"{}\"}} {:.3f}\n",
        escape(cause), where, escape(death.notebook), escape(death.report_id), death.at_seconds);
  }

  family(out, "kernel_watchdog_reports_written_total", "counter",
         "Crash and hang reports written since the daemon started.");
  out += fmt::format("kernel_watchdog_reports_written_total {}\n", f.reports_written);

  family(out, "kernel_watchdog_report_write_failures_total", "counter",
         "Crash and hang reports that could not be written to the report store (written to "
         "the fallback store in the temporary directory instead, or nowhere).");
  out += fmt::format("kernel_watchdog_report_write_failures_total {}\n", f.report_write_failures);

  // The standard process collector's names, so existing dashboards read the daemon itself;
  // not in a textfile, where node_exporter's own process metrics have those names.
  if (!process_metrics) return out;
  family(out, "process_cpu_seconds_total", "counter",
         "CPU time (user and system) the daemon has used.");
  out += fmt::format("process_cpu_seconds_total {:.3f}\n", f.cpu_seconds);
  if (f.resident_bytes >= 0) {
    family(out, "process_resident_memory_bytes", "gauge", "The daemon's own resident memory.");
    out += fmt::format("process_resident_memory_bytes {}\n", f.resident_bytes);
  }
  family(out, "process_start_time_seconds", "gauge",
         "When the daemon started, in seconds since the epoch.");
  out += fmt::format("process_start_time_seconds {:.3f}\n", f.start_time_seconds);
  return out;
}

}  // namespace kwd::metrics
