#include "kwd/protocol/port_readiness.hpp"

#include <sys/socket.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <utility>

#include "kwd/protocol/linux/listening_sockets.hpp"
#include "kwd/protocol/linux/socket_owner.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::protocol {
namespace {

void append(linux_net::SocketInodes& to, const std::optional<linux_net::SocketInodes>& found) {
  if (found) to.insert(to.end(), found->begin(), found->end());
}

// A port held by another kernel is looked for across the process table (~10 ms with 600
// processes). Found, the answer holds for a minute: the port stays held while that socket
// lives, and a socket gone is not listed again. Not found, the port is connected to. Tables
// are scanned at most once a second: a kernel asking meanwhile is asked again at its next
// poll (not_yet), so a daemon with many kernels whose ports others hold stays cheap.
constexpr std::int64_t kHeldVerdictNs = 60'000'000'000;
constexpr std::int64_t kScanGapNs = 1'000'000'000;

PortState held_elsewhere(const linux_net::SocketInodes& listeners,
                         std::string_view connection_file) {
  thread_local std::map<std::pair<std::uint64_t, std::string>, std::int64_t> held_since;
  thread_local std::int64_t last_scan_ns = 0;
  const std::int64_t now = util::steady_ns();
  std::erase_if(held_since, [&](const auto& h) { return now - h.second > kHeldVerdictNs; });
  for (const std::uint64_t inode : listeners)
    if (held_since.contains({inode, std::string(connection_file)}))
      return PortState::held_by_another;
  if (last_scan_ns != 0 && now - last_scan_ns < kScanGapNs) return PortState::not_yet;
  last_scan_ns = now;
  if (!linux_net::held_by_another_kernel(listeners, connection_file)) return PortState::cannot_tell;
  for (const std::uint64_t inode : listeners)
    held_since[{inode, std::string(connection_file)}] = now;
  return PortState::held_by_another;
}

// A listener on the kernel's port is the kernel's if its tree holds the socket. Another
// kernel's, when that kernel bound the port first (this one's bind then fails): frames sent
// there would reach its shell socket. Anything else is connected to as before: a kernel in a
// container (docker-proxy holds its ports), behind an ssh tunnel, or detached with setsid
// listens outside the tree of the process that was started.
PortState whose(pid_t kernel_pid, std::string_view connection_file,
                const linux_net::SocketInodes& listeners) {
  if (listeners.empty()) return PortState::not_yet;
  if (linux_net::process_tree_holds(kernel_pid, listeners).value_or(false))
    return PortState::listening;
  return held_elsewhere(listeners, connection_file);
}

}  // namespace

PortState port_state(pid_t kernel_pid, const ConnectionInfo& info, std::string_view connection_file,
                     int port, std::chrono::milliseconds max_age) {
  if (port <= 0) return PortState::not_yet;
  if (info.transport == Transport::ipc) {
    struct stat st {};
    const std::string path = info.ip + "-" + std::to_string(port);
    return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? PortState::listening
                                                                  : PortState::not_yet;
  }
  // The kernel is in our network namespace: sock_diag answers for it. A host without IPv6
  // cannot answer for it, and has nothing listening there either.
  if (const auto v4 = linux_net::listening_by_sock_diag(AF_INET, port, max_age)) {
    linux_net::SocketInodes listeners = *v4;
    append(listeners, linux_net::listening_by_sock_diag(AF_INET6, port, max_age));
    return whose(kernel_pid, connection_file, listeners);
  }

  // No sock_diag here: the kernel's own view in procfs, slower.
  const std::string base = "/proc/" + std::to_string(kernel_pid) + "/net/";
  const auto tcp = linux_net::listening_in_proc_net(base + "tcp", port);
  const auto tcp6 = linux_net::listening_in_proc_net(base + "tcp6", port);
  if (!tcp && !tcp6) return PortState::cannot_tell;
  linux_net::SocketInodes listeners;
  append(listeners, tcp);
  append(listeners, tcp6);
  return whose(kernel_pid, connection_file, listeners);
}

}  // namespace kwd::protocol
