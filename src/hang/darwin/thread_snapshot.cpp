#include "kwd/hang/thread_snapshot.hpp"

#include <libproc.h>
#include <sys/proc.h>

#include "kwd/util/process_exists.hpp"

namespace kwd::hang {

bool process_alive(pid_t pid) {
  return util::process_exists(pid);
}

bool process_stopped(pid_t pid) {
  struct proc_bsdinfo info {};
  return ::proc_pidinfo(pid, PROC_PIDTBSDINFO, 0, &info, sizeof info) == sizeof info &&
         info.pbi_status == SSTOP;
}

// Thread states of another process need task_for_pid, which an unprivileged watchdog does
// not get: the hang report says so instead.
ProcessSnapshot snapshot_process(pid_t /*pid*/, std::size_t /*max_threads*/) {
  ProcessSnapshot snap;
  snap.reason = "thread states are not readable on macOS without task_for_pid";
  return snap;
}

}  // namespace kwd::hang
