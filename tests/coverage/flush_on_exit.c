/* Linked into the coverage build only (-DKWD_COVERAGE=ON): the program ends the way its kernel
 * ended, by _exit() or by raising the kernel's signal on itself (src/launch/mirror_exit.cpp),
 * and neither runs the atexit handler that writes gcov's counters. The linker sends those
 * calls here first (-Wl,--wrap), so a launcher's run counts as much as a daemon's. */
#include <unistd.h>

extern void __gcov_dump(void);
extern void __real__exit(int status) __attribute__((noreturn));
extern int __real_raise(int sig);

__attribute__((noreturn)) void __wrap__exit(int status) {
  __gcov_dump();
  __real__exit(status);
}

int __wrap_raise(int sig) {
  __gcov_dump();
  return __real_raise(sig);
}
