/* kernel-watchdog-crash.so: loaded into a watched Python kernel by the shim (ctypes), it
 * catches the fatal signals and, before the kernel dies, tells the watchdog which thread
 * faulted and waits (at most kWaitMs) while the watchdog stops that thread and copies its
 * registers and stack (a Crashpad-style handshake: the stack is read from outside, by the
 * watchdog's unwinder, with libdwfl's symbols and line tables). Then the handler that was there
 * before it runs (faulthandler's Python traceback, or the default action), and the kernel dies
 * of its own signal, as it would have.
 *
 * Everything here runs in a signal handler of a process that is crashing: system calls and
 * stack memory only (no malloc, no stdio, no locks), and nothing that can block for long. It
 * never changes the kernel while nothing is wrong: no thread, no tracer, no signal but these
 * six handled.
 *
 * The channel is one end of a SOCK_SEQPACKET socket pair whose other end the watchdog holds:
 *   kernel -> watchdog   "kwd-crash 1 pid=P tid=T sig=S code=C addr=0x.. pc=0x..\n"
 *   watchdog -> kernel   any one byte, once the thread's stack is copied (or it gave up) */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define KWD_EXPORT __attribute__((visibility("default")))

/* The hard cap on how long a crash waits for the watchdog (issue 38: never block the kernel's
 * death for long). The watchdog answers in tens of milliseconds. */
enum { kWaitMs = 2000 };

static const int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
enum { kSignalCount = sizeof kSignals / sizeof kSignals[0] };

static int channel_fd = -1;
static pid_t installed_in = 0; /* a forked child inherits the handler; it does not report */
static pid_t watchdog_pid = 0;
static struct sigaction previous[kSignalCount];
static atomic_int reporting_tid; /* the one thread that reports; others wait for it */
static atomic_int reported;

static int slot_of(int sig) {
  for (int i = 0; i < kSignalCount; ++i)
    if (kSignals[i] == sig) return i;
  return -1;
}

static char* put_text(char* at, const char* end, const char* text) {
  while (*text != '\0' && at < end)
    *at++ = *text++;
  return at;
}

static char* put_decimal(char* at, const char* end, long long value) {
  char digits[24];
  int n = 0;
  unsigned long long magnitude =
      value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
  do {
    digits[n++] = (char)('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0 && n < (int)sizeof digits);
  if (value < 0 && at < end) *at++ = '-';
  while (n > 0 && at < end)
    *at++ = digits[--n];
  return at;
}

static char* put_hex(char* at, const char* end, uint64_t value) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value != 0 && n < (int)sizeof digits);
  at = put_text(at, end, "0x");
  while (n > 0 && at < end)
    *at++ = digits[--n];
  return at;
}

/* The faulting instruction, from the context the kernel saved: the unwinder cuts the handler's
 * own frames at it. */
static uint64_t fault_pc(const void* context) {
  const ucontext_t* uc = (const ucontext_t*)context;
#if defined(__x86_64__)
  return (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (uint64_t)uc->uc_mcontext.pc;
#else
  (void)uc;
  return 0;
#endif
}

static long long monotonic_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static void report_and_wait(int sig, const siginfo_t* info, const void* context) {
  const pid_t tid = (pid_t)syscall(SYS_gettid);
  int nobody = 0;
  if (!atomic_compare_exchange_strong(&reporting_tid, &nobody, (int)tid)) {
    /* Another thread faulted first and is being read: this one waits its turn to die, so that
     * the process does not end in the middle of that read. The same thread faulting again
     * (inside the handshake) goes straight on. */
    if (atomic_load(&reporting_tid) == (int)tid) return;
    const long long until = monotonic_ms() + kWaitMs;
    const struct timespec pause = {0, 10 * 1000 * 1000};
    while (!atomic_load(&reported) && monotonic_ms() < until)
      nanosleep(&pause, NULL);
    return;
  }
  /* Yama's ptrace_scope 1 lets only a process's ancestors trace it. The watchdog's unwinder is
   * not one under the daemon: allowed now, at the crash, and never before. */
  if (watchdog_pid > 0) prctl(PR_SET_PTRACER, (unsigned long)watchdog_pid, 0, 0, 0);

  char message[200];
  char* at = message;
  const char* end = message + sizeof message - 1;
  at = put_text(at, end, "kwd-crash 1 pid=");
  at = put_decimal(at, end, getpid());
  at = put_text(at, end, " tid=");
  at = put_decimal(at, end, tid);
  at = put_text(at, end, " sig=");
  at = put_decimal(at, end, sig);
  at = put_text(at, end, " code=");
  at = put_decimal(at, end, info != NULL ? info->si_code : 0);
  at = put_text(at, end, " addr=");
  at = put_hex(at, end, info != NULL ? (uint64_t)(uintptr_t)info->si_addr : 0);
  at = put_text(at, end, " pc=");
  at = put_hex(at, end, fault_pc(context));
  *at++ = '\n';

  ssize_t sent;
  do {
    sent = send(channel_fd, message, (size_t)(at - message), MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent > 0) {
    const long long until = monotonic_ms() + kWaitMs;
    for (;;) {
      const long long left = until - monotonic_ms();
      if (left <= 0) break;
      struct pollfd answer = {channel_fd, POLLIN, 0};
      const int ready = poll(&answer, 1, (int)left);
      if (ready < 0 && errno == EINTR) continue;
      if (ready > 0) {
        char byte;
        (void)recv(channel_fd, &byte, 1, MSG_DONTWAIT);
      }
      break;
    }
  }
  atomic_store(&reported, 1);
}

static void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const int slot = slot_of(sig);
  if (channel_fd >= 0 && getpid() == installed_in) report_and_wait(sig, info, context);
  /* What was there before takes over: faulthandler's handler (which prints the Python
   * traceback and re-raises) or the default action. A fault of the instruction itself
   * (SEGV/BUS/ILL/FPE from the CPU) comes again when this returns; a signal that was sent
   * (abort()'s SIGABRT, kill, an int3's SIGTRAP, which resumes past it) is raised again and
   * delivered once this handler returns. */
  if (slot >= 0) sigaction(sig, &previous[slot], NULL);
  const int from_the_cpu = info != NULL && info->si_code > 0 && sig != SIGTRAP;
  if (!from_the_cpu) raise(sig);
  errno = saved_errno;
}

/* Installs the handler for the six fatal signals, in front of those already there. `fd` is the
 * kernel's end of the watchdog's socket pair. Returns 0, or the errno of what failed (then
 * nothing is installed). Called once, by the shim, at the kernel's start. */
KWD_EXPORT int kernel_watchdog_crash_install(int fd) {
  if (fd < 0 || channel_fd >= 0) return EINVAL;
  struct ucred peer;
  socklen_t size = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return errno;
  struct sigaction ours;
  memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = on_fatal_signal;
  /* On the alternate stack where the thread has one (faulthandler makes one: a stack overflow
   * leaves no room on the thread's own); the other fatal signals stay blocked meanwhile. */
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  for (int i = 0; i < kSignalCount; ++i)
    sigaddset(&ours.sa_mask, kSignals[i]);
  for (int i = 0; i < kSignalCount; ++i) {
    if (sigaction(kSignals[i], &ours, &previous[i]) != 0) {
      const int failed = errno;
      while (--i >= 0)
        sigaction(kSignals[i], &previous[i], NULL);
      return failed;
    }
  }
  watchdog_pid = peer.pid;
  installed_in = getpid();
  channel_fd = fd;
  return 0;
}
