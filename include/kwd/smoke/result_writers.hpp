#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kwd/smoke/results.hpp"

namespace kwd::smoke {

// JUnit XML: one <testsuite> per notebook, one <testcase> per code cell ("cell N: first
// line", classname = the notebook's path), <failure type=cause message=headline> with the
// traceback or the crash summary, <skipped> for skipped and not-run cells, and the cell's
// peak memory as <properties>.
std::string junit_xml(const std::vector<NotebookResult>& results);

// The machine-readable summary `--json` prints.
nlohmann::json results_json(const std::vector<NotebookResult>& results);

// One line per notebook: result, cells passed/failed/skipped, time, peak memory.
std::string notebook_line(const NotebookResult& result, bool color);
// For a failure: the cell, and a short traceback or the crash report's summary.
std::string failure_details(const NotebookResult& result);
// -j auto: per notebook, the peak it was admitted by against the peak it reached, its wait
// in the queue and why it ran again, if it did.
std::string scheduling_table(const std::vector<NotebookResult>& results);

// GitHub Actions: `::error` annotations (kernel deaths first, at most 10) and the Markdown
// table for $GITHUB_STEP_SUMMARY.
std::string github_annotations(const std::vector<NotebookResult>& results);
std::string github_step_summary(const std::vector<NotebookResult>& results);

}  // namespace kwd::smoke
