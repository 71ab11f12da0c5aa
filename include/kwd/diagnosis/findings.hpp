#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/diagnosis/signature_scan.hpp"

namespace kwd::diagnosis {

// One fact a diagnosis rests on, and where in the report it is.
struct Evidence {
  std::string fact;
  std::string pointer;
  int line = 0;  // for texts: the 1-based line, else 0
};

// What the rules concluded, before remedies are chosen.
struct Finding {
  CauseId cause = CauseId::unknown;
  std::string confidence;  // high | medium | low
  std::string headline;
  std::vector<Evidence> evidence;
  std::vector<std::string> missing;
};

// How the kernel ended, as the report's `termination` section says.
struct Death {
  bool known = false;
  bool signaled = false;
  int signal = 0;
  std::string signal_name;  // "SIGSEGV"; empty for an exit
  std::optional<std::int64_t> exit_code;
  bool core_dumped = false;
};

// How close memory came to a limit before the death.
struct MemoryPressure {
  std::string limit_name;  // "cgroup memory.max", "system memory", ...
  std::int64_t limit_bytes = -1;
  std::int64_t used_bytes = -1;  // last or peak use measured against that limit
  std::string used_pointer;
  std::string limit_pointer;
  [[nodiscard]] double fraction() const {
    return limit_bytes > 0 && used_bytes >= 0
               ? static_cast<double>(used_bytes) / static_cast<double>(limit_bytes)
               : -1.0;
  }
};

// Who else held GPU memory when the kernel ran out of it: from NVML's process list (the
// other processes on the kernel's devices) and from the framework's own message ("Process
// 665 has 59.92 GiB memory in use"), which also names processes NVML cannot see (another
// container's).
struct GpuNeighbour {
  std::int64_t pid = 0;
  std::int64_t bytes = 0;
  std::string command_line;             // "" when unknown
  std::vector<std::string> frameworks;  // as NVML's report entry says
  std::string pointer;                  // where in the report it is said
  // When it is a Jupyter kernel itself: its notebook ("" when unknown), its kernel id, and
  // whether kernel-watchdog watches it (its own report will say why it held so much).
  std::string notebook;
  std::string kernel_id;
  bool watched = false;

  // "pid 665 (the kernel of train.ipynb, watched)", else "pid 665 (python train.py)",
  // with the command line cut at `command_columns`.
  [[nodiscard]] std::string label(std::size_t command_columns) const;
};
struct GpuContention {
  std::vector<GpuNeighbour> others;  // largest first
  std::int64_t held = 0;             // by all of them
  std::optional<std::int64_t> capacity;
  // What one device holds in all (the message's capacity, else the largest of the kernel's
  // devices): a request above it cannot fit however the memory is shared.
  std::optional<std::int64_t> one_device;
  bool one_device_from_message = false;   // else NVML's largest device
  std::optional<std::int64_t> requested;  // what the failed allocation asked for
  std::optional<std::int64_t> free;
  std::optional<std::int64_t> kernel_held;
  std::string message_pointer;  // the message the numbers came from, and its line
  int message_line = 0;
  // Others held a real share of the device: a quarter of it, or more than the kernel.
  [[nodiscard]] bool request_exceeds_device() const {
    return requested && one_device && *requested > *one_device;
  }
  [[nodiscard]] bool significant() const {
    return held > 0 &&
           ((capacity && held * 4 >= *capacity) || (kernel_held && held > *kernel_held));
  }
};

// An NVIDIA Xid event for one of the kernel's processes (or for no pid), placed in time like
// a signature hit: one the kernel survived is context, never the cause.
struct XidEvent {
  std::size_t index = 0;  // in /gpu/xid_events
  std::int64_t xid = 0;
  std::string xid_text;  // as the report has it ("?" when unreadable)
  std::string device;
  std::int64_t pid = 0;  // 0: the driver named none
  std::optional<std::int64_t> cell;
  std::optional<std::int64_t> survived_until_cell;
  [[nodiscard]] bool survived() const { return survived_until_cell.has_value(); }
  [[nodiscard]] std::string pointer() const { return "/gpu/xid_events/" + std::to_string(index); }
  // "NVIDIA Xid 43 on GPU 0 for pid 948"
  [[nodiscard]] std::string fact() const;
};

// Everything the rules and the remedies read, gathered once.
struct DiagnosisInput {
  explicit DiagnosisInput(const nlohmann::json& report) : view(report) {}
  ReportView view;
  Death death;
  // Signature hits from the death's own time: what the cause may rest on.
  std::vector<SignatureHit> hits;
  // Hits the kernel survived (a later cell ran to its end): context only.
  std::vector<SignatureHit> earlier_hits;
  // Xid events for the kernel's processes from the death's own time, and those it survived.
  std::vector<XidEvent> xid_events;
  std::vector<XidEvent> earlier_xid_events;
  nlohmann::json traceback;  // the python_traceback section, or null
  std::optional<MemoryPressure> pressure;
  std::vector<std::string> frameworks;  // lower-case names from the fingerprint
  // The kernel's language as the fingerprint saw it ("python", "R"; "" unknown): the advice
  // is written for it.
  std::string language;
  [[nodiscard]] bool r_kernel() const { return language == "R"; }
  std::optional<GpuContention> gpu_contention;
  bool loaded(const std::string& framework) const;
  // Environment variable as the fingerprint saw it at kernel start, if allow-listed and set.
  [[nodiscard]] std::optional<std::string> env(const std::string& name) const;
  // The strongest hit supporting `cause` (recent and strong first), or nullptr.
  [[nodiscard]] const SignatureHit* best_hit(CauseId cause) const;
};

Death read_death(const ReportView& view);
// From the best GPU-OOM hit's line (its numbers) and the gpu section; nullopt when neither
// says anything about other processes or the device.
std::optional<GpuContention> read_gpu_contention(const ReportView& view,
                                                 const std::vector<SignatureHit>& hits);
std::optional<MemoryPressure> read_memory_pressure(const ReportView& view);
std::vector<std::string> read_frameworks(const ReportView& view);
// The kernel's pid and its process tree's members, as the report lists them.
std::set<std::int64_t> kernel_pids(const ReportView& view);
// The Xid events of the kernel's processes (its pid, its tree's members, or none named),
// oldest first, each placed in its cell.
std::vector<XidEvent> read_xid_events(const ReportView& view);

// The rules, most specific first; the first that applies names the cause.
Finding classify(const DiagnosisInput& input);

// What the user interface can do for a remedy in one click, where the remedy's first step is
// that simple: `copy` puts `text` on the clipboard (an option to paste where the remedy says);
// `insert_cell` inserts `text` as the notebook's first code cell (a setting that must come
// before the framework is imported). `label` is the button's words.
struct RemedyAction {
  std::string kind;
  std::string label;
  std::string text;
};

struct Remedy {
  std::string id;
  std::string text;
  std::string why;
  std::optional<RemedyAction> action{};
};

// Advice for the cause, tailored to the frameworks loaded, the environment and the
// signatures seen. Most useful first, no duplicates.
std::vector<Remedy> choose_remedies(const Finding& finding, const DiagnosisInput& input);

}  // namespace kwd::diagnosis
