#pragma once

namespace kwd::platform {

// Descriptors that the programs the watchdog starts never inherit: close-on-exec from the
// start where the system can (Linux: SOCK_CLOEXEC, accept4, pipe2). macOS has none of the
// three; there the flag is set right after, which leaves a window only for a fork on another
// thread (the watchdog forks and execs on its loop thread alone).

// socket(2) with `type`, close-on-exec, and non-blocking when asked. -1 with errno on failure.
int cloexec_socket(int domain, int type, bool nonblocking = false);

// accept(2) on `listener`: the connection close-on-exec and blocking, whatever the listener
// is (a BSD accept hands on the listener's O_NONBLOCK, Linux's does not). -1 with errno.
int cloexec_accept(int listener);

// pipe(2) with both ends close-on-exec and non-blocking. 0, or -1 with errno.
int cloexec_nonblocking_pipe(int fds[2]);

// socketpair(2) of `type` in AF_UNIX, both ends close-on-exec and blocking. 0, or -1 with errno.
int cloexec_socket_pair(int type, int fds[2]);

}  // namespace kwd::platform
