#pragma once

#include <string>
#include <vector>

#include "kwd/smoke/results.hpp"
#include "kwd/smoke/smoke_options.hpp"

namespace kwd::smoke {

// `kernel-watchdog smoke`: every notebook checked and its kernel found before any kernel
// starts (a bad one ends the run with status 4, naming it); then up to `jobs` notebooks at
// once, each in a fresh kernel under watch, on one event loop; results printed in the
// notebooks' order, then written as JUnit, JSON and GitHub annotations as asked.
// Returns the exit status (see exit_status()).
int run_smoke(const SmokeOptions& options, const std::vector<std::string>& notebook_paths);

}  // namespace kwd::smoke
