#include "kwd/protocol/linux/listening_sockets.hpp"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <string_view>
#include <vector>

#include "kwd/platform/namespaces.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::protocol::linux_net {

namespace {

struct Listener {
  std::uint16_t port;
  std::uint64_t inode;
};

// A sock_diag socket of the network namespace of `in_namespace_of` (0: ours). A netlink
// socket answers for the namespace it was made in, wherever the thread goes after.
util::UniqueFd sock_diag_socket(pid_t in_namespace_of) {
  if (in_namespace_of <= 0)
    return util::UniqueFd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  try {
    const platform::NetNamespaceEntered inside(in_namespace_of);
    return util::UniqueFd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  } catch (const std::exception&) {  // not allowed to enter (no CAP_SYS_ADMIN): procfs then
    return {};
  }
}

// Every TCP socket of `family` in LISTEN state, from one sock_diag dump; false if this way
// cannot tell.
bool dump_listening_sockets(int family, pid_t in_namespace_of, std::vector<Listener>& listeners) {
  listeners.clear();
  util::UniqueFd fd = sock_diag_socket(in_namespace_of);
  if (!fd) return false;
  // The answer is a dump the kernel writes at once; a bound on the wait keeps a broken
  // netlink from stalling the event loop.
  const timeval patience{0, 200'000};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);

  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } ask{};
  ask.header.nlmsg_len = sizeof ask;
  ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  ask.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  ask.request.sdiag_family = static_cast<std::uint8_t>(family);
  ask.request.sdiag_protocol = IPPROTO_TCP;
  ask.request.idiag_states = 1u << TCP_LISTEN;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd.get(), &ask, sizeof ask, 0, reinterpret_cast<const sockaddr*>(&kernel),
               sizeof kernel) < 0)
    return false;

  alignas(nlmsghdr) char buffer[16384];
  for (;;) {
    const ssize_t got = ::recv(fd.get(), buffer, sizeof buffer, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    std::size_t offset = 0;
    const auto size = static_cast<std::size_t>(got);
    while (offset + sizeof(nlmsghdr) <= size) {
      nlmsghdr header;
      std::memcpy(&header, buffer + offset, sizeof header);
      if (header.nlmsg_len < sizeof(nlmsghdr) || offset + header.nlmsg_len > size) return false;
      if (header.nlmsg_type == NLMSG_DONE) return true;
      if (header.nlmsg_type == NLMSG_ERROR) return false;
      if (header.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
          header.nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
        inet_diag_msg socket_info;
        std::memcpy(&socket_info, buffer + offset + NLMSG_HDRLEN, sizeof socket_info);
        if (socket_info.idiag_state == TCP_LISTEN)
          listeners.push_back({ntohs(socket_info.id.idiag_sport), socket_info.idiag_inode});
      }
      offset += NLMSG_ALIGN(header.nlmsg_len);
    }
  }
}

struct ListeningSnapshot {
  std::int64_t taken_ns = -1;
  bool answered = false;
  std::vector<Listener> listeners;
};

}  // namespace

std::optional<SocketInodes> listening_by_sock_diag(int family, int port,
                                                   std::chrono::milliseconds max_age,
                                                   const NetNamespace& where) {
  // One snapshot per namespace, family and thread: a daemon checking the ports of hundreds of
  // kernels that never bind asks the kernel once, not twice per kernel.
  thread_local std::map<std::pair<std::uint64_t, int>, ListeningSnapshot> snapshots;
  const std::int64_t now = util::steady_ns();
  const std::int64_t max_age_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(max_age).count();
  constexpr std::int64_t kForgetAfterNs = 10'000'000'000;  // a pod's namespace may be gone
  if (snapshots.size() > 64)
    std::erase_if(snapshots,
                  [&](const auto& s) { return now - s.second.taken_ns > kForgetAfterNs; });
  ListeningSnapshot& snapshot = snapshots[{where.inode, family}];
  if (snapshot.taken_ns < 0 || max_age_ns <= 0 || now - snapshot.taken_ns > max_age_ns) {
    snapshot.answered = dump_listening_sockets(family, where.enter_pid, snapshot.listeners);
    snapshot.taken_ns = now;
  }
  if (!snapshot.answered) return std::nullopt;
  SocketInodes found;
  for (const Listener& l : snapshot.listeners)
    if (l.port == port) found.push_back(l.inode);
  return found;
}

std::optional<SocketInodes> listening_in_proc_net(const std::string& path, int port) {
  // Lines of /proc/PID/net/tcp{,6}: "sl local_address rem_address st tx:rx tr:when retrnsmt
  // uid timeout inode ...", addresses as HEX_IP:HEX_PORT, st "0A" for LISTEN.
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);  // header
  SocketInodes found;
  while (std::getline(in, line)) {
    // Fields are separated by runs of spaces.
    std::string_view rest(line);
    std::string_view fields[10];
    bool complete = true;
    for (auto& f : fields) {
      const auto start = rest.find_first_not_of(' ');
      if (start == std::string_view::npos) {
        complete = false;
        break;
      }
      rest.remove_prefix(start);
      const auto end = rest.find(' ');
      f = rest.substr(0, end);
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
    }
    if (!complete || fields[3] != "0A") continue;
    const auto colon = fields[1].rfind(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view hex = fields[1].substr(colon + 1);
    unsigned value = 0;
    const auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
    if (ec != std::errc() || static_cast<int>(value) != port) continue;
    std::uint64_t inode = 0;
    const std::string_view text = fields[9];
    if (std::from_chars(text.data(), text.data() + text.size(), inode).ec == std::errc())
      found.push_back(inode);
  }
  return found;
}

}  // namespace kwd::protocol::linux_net
