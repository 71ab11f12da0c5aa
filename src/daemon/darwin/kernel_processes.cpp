#include "kwd/daemon/kernel_processes.hpp"

namespace kwd::daemon {

// Not built yet on macOS (proc_listpids + KERN_PROCARGS2 would do it): the daemon finds no
// kernel there and says so at start.
std::vector<KernelProcess> KernelProcessScanner::scan(ScanKind /*kind*/) {
  return {};
}

}  // namespace kwd::daemon
