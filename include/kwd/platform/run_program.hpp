#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kwd::platform {

struct RunOptions {
  bool quiet = false;  // no input, output discarded; else the caller's stdin/stdout/stderr
  // Killed when it runs longer (then timed_out); nullopt: waited for however long it takes.
  std::optional<std::chrono::milliseconds> limit;
};

// How a program run by run_program ended.
struct ProgramEnd {
  std::string problem;  // "cannot run X: …" / "cannot wait for X: …"; empty if it ran
  std::optional<int> exit_status;  // when it exited
  int signal = 0;                  // when a signal ended it
  bool timed_out = false;          // killed at the limit
};

// Runs argv (argv[0] a path, the environment ours) and waits for it.
ProgramEnd run_program(const std::vector<std::string>& argv, const RunOptions& options);

}  // namespace kwd::platform
