#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kwd/hang/thread_snapshot.hpp"
#include "kwd/protocol/linux/listening_sockets.hpp"
#include "kwd/protocol/linux/socket_owner.hpp"
#include "kwd/protocol/port_readiness.hpp"
#include "kwd/util/unique_fd.hpp"

TEST_CASE("a thread snapshot of a live process lists its threads") {
  std::thread sleeper([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // until it is asleep
  const auto snap = kwd::hang::snapshot_process(::getpid());
  sleeper.join();
  REQUIRE(snap.available);
  CHECK(snap.process_state == "R (running)");
  REQUIRE(snap.threads.size() >= 2);
  CHECK(snap.threads_total == snap.threads.size());
  CHECK(snap.threads[0].tid == ::getpid());
  CHECK_FALSE(snap.threads[0].name.empty());
  bool sleeping = false;
  for (const auto& t : snap.threads)
    sleeping = sleeping || t.state == "S (sleeping)";
  CHECK(sleeping);
}

TEST_CASE("stopped and dead processes are told apart") {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  REQUIRE(child > 0);
  CHECK(kwd::hang::process_alive(child));
  ::kill(child, SIGSTOP);
  int status = 0;
  ::waitpid(child, &status, WUNTRACED);
  const auto stopped = kwd::hang::snapshot_process(child);
  CHECK(stopped.process_state == "T (stopped)");
  CHECK(kwd::hang::process_alive(child));  // stopped is alive: a hang, not a death
  ::kill(child, SIGKILL);
  // A zombie (killed, not reaped) is no longer alive.
  siginfo_t info{};
  ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT);
  CHECK_FALSE(kwd::hang::process_alive(child));
  ::waitpid(child, &status, 0);
  CHECK_FALSE(kwd::hang::process_alive(child));
  CHECK_FALSE(kwd::hang::snapshot_process(child).available);
  CHECK(kwd::hang::describe_state('D') == "D (disk sleep)");
}

TEST_CASE("a TCP port is seen listening only once it is bound and listening") {
  kwd::util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  REQUIRE(fd);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int port = ntohs(addr.sin_port);
  kwd::protocol::ConnectionInfo info;
  using kwd::protocol::PortState;
  CHECK(kwd::protocol::port_state(::getpid(), info, "", port) == PortState::not_yet);  // bound only
  REQUIRE(::listen(fd.get(), 1) == 0);
  CHECK(kwd::protocol::port_state(::getpid(), info, "", port) == PortState::listening);
  CHECK(kwd::protocol::port_state(::getpid(), info, "", 0) == PortState::not_yet);
  fd.reset();
  CHECK(kwd::protocol::port_state(::getpid(), info, "", port) == PortState::not_yet);
}

TEST_CASE("sock_diag and /proc/net agree on listening sockets, IPv4 and IPv6") {
  using kwd::protocol::linux_net::listening_by_sock_diag;
  using kwd::protocol::linux_net::listening_in_proc_net;
  using kwd::protocol::linux_net::SocketInodes;
  const std::string proc_net = "/proc/" + std::to_string(::getpid()) + "/net/";
  for (const int family : {AF_INET, AF_INET6}) {
    kwd::util::UniqueFd fd(::socket(family, SOCK_STREAM, 0));
    if (!fd && family == AF_INET6) {
      WARN("no IPv6 on this host");
      continue;
    }
    REQUIRE(fd);
    sockaddr_storage storage{};
    socklen_t len = 0;
    if (family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&storage);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_loopback;
      len = sizeof *a;
    }
    REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&storage), len) == 0);
    REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&storage), &len) == 0);
    const int port =
        ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&storage)->sin_port
                                : reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
    const std::string table = proc_net + (family == AF_INET ? "tcp" : "tcp6");
    INFO("family " << family << ", port " << port);
    const auto listeners = [&](std::chrono::milliseconds max_age = {}) {
      return listening_by_sock_diag(family, port, max_age).value_or(SocketInodes{99});
    };
    const auto listeners_in_table = [&] {
      return listening_in_proc_net(table, port).value_or(SocketInodes{99});
    };
    CHECK(listeners().empty());  // bound, not listening
    CHECK(listeners_in_table().empty());
    // A listing up to an hour old may be used: the one just taken, before listen().
    CHECK(listeners(std::chrono::hours(1)).empty());
    REQUIRE(::listen(fd.get(), 1) == 0);
    CHECK(listeners(std::chrono::hours(1)).empty());
    struct stat socket_file {};
    REQUIRE(::fstat(fd.get(), &socket_file) == 0);
    const SocketInodes ours{static_cast<std::uint64_t>(socket_file.st_ino)};
    CHECK(listeners() == ours);
    CHECK(listeners(std::chrono::hours(1)) == ours);
    CHECK(listeners_in_table() == ours);
    // The other family's table does not have it.
    const int other = family == AF_INET ? AF_INET6 : AF_INET;
    CHECK(listening_by_sock_diag(other, port).value_or(SocketInodes{}).empty());
    fd.reset();
    CHECK(listeners().empty());
    CHECK(listeners_in_table().empty());
  }
  CHECK_FALSE(listening_in_proc_net("/nonexistent/tcp", 1));
}

namespace {

// A TCP socket listening on a loopback port of its own.
std::pair<kwd::util::UniqueFd, int> listening_socket() {
  kwd::util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::listen(fd.get(), 1) != 0)
    return {kwd::util::UniqueFd(), 0};
  return {std::move(fd), ntohs(addr.sin_port)};
}

// A child that holds whatever fds it was given until it is killed: pause(), or, with `argv`,
// that program (the fds without FD_CLOEXEC go with it).
struct HoldingChild {
  pid_t pid = -1;
  HoldingChild() = default;
  explicit HoldingChild(pid_t p) : pid(p) {}
  HoldingChild(const HoldingChild&) = delete;
  HoldingChild& operator=(const HoldingChild&) = delete;
  ~HoldingChild() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

std::unique_ptr<HoldingChild> holding_child(std::vector<std::string> argv = {}) {
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (argv.empty()) {
      for (;;)
        ::pause();
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return std::make_unique<HoldingChild>(pid);
}

}  // namespace

namespace {

// Waits until `pid` has exec'd into a command line holding `needle`, then for longer than a
// listing of kernels' sockets stays fresh (100 ms): the next question about a listener it
// does not know takes a new one.
bool wait_for_exec(pid_t pid, const std::string& needle) {
  for (int i = 0; i < 300; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    const std::string cmdline{std::istreambuf_iterator<char>(in), {}};
    if (cmdline.find(needle) != std::string::npos) {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A connection file in `dir` with this key.
std::string connection_file(const std::string& dir, const std::string& name,
                            const std::string& key) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << R"({"ip": "127.0.0.1", "transport": "tcp", "shell_port": 1,
    "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
    "signature_scheme": "hmac-sha256", "key": ")"
                      << key << "\"}";
  return path;
}

}  // namespace

TEST_CASE("a port another kernel listens on is refused, any other listener is not") {
  using kwd::protocol::port_state;
  using kwd::protocol::PortState;
  char dir_template[] = "/tmp/kwd-ports-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir(dir_template);
  const std::string ours = connection_file(dir, "kernel-ours.json", "our-key");
  const std::string other = connection_file(dir, "kernel-other.json", "their-key");
  const std::string ours_elsewhere = connection_file(dir, "conn.json", "our-key");
  kwd::protocol::ConnectionInfo info = kwd::protocol::load_connection_file(ours);
  // The "kernel" is a child that never bound the ports (forked before they were).
  const auto kernel = holding_child();
  REQUIRE(kernel->pid > 0);
  {
    // Held by this test, a process that names no connection file: whose it is cannot be
    // told (a container's proxy, an ssh tunnel), and the kernel is connected to as before.
    auto [socket_fd, port] = listening_socket();
    REQUIRE(port > 0);
    CHECK(port_state(kernel->pid, info, ours, port) == PortState::cannot_tell);
    CHECK(kwd::protocol::may_connect(PortState::cannot_tell));
    CHECK(port_state(::getpid(), info, ours, port) == PortState::listening);
  }
  // The state of a port held only by a process that names `file` (asked twice).
  const auto held_by_one_naming = [&](const std::string& file) {
    auto [socket_fd, port] = listening_socket();
    const auto holder =
        holding_child({"/bin/sh", "-c", "while :; do sleep 1; done", "sh", "-f", file});
    socket_fd.reset();
    REQUIRE(wait_for_exec(holder->pid, file));
    const PortState first = port_state(kernel->pid, info, ours, port);
    return std::pair{first, port_state(kernel->pid, info, ours, port)};
  };
  // Another kernel's connection file: refused, and remembered.
  CHECK(held_by_one_naming(other) ==
        std::pair{PortState::held_by_another, PortState::held_by_another});
  CHECK_FALSE(kwd::protocol::may_connect(PortState::held_by_another));
  // A file with this kernel's key under another name: this kernel itself, seen from a
  // container or detached with setsid.
  CHECK(held_by_one_naming(ours_elsewhere).first == PortState::cannot_tell);
  for (const auto& file : {ours, other, ours_elsewhere})
    ::unlink(file.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("a port held by a child of the started process is the kernel's") {
  using kwd::protocol::PortState;
  auto [socket_fd, port] = listening_socket();
  REQUIRE(port > 0);
  // The socket lives only in a child of this process, as a kernel started through a wrapper
  // that forks holds its ports in the wrapper's child.
  const auto holder = holding_child();
  REQUIRE(holder->pid > 0);
  socket_fd.reset();
  const kwd::protocol::ConnectionInfo info;
  CHECK(kwd::protocol::port_state(::getpid(), info, "/tmp/kernel-x.json", port) ==
        PortState::listening);
  CHECK(kwd::protocol::port_state(holder->pid, info, "/tmp/kernel-x.json", port) ==
        PortState::listening);
}

TEST_CASE("whose socket it is cannot be told of a process tree that cannot be read") {
  using kwd::protocol::linux_net::process_tree_holds;
  CHECK(process_tree_holds(::getpid(), {}) == false);
  // A process gone holds nothing.
  CHECK(process_tree_holds(0x3fffffff, {1}) == false);
  // A procfs that lists no children (CONFIG_PROC_CHILDREN off): no answer, not a "no".
  char proc[] = "/tmp/kwd-proc-XXXXXX";
  REQUIRE(::mkdtemp(proc) != nullptr);
  const std::string root(proc);
  for (const char* dir : {"/1", "/1/fd", "/1/task", "/1/task/1"})
    REQUIRE(::mkdir((root + dir).c_str(), 0700) == 0);
  CHECK_FALSE(process_tree_holds(1, {1}, root).has_value());
  // A process missing from /proc that is not gone (hidepid hides other users'): no answer.
  CHECK_FALSE(process_tree_holds(1, {1}, root + "/nothing").has_value());
  for (const char* dir : {"/1/task/1", "/1/task", "/1/fd", "/1", ""})
    ::rmdir((root + dir).c_str());
}
