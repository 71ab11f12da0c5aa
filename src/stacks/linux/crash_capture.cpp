#include <chrono>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/stacks/crash.hpp"
#include "kwd/stacks/linux/libdw_api.hpp"
#include "kwd/stacks/linux/unwind_child.hpp"
#include "kwd/stacks/pure.hpp"
#include "kwd/stacks/system_crash_report.hpp"

namespace kwd::stacks {

CrashStack capture_crash_stack(const FatalSignal& fault, std::chrono::milliseconds budget) {
  const auto started = std::chrono::steady_clock::now();
  CrashStack out;
  out.fault = fault;
  const auto& lib = linux_stacks::Libdw::get();
  if (!lib.missing.empty()) {
    out.missing = lib.missing;
    return out;
  }
  // Another tracer (a debugger the user attached) has the thread: it sees the crash itself.
  const auto status =
      platform::linux_proc::read_small_file("/proc/" + std::to_string(fault.pid) + "/status");
  if (const auto tracer = status ? tracer_pid(*status) : std::nullopt; tracer && *tracer != 0) {
    out.missing =
        "the kernel is traced by pid " + std::to_string(*tracer) + ": one tracer at a time";
    return out;
  }
  constexpr std::size_t kMaxFrames = 128;
  auto native = linux_stacks::capture_native(lib, fault.pid, {fault.tid}, kMaxFrames, budget);
  out.frozen_us = native.frozen_us;
  for (auto& t : native.threads) {
    if (t.tid != fault.tid) continue;
    out.frames = std::move(t.frames);
    out.truncated = t.truncated;
    out.missing = t.problem;
  }
  if (out.frames.empty() && out.missing.empty())
    out.missing = native.problem.empty() ? "the unwinder found no frame" : native.problem;
  // The handler's frames and the kernel's signal trampoline sit above the faulting one.
  if (!out.frames.empty() && !cut_at_fault(out.frames, fault.pc) && out.missing.empty())
    out.missing = "no frame at the faulting instruction: the handler's own frames are shown too";
  out.capture_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - started)
                       .count();
  return out;
}

// Linux writes no crash report a watchdog could wait for (a core, when one is kept, is
// systemd-coredump's or the administrator's): the handler above reads the stack instead.
bool system_writes_crash_reports() {
  return false;
}

std::optional<CrashStack> look_for_system_crash_report(SystemCrashReportSearch&) {
  return std::nullopt;
}

}  // namespace kwd::stacks
