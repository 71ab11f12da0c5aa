// The per-kernel Watch on real processes: death sources (waitpid, pidfd for a process that
// is not ours), and a report that is still written when one of its collectors fails.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "kwd/loop/event_loop.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/watch/death_policy.hpp"
#include "kwd/watch/watch.hpp"

using namespace kwd;
using nlohmann::json;

namespace {

// Returns once the child has put back the default fatal-signal actions: a signal sent before
// would run the test framework's handler in the child (it deadlocked there once, on a loaded
// machine, with the parent waiting for its death).
pid_t sleeping_child() {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Killed with fatal signals on purpose: a sanitizer's handler would take them for a
    // crash of the test itself and report it.
    for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
      ::signal(s, SIG_DFL);
    (void)!::write(ready[1], "r", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  const ssize_t n = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  REQUIRE(n == 1);
  return pid;
}

// A probe whose report section cannot be gathered: it throws, or it takes too long.
class FailingProbe final : public probes::Probe {
 public:
  enum class How { kThrows, kStalls };
  explicit FailingProbe(How how) : how_(how) {}
  [[nodiscard]] probes::ProbeStatus status() const override {
    return {how_ == How::kThrows ? "throws" : "stalls", true, "test probe"};
  }
  void sample(timeline::MemorySample& /*into*/) override {}
  void contribute(json& report) const override {
    if (how_ == How::kThrows) throw std::runtime_error("the device went away");
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    report["stalled_section"] = true;
  }

 private:
  How how_;
};

struct Fixture {
  loop::EventLoop loop;
  std::optional<watch::ProcessEnd> ended;
  std::unique_ptr<watch::Watch> watch;

  Fixture(pid_t pid, std::unique_ptr<watch::DeathSource> death, std::string connection_file = {}) {
    watch::WatchOptions options;
    options.kernel_pid = pid;
    options.connection_file = std::move(connection_file);
    options.fingerprint = false;
    options.collector_budget = std::chrono::milliseconds(30);
    watch = std::make_unique<watch::Watch>(
        loop, options, std::move(death),
        [this](const watch::ProcessEnd& end, std::int64_t) {
          ended = end;
          loop.stop();
        },
        [](const protocol::HangEvidence&) {});
  }
};

const json* problem_of(const json& report, const std::string& collector) {
  for (const auto& p : report["problems"])
    if (p["collector"] == collector) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("a report is still written, with the problem named, when a collector fails") {
  const pid_t pid = sleeping_child();
  Fixture f(pid, std::make_unique<watch::ChildDeathSource>(pid));
  f.watch->add_probe(std::make_unique<FailingProbe>(FailingProbe::How::kThrows));
  f.watch->add_probe(std::make_unique<FailingProbe>(FailingProbe::How::kStalls));
  f.watch->start();
  ::kill(pid, SIGSEGV);
  ::waitpid(pid, nullptr, 0);  // reaped here: the source must say the status is unknown

  watch::ProcessEnd end{watch::Termination{true, 0, SIGSEGV, false}, "test"};
  watch::ReportContext ctx;
  ctx.end = &end;
  ctx.at_ms = util::wall_ms();
  const json report = f.watch->build_report(ctx, "test-id");

  const json* thrown = problem_of(report, "probe throws");
  REQUIRE(thrown != nullptr);
  CHECK((*thrown)["problem"] == "the device went away");
  const json* stalled = problem_of(report, "probe stalls");
  REQUIRE(stalled != nullptr);
  CHECK((*stalled)["problem"].get<std::string>().find("budget 30 ms") != std::string::npos);
  CHECK(report["stalled_section"] == true);  // slow is late, not lost
  // Everything else is there, and judged.
  CHECK(report["termination"]["signal_name"] == "SIGSEGV");
  CHECK(report["kernel"]["pid"] == pid);
  CHECK(report["memory"].contains("samples"));
  CHECK(report["diagnosis"]["cause"] == "native_crash");
}

TEST_CASE("a listener that never connects leaves a report that says so") {
  const pid_t pid = sleeping_child();
  // A well-formed connection file whose ports nobody will ever bind.
  const std::string file = "/tmp/kwd-unit-" + std::to_string(::getpid()) + "-conn.json";
  std::ofstream(file) << R"({"transport": "tcp", "ip": "127.0.0.1", "shell_port": 1,
    "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5, "key": "k",
    "signature_scheme": "hmac-sha256"})";
  Fixture f(pid, std::make_unique<watch::ChildDeathSource>(pid), file);
  f.watch->start();
  f.loop.after(std::chrono::milliseconds(200), [&] { f.loop.stop(); });
  f.loop.run();
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  watch::ProcessEnd end{watch::Termination{true, 0, SIGKILL, false}, "test"};
  watch::ReportContext ctx;
  ctx.end = &end;
  ctx.at_ms = util::wall_ms();
  const json report = f.watch->build_report(ctx, "test-id");
  CHECK(report["protocol"]["iopub_connected"] == false);
  CHECK(report["heartbeat"]["watched"] == false);
  CHECK(report["problems"].empty());
  CHECK(report["diagnosis"]["cause"] == "killed");
  ::unlink(file.c_str());
}

TEST_CASE("the child's death reaches the watch through waitpid, once") {
  const pid_t pid = sleeping_child();
  Fixture f(pid, std::make_unique<watch::ChildDeathSource>(pid));
  f.watch->start();
  f.watch->check_death();
  CHECK_FALSE(f.ended);
  ::kill(pid, SIGABRT);
  // SIGCHLD's job in the launcher: ask again until the kernel has gone.
  const auto tick = f.loop.every(std::chrono::milliseconds(5), [&] { f.watch->check_death(); });
  f.loop.run();
  f.loop.cancel(tick);
  REQUIRE(f.ended);
  REQUIRE(f.ended->status);
  CHECK(f.ended->status->signal == SIGABRT);
  CHECK(f.ended->how_known == "waitpid");
}

TEST_CASE("a process that is not ours: its death and exit status through a pidfd") {
  // A grandchild: its parent (our child) reaps it, as a Jupyter server reaps its kernels.
  int pid_pipe[2];
  int go_pipe[2];
  REQUIRE(::pipe(pid_pipe) == 0);
  REQUIRE(::pipe(go_pipe) == 0);
  const pid_t middle = ::fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {
    const pid_t kernel = ::fork();
    if (kernel == 0) {
      char go;
      (void)::read(go_pipe[0], &go, 1);
      ::_exit(7);
    }
    (void)::write(pid_pipe[1], &kernel, sizeof kernel);
    int status = 0;
    ::waitpid(kernel, &status, 0);
    ::_exit(0);
  }
  pid_t kernel = -1;
  REQUIRE(::read(pid_pipe[0], &kernel, sizeof kernel) == sizeof kernel);
  Fixture f(kernel, watch::make_process_death_source(kernel));
  f.watch->start();
  f.loop.after(std::chrono::milliseconds(20), [&] { (void)::write(go_pipe[1], "x", 1); });
  f.loop.after(std::chrono::seconds(10), [&] { f.loop.stop(); });
  f.loop.run();
  ::waitpid(middle, nullptr, 0);
  for (int fd : {pid_pipe[0], pid_pipe[1], go_pipe[0], go_pipe[1]})
    ::close(fd);
  REQUIRE(f.ended);
  // The zombie's /proc/PID/stat (before the reap) or, after it, PIDFD_INFO_EXIT (Linux >=
  // 6.15) says how it ended; an older kernel that lost the race to the reap says why not.
  if (f.ended->status) {
    CHECK_FALSE(f.ended->status->signaled);
    CHECK(f.ended->status->exit_code == 7);
    CHECK(f.ended->how_known.starts_with("pidfd"));
  } else {
    CHECK(f.ended->how_known.find("6.15") != std::string::npos);
  }
}

TEST_CASE("a process whose parent has not reaped it yet: its signal, from the zombie, at once") {
  // The parent reaps only when told (as jupyter_client's restarter polls every 3 s): the
  // status must come from the zombie, without waiting for the reap.
  int pid_pipe[2];
  int reap_pipe[2];
  REQUIRE(::pipe(pid_pipe) == 0);
  REQUIRE(::pipe(reap_pipe) == 0);
  const pid_t middle = ::fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {
    const pid_t kernel = ::fork();
    if (kernel == 0) {
      ::signal(SIGSEGV, SIG_DFL);  // a sanitizer's handler would turn the signal into an exit
      ::raise(SIGSEGV);
      ::_exit(1);
    }
    (void)::write(pid_pipe[1], &kernel, sizeof kernel);
    char reap;
    (void)::read(reap_pipe[0], &reap, 1);
    ::waitpid(kernel, nullptr, 0);
    ::_exit(0);
  }
  pid_t kernel = -1;
  REQUIRE(::read(pid_pipe[0], &kernel, sizeof kernel) == sizeof kernel);
  // The pid stays the kernel's (a zombie) until the parent is told to reap it.
  Fixture f(kernel, watch::make_process_death_source(kernel));
  f.watch->start();
  f.loop.after(std::chrono::seconds(10), [&] { f.loop.stop(); });
  f.loop.run();
  (void)::write(reap_pipe[1], "x", 1);
  ::waitpid(middle, nullptr, 0);
  for (int fd : {pid_pipe[0], pid_pipe[1], reap_pipe[0], reap_pipe[1]})
    ::close(fd);
  REQUIRE(f.ended);
  REQUIRE(f.ended->status);
  CHECK(f.ended->status->signaled);
  CHECK(f.ended->status->signal == SIGSEGV);
  // Known before the reap (which came only after the loop ended), not by waiting for it.
  CHECK(f.ended->how_known.find("zombie") != std::string::npos);
}

TEST_CASE("a death is requested only when it follows a request, within the window") {
  using watch::ProcessEnd;
  using watch::Termination;
  const ProcessEnd exit143{Termination{false, 143, 0, false}, "waitpid"};
  const ProcessEnd sigkill{Termination{true, 0, SIGKILL, false}, "waitpid"};
  const ProcessEnd sigterm{Termination{true, 0, SIGTERM, false}, "waitpid"};
  const ProcessEnd clean{Termination{false, 0, 0, false}, "waitpid"};
  const watch::ReceivedSignals term_at_1s{{SIGTERM, 1'000}};
  CHECK(watch::death_was_requested(clean, false, {}, 5'000));
  CHECK(watch::death_was_requested(exit143, true, {}, 5'000));  // shutdown_reply seen
  // A kernel that handles SIGTERM with sys.exit(143), or is killed after the grace period.
  CHECK(watch::death_was_requested(exit143, false, term_at_1s, 1'300));
  CHECK(watch::death_was_requested(sigkill, false, term_at_1s, 6'500));
  // It trapped SIGTERM and was OOM-killed minutes later: not what was asked for.
  CHECK_FALSE(watch::death_was_requested(sigkill, false, term_at_1s, 301'000));
  CHECK(watch::death_was_requested(sigterm, false, term_at_1s, 301'000));
  // An interrupt is not a request to stop; nothing received, nothing requested.
  CHECK_FALSE(watch::death_was_requested(sigkill, false, {{SIGINT, 1'000}}, 1'200));
  CHECK_FALSE(watch::death_was_requested(exit143, false, {}, 1'200));
}
