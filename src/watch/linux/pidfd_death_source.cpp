// Death of a process that is not our child, on Linux: a pidfd becomes readable when the
// process exits. Its exit status is read, in this order: waitid on the pidfd (we are its
// parent); the zombie's own /proc/PID/stat, whose field 52 holds the wait status until the
// parent reaps it (Linux >= 3.5, same user; no waiting for a manager that reaps only when it
// next polls, jupyter_client's restarter every 3 s); PIDFD_GET_INFO with PIDFD_INFO_EXIT
// once the parent has reaped it (Linux >= 6.15).
#include <linux/ioctl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/unique_fd.hpp"
#include "kwd/watch/death_source.hpp"

namespace kwd::watch {
namespace {

// The first, 64-byte version of the kernel's struct pidfd_info (linux/pidfd.h, 6.13+; the
// last field became exit_code in 6.15). Spelled out because Debian 12's headers predate it.
struct PidfdInfo {
  std::uint64_t mask;
  std::uint64_t cgroupid;
  std::uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  std::int32_t exit_code;
};
static_assert(sizeof(PidfdInfo) == 64);
constexpr std::uint64_t kPidfdInfoExit = 1u << 3;
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);

// How long after the exit we wait for the parent to reap, so the status can be read.
constexpr std::int64_t kReapGraceNs = 1'000'000'000;

class PidfdDeathSource final : public DeathSource {
 public:
  explicit PidfdDeathSource(pid_t pid) : pid_(pid) {
    fd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!fd_) throw std::system_error(errno, std::generic_category(), "pidfd_open");
    // Read after the pidfd exists: the pid cannot name another process before this one is
    // reaped, and the start time tells this one from a later holder of the pid.
    if (const auto st = proc_stat()) start_time_ = st->start_time;
  }
  [[nodiscard]] int fd() const override { return fd_.get(); }

  std::optional<ProcessEnd> check() override {
    if (ended_) return ended_;
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return std::nullopt;  // still running
    if (exited_ns_ == 0) exited_ns_ = util::steady_ns();
    siginfo_t info{};
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(fd_.get()), &info,
                 WEXITED | WNOHANG) == 0 &&
        info.si_pid == pid_) {
      ended_ = ProcessEnd{from_siginfo(info), "pidfd (our child)"};
      return ended_;
    }
    // 0 there is also what a reader the kernel does not let look gets (another user, an
    // LSM): a clean exit is left to the reap, where it can be told from that.
    if (const auto st = proc_stat(); st && st->state == 'Z' && start_time_ != 0 &&
                                     st->start_time == start_time_ && st->exit_code &&
                                     *st->exit_code != 0) {
      ended_ = ProcessEnd{Termination::from_wait_status(*st->exit_code),
                          "pidfd, and the zombie's exit code in /proc/PID/stat"};
      return ended_;
    }
    PidfdInfo pinfo{};
    pinfo.mask = kPidfdInfoExit;
    if (::ioctl(fd_.get(), kPidfdGetInfo, &pinfo) == 0 && (pinfo.mask & kPidfdInfoExit) != 0) {
      ended_ = ProcessEnd{Termination::from_wait_status(pinfo.exit_code), "pidfd"};
      return ended_;
    }
    const bool unsupported = errno == ENOTTY || errno == EINVAL;
    if (!unsupported && util::steady_ns() - exited_ns_ < kReapGraceNs) return std::nullopt;
    ended_ =
        ProcessEnd{std::nullopt, unsupported ? "this Linux kernel cannot tell a non-child's exit "
                                               "status (PIDFD_INFO_EXIT needs 6.15)"
                                             : "its parent did not reap it within 1 s, so its exit "
                                               "status could not be read"};
    return ended_;
  }

 private:
  [[nodiscard]] std::optional<platform::linux_proc::ProcStat> proc_stat() const {
    const auto text =
        platform::linux_proc::read_small_file("/proc/" + std::to_string(pid_) + "/stat");
    return text ? platform::linux_proc::parse_proc_stat(*text) : std::nullopt;
  }

  static Termination from_siginfo(const siginfo_t& info) {
    Termination t;
    t.signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    t.core_dumped = info.si_code == CLD_DUMPED;
    if (t.signaled)
      t.signal = info.si_status;
    else
      t.exit_code = info.si_status;
    return t;
  }

  pid_t pid_;
  util::UniqueFd fd_;
  std::uint64_t start_time_ = 0;
  std::int64_t exited_ns_ = 0;
  std::optional<ProcessEnd> ended_;
};

}  // namespace

std::unique_ptr<DeathSource> make_process_death_source(pid_t pid) {
  return std::make_unique<PidfdDeathSource>(pid);
}

}  // namespace kwd::watch
