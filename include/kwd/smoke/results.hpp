#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kwd/stacks/stacks.hpp"

namespace kwd::smoke {

enum class CellStatus { passed, failed, skipped, not_run };
std::string_view cell_status_name(CellStatus status);

struct CellResult {
  std::size_t number = 0;  // among code cells, from 1
  std::string first_line;
  CellStatus status = CellStatus::not_run;
  // failed: what kind ("ZeroDivisionError", "timeout", "memory budget", or a crash cause id
  // such as "native_crash"), one line, and the details (a traceback, the report summary).
  // skipped / not run: `message` says why.
  std::string failure_type;
  std::string message;
  std::string details;
  // A failed cell whose error the facts explain (diagnosis::explain_cell_failure): the
  // cause ("framework_out_of_memory"), a headline, the evidence and what to do.
  std::string cause;
  std::string headline;
  std::vector<std::string> evidence;
  std::vector<std::pair<std::string, std::string>> remedies;  // id, text
  bool gpu_out_of_memory = false;  // the framework could not get GPU memory (cause above)
  double seconds = 0;
  std::optional<std::int64_t> peak_rss;  // bytes, the kernel's process tree
  std::optional<std::int64_t> peak_gpu;  // bytes, when a GPU is watched
  // A cell that timed out: where every thread was, taken before the interrupt.
  std::optional<stacks::ProcessStacks> stacks;
};

enum class Outcome {
  passed,       // every cell that ran passed
  failed,       // a cell failed (error, timeout, budget); the kernel lived
  died,         // the kernel died or hung (a crash report says why)
  input_error,  // the notebook or its kernel could not be used
};
std::string_view outcome_name(Outcome outcome);

// How `-j auto` scheduled a notebook (smoke_runner.cpp, admission.hpp).
struct Scheduling {
  std::optional<std::int64_t> estimate;  // bytes it was admitted by; nullopt: never seen
  double wait_s = 0;                     // in the queue, all its starts together
  std::vector<std::string> requeues;     // why each earlier start was stopped or not counted
  std::string gpu;                       // the UUID of the GPU it was given; empty: none
};

struct NotebookResult {
  std::filesystem::path path;
  Outcome outcome = Outcome::passed;
  std::string kernel_name;
  std::vector<CellResult> cells;
  double seconds = 0;
  std::optional<std::int64_t> peak_rss;
  std::optional<std::int64_t> peak_gpu;
  // A death: the diagnosis's cause id and headline; an input error: what was wrong.
  std::string cause;
  std::string headline;
  std::string summary;                          // the crash report's one-screen summary
  std::optional<std::filesystem::path> report;  // crash or hang report (JSON)
  std::optional<std::filesystem::path> report_html;
  std::optional<std::filesystem::path> executed;  // the executed notebook
  std::vector<std::string> warnings;
  std::optional<Scheduling> scheduling;  // -j auto
  [[nodiscard]] std::size_t count(CellStatus status) const;
  // The first failed cell, if any.
  [[nodiscard]] const CellResult* first_failure() const;
};

// 0 all passed; 1 a cell failed and no kernel died; 2 a kernel died or hung; 4 bad input.
int exit_status(const std::vector<NotebookResult>& results);

}  // namespace kwd::smoke
