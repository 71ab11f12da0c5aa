#include "kwd/smoke/results.hpp"

#include <algorithm>

namespace kwd::smoke {

std::string_view cell_status_name(CellStatus status) {
  switch (status) {
    case CellStatus::passed:
      return "passed";
    case CellStatus::failed:
      return "failed";
    case CellStatus::skipped:
      return "skipped";
    case CellStatus::not_run:
      return "not run";
  }
  return "?";
}

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::passed:
      return "passed";
    case Outcome::failed:
      return "failed";
    case Outcome::died:
      return "kernel died";
    case Outcome::input_error:
      return "input error";
  }
  return "?";
}

std::size_t NotebookResult::count(CellStatus status) const {
  return static_cast<std::size_t>(std::count_if(
      cells.begin(), cells.end(), [status](const auto& c) { return c.status == status; }));
}

const CellResult* NotebookResult::first_failure() const {
  for (const auto& c : cells)
    if (c.status == CellStatus::failed) return &c;
  return nullptr;
}

int exit_status(const std::vector<NotebookResult>& results) {
  int status = 0;
  for (const auto& r : results) {
    if (r.outcome == Outcome::input_error) return 4;
    if (r.outcome == Outcome::died) status = 2;
    if (r.outcome == Outcome::failed && status == 0) status = 1;
  }
  return status;
}

}  // namespace kwd::smoke
