#pragma once

#include <span>
#include <string_view>

namespace kwd::diagnosis {

// Every cause a diagnosis can name, in the order of the table in causes.cpp.
enum class CauseId {
  oom_killed_system,
  oom_killed_cgroup,
  gpu_out_of_memory,
  gpu_driver_fault,
  shared_memory_full,
  cpu_unsupported,
  native_crash,
  abort,
  killed,
  exited_with_error,
  exited,
  hang,
  unknown,
};

// How the renderers present a cause: an error is a kernel killed by something that went
// wrong; a warning is a kernel that stopped answering, ended quietly, or ended unexplained.
enum class Severity { error, warning };

// One cause, defined once: rules name it, remedies are chosen by it, renderers, docs
// (docs/report.schema.json, docs/report-format.md) and tests read it from here.
struct Cause {
  CauseId which;
  // diagnosis.cause in reports. Stable: reports on disk and signature tables use it.
  std::string_view id;
  // Plain words for people: "out of memory (whole machine)".
  std::string_view name;
  // A headline true of every case of the cause; the rules start from it where they can and
  // add what the facts show (the limit, the message, the cell).
  std::string_view title;
  Severity severity;
  // The value of the `cause` label on Prometheus metrics (kept apart from `id` so that a
  // metric series survives a change of the report format, and the other way round).
  std::string_view metric_label;
  // Whether a stderr signature (data/signatures.json `supports`) may point at it.
  bool shown_by_stderr;
};

// The whole table, in CauseId order.
std::span<const Cause> causes();
const Cause& cause(CauseId which);
// The cause with this report id, or nullptr (a report from another writer may name one we
// do not know).
const Cause* find_cause(std::string_view id);
// Whether a report's cause id is the OOM killer's (a cgroup's limit or the whole machine's).
bool is_oom_kill(std::string_view cause_id);
std::string_view severity_name(Severity severity);

}  // namespace kwd::diagnosis
