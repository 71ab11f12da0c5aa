#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kwd/stacks/linux/native_unwind.hpp"

namespace kwd::stacks::linux_stacks {

struct NativeCapture {
  std::string problem;  // why there are no frames at all ("" when the child reported)
  std::vector<UnwoundThread> threads;
  std::vector<std::pair<pid_t, std::uint64_t>> thread_pointers;  // tid -> TLS base
  std::int64_t frozen_us = -1;
};

// Stops, copies and unwinds `tids` of `pid` in a child process (as systemd-coredump unwinds):
// the child is the tracer, so when it exits — done, crashed inside libdw, or killed at
// `budget` — the kernel detaches every thread it still traced, and nothing it does can take
// the caller down. The child writes one JSON line a thread into a pipe (each distinct frame
// once, the first time a thread has it; then its number); what arrived before the budget ran
// out is kept.
NativeCapture capture_native(const Libdw& lib, pid_t pid, const std::vector<pid_t>& tids,
                             std::size_t max_frames, std::chrono::milliseconds budget);

}  // namespace kwd::stacks::linux_stacks
