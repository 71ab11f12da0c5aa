#include "kwd/daemon/process_events.hpp"

namespace kwd::daemon {
namespace {

// macOS has no unprivileged feed of other processes' execs short of the Endpoint Security
// framework (an entitlement and root): kernels outside the runtime dirs are found by scans.
class NoProcessEvents final : public ProcessEvents {
 public:
  [[nodiscard]] int fd() const override { return -1; }
  Batch drain() override { return {}; }
};

}  // namespace

std::unique_ptr<ProcessEvents> make_process_events() {
  return std::make_unique<NoProcessEvents>();
}

}  // namespace kwd::daemon
