#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/report/report_file.hpp"
#include "kwd/report/report_store.hpp"

namespace kwd::report {

// One line of `reports list`: what any report, whole, half-filled or unreadable, can say.
struct ListedReport {
  StoredReport stored;
  // When the kernel died: kernel.died_at_ms, else (a hang report) hang.detected_at_ms, else
  // the file's modification time. Newest first by this.
  std::int64_t at_ms = 0;
  std::string when;       // at_ms (or the report's own died_at text) for people
  std::string kernel;     // the kernel id, else "pid N", else "?"
  std::string kernel_id;  // "" when the report has none
  std::string notebook;   // kernel.notebook, "" when not known
  std::string cause;      // the diagnosis headline, else how it ended; or why it could not be read
  bool readable = false;
  bool in_fallback = false;  // it waits in the fallback location (report/fallback_reports.hpp)
};

ListedReport list_row(const StoredReport& stored, const nlohmann::json& document);
ListedReport list_row(const StoredReport& stored, const ReportFile& file);

// Every report of the store, and those meant for it that wait in the fallback location, read
// and ordered newest first; a file that cannot be read is a row that says why.
std::vector<ListedReport> list_reports(const ReportStore& store);

// What a person knows a report by, in the order it is tried: a path to a file; `latest`; a
// number N (at most three digits: ids start with a four-digit year) for the Nth newest; an
// id or its prefix; a kernel id or its prefix; a notebook, by its path as the server gave
// it, its file name, or that name without `.ipynb`. A kernel or notebook that died more
// than once names its newest report.
struct ReportLookup {
  std::optional<StoredReport> found;
  std::vector<ListedReport> candidates;  // when the query fits several: newest first
};
ReportLookup find_report(const ReportStore& store, const std::string& query);

// The table as `reports list` prints it: made safe for a terminal, one line each.
std::string list_header();
std::string format_list_row(const ListedReport& row);

}  // namespace kwd::report
