#include "kwd/daemon/process_events.hpp"

#include <arpa/inet.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kwd/util/unique_fd.hpp"

namespace kwd::daemon {
namespace {

// proc_event's `what` values, as numbers: Linux 6.6's headers moved their enum out of the
// struct (proc_event::PROC_EVENT_EXEC there, PROC_EVENT_EXEC at namespace scope after).
constexpr std::uint32_t kEventNone = 0x0;
constexpr std::uint32_t kEventExec = 0x2;

// Where a datagram's proc_event says what happened: after the netlink header and the
// connector's message header.
constexpr std::uint32_t kWhatOffset =
    NLMSG_HDRLEN + offsetof(cn_msg, data) + offsetof(proc_event, what);

// A socket filter run by the kernel on each datagram before it is queued: an exec, or the
// answer to a subscription (what == NONE), is kept; every fork, exit, uid change... of every
// process on the machine (a thread's creation is a fork event) is dropped there, instead of
// waking the daemon to be read and thrown away. Classic BPF loads words in network order.
bool keep_only_execs(int fd) {
  std::array<sock_filter, 5> code{{
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kWhatOffset),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, htonl(kEventExec), 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, htonl(kEventNone), 1, 0),
      BPF_STMT(BPF_RET | BPF_K, 0),           // dropped
      BPF_STMT(BPF_RET | BPF_K, 0xffffffff),  // kept whole
  }};
  const sock_fprog program{static_cast<unsigned short>(code.size()), code.data()};
  return ::setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program) == 0;
}

// The kernel's process-events connector: one netlink datagram per fork, exec, exit... of any
// process on the machine. Only execs are kept (a kernel is recognised by the argv it exec'd
// with): filtered in the kernel where it lets us, else read here and dropped.
class ConnectorProcessEvents final : public ProcessEvents {
 public:
  ConnectorProcessEvents()
      : fd_(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR)) {
    // Before the subscription, so that no unfiltered event is queued.
    if (fd_ && !keep_only_execs(fd_.get()))
      spdlog::debug("process events: no socket filter ({}); other events are dropped here",
                    std::strerror(errno));
    if (!fd_ || !send_operation(PROC_CN_MCAST_LISTEN)) {
      spdlog::info(
          "process events unavailable ({}); kernels outside the runtime dirs are "
          "found by the periodic scan",
          std::strerror(errno));
      fd_.reset();
    }
  }

  // The kernel counts its listeners: tell it this one is gone.
  ~ConnectorProcessEvents() override {
    if (fd_) (void)send_operation(PROC_CN_MCAST_IGNORE);
  }

  ConnectorProcessEvents(const ConnectorProcessEvents&) = delete;
  ConnectorProcessEvents& operator=(const ConnectorProcessEvents&) = delete;

  [[nodiscard]] int fd() const override { return fd_.get(); }

  Batch drain() override {
    Batch batch;
    alignas(nlmsghdr) char buf[8192];
    // At most this many datagrams a call (one event each): the loop comes back while more
    // wait, and a host busy forking does not hold the daemon here.
    for (int datagrams = 0; fd_ && datagrams < 64 && !batch.refused; ++datagrams) {
      const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n < 0) {
        if (errno == ENOBUFS) {  // the kernel dropped events: our buffer was full
          batch.lost = true;
          continue;
        }
        break;  // EAGAIN: all read
      }
      // Unsigned, as the header's length it is compared with (clang's -Wsign-compare).
      auto left = static_cast<unsigned int>(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_NOOP) continue;
        read_event(*h, batch);
      }
    }
    return batch;
  }

 private:
  bool send_operation(proc_cn_mcast_op op) {
    sockaddr_nl self{};
    self.nl_family = AF_NETLINK;
    self.nl_groups = CN_IDX_PROC;
    if (op == PROC_CN_MCAST_LISTEN &&
        ::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&self), sizeof self) != 0)
      return false;
    // A netlink header, then the connector's message carrying the one operation.
    alignas(nlmsghdr) char request[NLMSG_SPACE(sizeof(cn_msg) + sizeof(proc_cn_mcast_op))]{};
    auto* header = reinterpret_cast<nlmsghdr*>(request);
    header->nlmsg_len = NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_cn_mcast_op));
    header->nlmsg_type = NLMSG_DONE;
    cn_msg message{};
    message.id = {CN_IDX_PROC, CN_VAL_PROC};
    message.seq = request_seq_;
    message.len = sizeof(proc_cn_mcast_op);
    std::memcpy(NLMSG_DATA(header), &message, sizeof message);
    std::memcpy(static_cast<char*>(NLMSG_DATA(header)) + sizeof message, &op, sizeof op);
    return ::send(fd_.get(), request, header->nlmsg_len, 0) ==
           static_cast<ssize_t>(header->nlmsg_len);
  }

  void read_event(const nlmsghdr& header, Batch& batch) {
    const auto payload = header.nlmsg_len - NLMSG_HDRLEN;
    if (payload < sizeof(cn_msg)) return;
    const auto* message = static_cast<const cn_msg*>(NLMSG_DATA(&header));
    if (message->id.idx != CN_IDX_PROC || message->id.val != CN_VAL_PROC) return;
    if (message->len < offsetof(proc_event, event_data) + sizeof(proc_event::event_data.exec) ||
        payload < sizeof(cn_msg) + message->len)
      return;
    proc_event event{};
    std::memcpy(&event, message->data, std::min<std::size_t>(message->len, sizeof event));
    // The answer to our subscription goes to every listener, as do others' answers: ours
    // carries our sequence number, acknowledged.
    const auto what = static_cast<std::uint32_t>(event.what);
    if (what == kEventNone && message->seq == request_seq_ && message->ack == 1 &&
        event.event_data.ack.err != 0) {
      // Refused (a kernel older than 6.6 and no CAP_NET_ADMIN).
      spdlog::info(
          "process events refused ({}); kernels outside the runtime dirs are found by "
          "the 1 s scan",
          std::strerror(static_cast<int>(event.event_data.ack.err)));
      // Said, not closed here: the daemon stops watching the descriptor before it is closed
      // (with the source), and turns its scan's exec checks back on.
      batch.refused = true;
      return;
    }
    if (what != kEventExec) return;
    const pid_t pid = event.event_data.exec.process_tgid;
    if (std::find(batch.exec.begin(), batch.exec.end(), pid) == batch.exec.end()) {
      batch.exec.push_back(pid);
      // The connector stamps events with the monotonic clock (ktime_get_ns), steady_ns's.
      batch.exec_at_ns.push_back(static_cast<std::int64_t>(event.timestamp_ns));
    }
  }

  // Tells our subscription's answer from another listener's.
  const std::uint32_t request_seq_ = static_cast<std::uint32_t>(::getpid()) ^ 0x6b776400u;
  util::UniqueFd fd_;
};

}  // namespace

std::unique_ptr<ProcessEvents> make_process_events() {
  return std::make_unique<ConnectorProcessEvents>();
}

}  // namespace kwd::daemon
