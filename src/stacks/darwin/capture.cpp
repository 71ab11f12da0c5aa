#include "kwd/hang/thread_snapshot.hpp"
#include "kwd/stacks/crash.hpp"
#include "kwd/stacks/stacks.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::stacks {

ProcessStacks capture_stacks(pid_t pid, const CaptureOptions&) {
  ProcessStacks out;
  out.pid = pid;
  out.taken_at_ms = util::wall_ms();
  out.found = hang::process_alive(pid);
  out.native_missing = "not read on macOS yet (task_threads/thread_get_state are to come)";
  out.python_missing = "not read on macOS yet";
  return out;
}

// No crash handler is loaded on macOS (the kernel's crash is read from ReportCrash's report).
CrashStack capture_crash_stack(const FatalSignal& fault, std::chrono::milliseconds) {
  CrashStack out;
  out.fault = fault;
  out.missing = "not read on macOS yet";
  return out;
}

}  // namespace kwd::stacks
