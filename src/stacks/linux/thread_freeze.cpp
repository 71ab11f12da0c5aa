#include "kwd/stacks/linux/thread_freeze.hpp"

#include <elf.h>
#include <pthread.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <thread>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/stacks/pure.hpp"

namespace kwd::stacks::linux_stacks {
namespace {

using Clock = std::chrono::steady_clock;

std::string ptrace_refused(int err) {
  if (err == EPERM)
    return "ptrace refused (EPERM): needs the same user and CAP_SYS_PTRACE or a Yama "
           "ptrace_scope that allows it (/proc/sys/kernel/yama/ptrace_scope)";
  if (err == ESRCH) return "the thread ended";
  return std::string("ptrace refused: ") + std::strerror(err);
}

// One thread this process traces: detached in the destructor on every path. A thread that was
// seized but never stopped cannot be detached (ptrace needs a stopped tracee); it is let go
// when this process exits.
class SeizedThread {
 public:
  explicit SeizedThread(pid_t tid) : tid_(tid) {
    if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
      problem_ = ptrace_refused(errno);
      return;
    }
    seized_ = true;
    if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) problem_ = ptrace_refused(errno);
  }
  SeizedThread(const SeizedThread&) = delete;
  SeizedThread& operator=(const SeizedThread&) = delete;
  ~SeizedThread() { detach(); }

  // Polls for the stop; true once the thread is stopped for us.
  bool poll_stop() {
    if (!seized_ || stopped_ || gone_ || !problem_.empty()) return stopped_;
    int status = 0;
    const pid_t got = ::waitpid(tid_, &status, __WALL | WNOHANG);
    if (got == 0) return false;
    if (got < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
      gone_ = true;
      problem_ = "the thread ended";
      return false;
    }
    if (WIFSTOPPED(status)) {
      stopped_ = true;
      // A signal that arrived meanwhile stopped it before our interrupt did: it goes back
      // with the detach, or the process would never see it.
      if ((status >> 16) == 0) pending_signal_ = WSTOPSIG(status);
    }
    return stopped_;
  }

  void detach() noexcept {
    if (stopped_)
      ::ptrace(PTRACE_DETACH, tid_, nullptr,
               reinterpret_cast<void*>(static_cast<long>(pending_signal_)));
    stopped_ = false;
  }

  [[nodiscard]] pid_t tid() const { return tid_; }
  [[nodiscard]] bool stopped() const { return stopped_; }
  [[nodiscard]] bool waiting() const { return seized_ && !stopped_ && !gone_ && problem_.empty(); }
  [[nodiscard]] const std::string& problem() const { return problem_; }

 private:
  pid_t tid_;
  bool seized_ = false;
  bool stopped_ = false;
  bool gone_ = false;
  int pending_signal_ = 0;
  std::string problem_;
};

// The bytes of [at, at + size) in `pid`, page by page so that an unreadable page ends the copy
// there instead of failing all of it.
std::string copy_memory(pid_t pid, std::uint64_t at, std::size_t size) {
  constexpr std::size_t kPage = 4096;
  std::string bytes(size, '\0');
  std::vector<iovec> local;
  std::vector<iovec> remote;
  for (std::size_t done = 0; done < size && local.size() < 1024;) {
    const std::size_t to_page_end = kPage - ((at + done) % kPage);
    const std::size_t n = std::min(size - done, to_page_end);
    local.push_back({bytes.data() + done, n});
    remote.push_back({reinterpret_cast<void*>(at + done), n});
    done += n;
  }
  const ssize_t got =
      ::process_vm_readv(pid, local.data(), local.size(), remote.data(), remote.size(), 0);
  bytes.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return bytes;
}

void copy_registers(pid_t tid, ThreadImage& image) {
#if defined(__x86_64__)
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) {
    image.problem = std::string("cannot read its registers: ") + std::strerror(errno);
    return;
  }
  // DWARF's x86_64 numbering (System V psABI, table 3.36): rax rdx rcx rbx rsi rdi rbp rsp
  // r8-r15, then the return address column (rip).
  image.dwarf_registers = {regs.rax, regs.rdx, regs.rcx, regs.rbx, regs.rsi, regs.rdi,
                           regs.rbp, regs.rsp, regs.r8,  regs.r9,  regs.r10, regs.r11,
                           regs.r12, regs.r13, regs.r14, regs.r15, regs.rip};
  image.pc = regs.rip;
  image.thread_pointer = regs.fs_base;
  image.stack_at = regs.rsp;
#elif defined(__aarch64__)
  user_regs_struct regs{};  // x0-x30, sp, pc, pstate
  iovec io{&regs, sizeof regs};
  if (::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_PRSTATUS), &io) != 0) {
    image.problem = std::string("cannot read its registers: ") + std::strerror(errno);
    return;
  }
  // DWARF's AArch64 numbering (Arm's DWARF for the Arm 64-bit Architecture): x0-x30 are 0-30,
  // sp is 31; the pc is given apart, as for x86_64.
  image.dwarf_registers.assign(std::begin(regs.regs), std::end(regs.regs));
  image.dwarf_registers.push_back(regs.sp);
  image.pc = regs.pc;
  image.stack_at = regs.sp;
  // The TLS base is tpidr_el0; glibc's aarch64 pthread_self() (Python's thread ident) is its
  // struct pthread, just below that. The distance is this process's own: a kernel on another
  // glibc is joined with its Python threads by no ident, as if none were read.
  std::uint64_t tls = 0;
  iovec tls_io{&tls, sizeof tls};
  if (::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_ARM_TLS), &tls_io) == 0 &&
      tls != 0)
    image.thread_pointer = tls - (reinterpret_cast<std::uint64_t>(__builtin_thread_pointer()) -
                                  static_cast<std::uint64_t>(::pthread_self()));
#else
  (void)tid;
  image.problem = "native frames are read on x86_64 and aarch64 only so far";
#endif
}

}  // namespace

FrozenProcess freeze_and_copy(pid_t pid, const std::vector<pid_t>& tids,
                              std::chrono::milliseconds budget, std::size_t max_stack_bytes) {
  FrozenProcess out;
  const auto maps = platform::linux_proc::read_small_file("/proc/" + std::to_string(pid) + "/maps");
  const auto start = Clock::now();
  std::vector<std::unique_ptr<SeizedThread>> threads;
  threads.reserve(tids.size());
  // All interrupted first, then all waited for: the threads stop together, so the copy is of
  // one moment and the time any thread is stopped is the shortest.
  for (pid_t tid : tids)
    threads.push_back(std::make_unique<SeizedThread>(tid));
  const auto deadline = start + budget;
  for (;;) {
    bool waiting = false;
    for (auto& t : threads) {
      t->poll_stop();
      waiting = waiting || t->waiting();
    }
    if (!waiting || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (auto& t : threads) {
    ThreadImage image;
    image.tid = t->tid();
    if (!t->stopped()) {
      image.problem = !t->problem().empty()
                          ? t->problem()
                          : "did not stop within " + std::to_string(budget.count()) +
                                " ms (uninterruptible sleep?)";
    } else {
      copy_registers(t->tid(), image);
      if (image.problem.empty()) {
        const auto top = maps ? mapping_end(*maps, image.stack_at) : std::nullopt;
        const std::size_t size =
            top ? std::min<std::uint64_t>(*top - image.stack_at, max_stack_bytes) : 0;
        image.stack = copy_memory(pid, image.stack_at, size);
      }
    }
    t->detach();
    out.images.push_back(std::move(image));
  }
  // Threads never stopped are let go when this process exits; the time counts the others.
  out.frozen_us =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  return out;
}

}  // namespace kwd::stacks::linux_stacks
