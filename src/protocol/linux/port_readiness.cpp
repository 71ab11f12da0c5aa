#include "kwd/protocol/port_readiness.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "kwd/platform/namespaces.hpp"
#include "kwd/protocol/linux/listening_sockets.hpp"
#include "kwd/protocol/linux/socket_owner.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::protocol {
namespace {

void append(linux_net::SocketInodes& to, const std::optional<linux_net::SocketInodes>& found) {
  if (found) to.insert(to.end(), found->begin(), found->end());
}

// Which kernel holds a listener is looked up in one listing of the sockets of every process
// that names a connection file (~10 ms with 600 processes), shared by every kernel asking
// within kSnapshotNs, and taken again sooner for a listener it does not know that may be
// newer than it (once it is kFreshNs old; before, the kernel asks again at its next poll). A kernel
// that asks again and again (a poll while its port stays taken, a reconnect check) is answered from
// its verdict: "another kernel's" for a minute (a listener keeps its holder while it lives), "no
// other kernel's" for a few seconds (its holder may still be starting: exec'ing into a kernel).
constexpr std::int64_t kHeldVerdictNs = 60'000'000'000;
constexpr std::int64_t kOtherVerdictNs = 5'000'000'000;
constexpr std::int64_t kSnapshotNs = 1'000'000'000;
constexpr std::int64_t kFreshNs = 100'000'000;

struct HolderSnapshot {
  std::int64_t taken_ns = -1;
  std::unordered_map<std::uint64_t, linux_net::KernelLikeProcess> by_inode;
};

PortState held_elsewhere(const ConnectionInfo& info, std::string_view connection_file,
                         const linux_net::SocketInodes& listeners) {
  thread_local std::map<std::pair<std::uint64_t, std::string>, std::pair<std::int64_t, PortState>>
      verdicts;
  thread_local HolderSnapshot snapshot;
  const std::int64_t now = util::steady_ns();
  std::erase_if(verdicts, [&](const auto& v) {
    const auto& [at, state] = v.second;
    return now - at > (state == PortState::held_by_another ? kHeldVerdictNs : kOtherVerdictNs);
  });
  const std::string file(connection_file);
  bool all_known = true;
  for (const std::uint64_t inode : listeners) {
    const auto it = verdicts.find({inode, file});
    if (it == verdicts.end())
      all_known = false;
    else if (it->second.second == PortState::held_by_another)
      return PortState::held_by_another;
  }
  if (all_known) return PortState::cannot_tell;

  const auto unknown = [&] {
    return std::any_of(listeners.begin(), listeners.end(),
                       [&](std::uint64_t inode) { return !snapshot.by_inode.contains(inode); });
  };
  if (snapshot.taken_ns < 0 || now - snapshot.taken_ns > kSnapshotNs ||
      (now - snapshot.taken_ns > kFreshNs && unknown())) {
    snapshot.by_inode = linux_net::sockets_of_kernel_like_processes();
    snapshot.taken_ns = now;
  } else if (unknown()) {
    // A listener newer than a listing under 100 ms old may be a kernel's that bound just
    // after it: asked again at the next poll, which lists afresh (not remembered).
    return PortState::not_yet;
  }
  PortState state = PortState::cannot_tell;
  for (const std::uint64_t inode : listeners) {
    const auto holder = snapshot.by_inode.find(inode);
    const bool another = holder != snapshot.by_inode.end() &&
                         linux_net::is_another_kernel(holder->second, info).value_or(false);
    verdicts[{inode, file}] = {now, another ? PortState::held_by_another : PortState::cannot_tell};
    if (another) state = PortState::held_by_another;
  }
  return state;
}

// A listener on the kernel's port is the kernel's if its tree holds the socket. Another
// kernel's, when that kernel bound the port first (this one's bind then fails): frames sent
// there would reach its shell socket. Anything else is connected to as before: a kernel in a
// container (docker-proxy holds its ports), behind an ssh tunnel, or detached with setsid
// listens outside the tree of the process that was started.
PortState whose(pid_t kernel_pid, const ConnectionInfo& info, std::string_view connection_file,
                const linux_net::SocketInodes& listeners) {
  if (listeners.empty()) return PortState::not_yet;
  if (linux_net::process_tree_holds(kernel_pid, listeners).value_or(false))
    return PortState::listening;
  return held_elsewhere(info, connection_file, listeners);
}

}  // namespace

PortState port_state(pid_t kernel_pid, const ConnectionInfo& info, std::string_view connection_file,
                     int port, std::chrono::milliseconds max_age) {
  if (port <= 0) return PortState::not_yet;
  if (info.transport == Transport::ipc) return ipc_port_state(info, port);
  // sock_diag answers in the kernel's network namespace: ours, or a pod's (the node daemon,
  // root, makes its netlink socket there). A host without IPv6 cannot answer for it, and has
  // nothing listening there either.
  const auto theirs = platform::net_namespace_of(kernel_pid);
  const bool ours = !theirs || theirs == platform::own_net_namespace();
  const linux_net::NetNamespace where{theirs.value_or(0), ours ? 0 : kernel_pid};
  if (const auto v4 = linux_net::listening_by_sock_diag(AF_INET, port, max_age, where)) {
    linux_net::SocketInodes listeners = *v4;
    append(listeners, linux_net::listening_by_sock_diag(AF_INET6, port, max_age, where));
    return whose(kernel_pid, info, connection_file, listeners);
  }

  // No sock_diag here (no inet_diag, or a namespace we may not enter): the kernel's own view
  // in procfs, which walks the whole established hash (milliseconds a read).
  const std::string base = "/proc/" + std::to_string(kernel_pid) + "/net/";
  const auto tcp = linux_net::listening_in_proc_net(base + "tcp", port);
  const auto tcp6 = linux_net::listening_in_proc_net(base + "tcp6", port);
  if (!tcp && !tcp6) return PortState::cannot_tell;
  linux_net::SocketInodes listeners;
  append(listeners, tcp);
  append(listeners, tcp6);
  return whose(kernel_pid, info, connection_file, listeners);
}

}  // namespace kwd::protocol
