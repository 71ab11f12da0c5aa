#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace kwd::daemon {

// Which processes just exec'd, so that a kernel started anywhere (a plain KernelManager writes
// its connection file to the temp dir, where no directory watch sees it) is examined at its
// exec rather than at the next scan of the whole table. Linux: the kernel's process-events
// connector (any user may listen from Linux 6.6; root or CAP_NET_ADMIN before). Elsewhere,
// or when the subscription cannot be made, fd() is -1; a subscription the kernel refuses
// later, in its answer, is said by drain() (Batch::refused). Either way the periodic scan
// alone finds such kernels.
class ProcessEvents {
 public:
  virtual ~ProcessEvents() = default;
  // Readable when events are waiting; -1 when there is no such source.
  [[nodiscard]] virtual int fd() const = 0;

  struct Batch {
    std::vector<pid_t> exec;  // each pid once, in the order they exec'd
    // When each of them exec'd (the steady clock's ns, util::steady_ns), in the same order.
    std::vector<std::int64_t> exec_at_ns;
    bool lost = false;     // events were dropped (a full socket buffer): scan the table
    bool refused = false;  // the kernel refused the subscription (said once in the log):
                           // the caller stops watching fd() and drops the source
  };
  // Reads what fd() announced (a bounded amount per call; fd() stays readable while more wait).
  virtual Batch drain() = 0;
};

std::unique_ptr<ProcessEvents> make_process_events();

}  // namespace kwd::daemon
