#include "kwd/diagnosis/causes.hpp"

#include <array>

namespace kwd::diagnosis {
namespace {

using enum CauseId;
using enum Severity;

constexpr std::array<Cause, 13> kTable{{
    {oom_killed_system, "oom_killed_system", "out of memory (whole machine)",
     "Killed by the Linux OOM killer: the machine ran out of memory", error, "oom_killed_system",
     true},
    {oom_killed_cgroup, "oom_killed_cgroup", "out of memory (cgroup limit)",
     "Killed by the OOM killer: the kernel's cgroup reached its memory limit", error,
     "oom_killed_cgroup", true},
    {gpu_out_of_memory, "gpu_out_of_memory", "GPU out of memory", "GPU out of memory", error,
     "gpu_out_of_memory", true},
    {gpu_driver_fault, "gpu_driver_fault", "GPU driver fault", "GPU fault", error,
     "gpu_driver_fault", true},
    {shared_memory_full, "shared_memory_full", "shared memory (/dev/shm) full",
     "Shared memory full", error, "shared_memory_full", true},
    {cpu_unsupported, "cpu_unsupported", "built for another CPU",
     "Built for CPU instructions this CPU lacks", error, "cpu_unsupported", true},
    {native_crash, "native_crash", "crash in native code", "Native crash", error, "native_crash",
     true},
    {abort, "abort", "aborted by a library", "Aborted (SIGABRT)", error, "abort", true},
    {killed, "killed", "killed by a signal", "Killed by a signal from another process", error,
     "killed", true},
    {exited_with_error, "exited_with_error", "exited with an error",
     "Kernel process exited with an error", error, "exited_with_error", false},
    {exited, "exited", "exited on its own (code 0)",
     "Kernel process exited with code 0 although no shutdown was requested", warning, "exited",
     false},
    {hang, "hang", "hung (no heartbeat)", "Kernel hung: no heartbeat reply", warning, "hang", true},
    {unknown, "unknown", "cause unknown",
     "Cause unknown: the report does not say how the kernel ended", warning, "unknown", false},
}};

// The table is indexed by CauseId: a row out of place would name the wrong cause.
consteval bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<std::size_t>(kTable[i].which) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "causes table rows must follow CauseId order");
static_assert(kTable.back().which == CauseId::unknown, "every CauseId needs a row");

}  // namespace

std::span<const Cause> causes() {
  return kTable;
}

const Cause& cause(CauseId which) {
  return kTable[static_cast<std::size_t>(which)];
}

const Cause* find_cause(std::string_view id) {
  for (const auto& c : kTable)
    if (c.id == id) return &c;
  return nullptr;
}

bool is_oom_kill(std::string_view cause_id) {
  return cause_id == cause(CauseId::oom_killed_cgroup).id ||
         cause_id == cause(CauseId::oom_killed_system).id;
}

std::string_view severity_name(Severity severity) {
  return severity == Severity::error ? "error" : "warning";
}

}  // namespace kwd::diagnosis
