#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kwd/util/unique_fd.hpp"

namespace kwd::platform {

// The network namespace of a process (its inode, which names it while it lives); nullopt
// where there are none (macOS) or it cannot be read.
std::optional<std::uint64_t> net_namespace_of(pid_t pid);
std::optional<std::uint64_t> own_net_namespace();

// While one lives, the calling thread is in process `pid`'s network namespace: what it
// creates (threads included, and the sockets they open) belongs there. The thread's own is
// restored on destruction. A kernel in a pod listens on its pod's loopback, which the node's
// loopback does not reach. Throws std::runtime_error saying why it cannot enter (needs
// CAP_SYS_ADMIN; Linux only).
class NetNamespaceEntered {
 public:
  explicit NetNamespaceEntered(pid_t pid);
  ~NetNamespaceEntered();
  NetNamespaceEntered(const NetNamespaceEntered&) = delete;
  NetNamespaceEntered& operator=(const NetNamespaceEntered&) = delete;

 private:
  util::UniqueFd own_;
};

// The node's daemon in a pod has a cgroup namespace of its own (the default on cgroup v2):
// other processes' cgroup paths would read "/../../kubepods…" and the host's hierarchy,
// mounted in, would not match them. This thread enters the cgroup namespace of process `pid`
// (1: the host's, under hostPID) when it is another. Returns what was done, in words; ""
// when nothing was to be done. Throws std::runtime_error when it could not.
std::string enter_cgroup_namespace_of(pid_t pid);

}  // namespace kwd::platform
