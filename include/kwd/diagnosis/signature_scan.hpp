#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/diagnosis/signature_table.hpp"

namespace kwd::diagnosis {

// A text in the report that the kernel (or its libraries) wrote.
struct TextSource {
  std::string pointer;  // JSON pointer of the text in the report
  std::string label;    // how people call it: "stderr", "iopub stderr stream", ...
  std::string_view text;
  // Where in the report the text's arrival times are ([offset, ms] pairs), if it has them.
  std::string arrivals_pointer = {};
  // The cell the whole text came from, when the source is one cell's (its last error).
  std::optional<std::int64_t> cell = {};
};

// The last line of one source that matched one signature.
struct SignatureHit {
  const Signature* signature = nullptr;
  std::string pointer;
  std::string label;
  int line = 0;  // 1-based line number within the source
  int lines_in_source = 0;
  int matches = 0;      // how many lines of that source matched
  std::string excerpt;  // the matching line, trimmed and shortened
  // The line from where the pattern matched: what a headline quotes (free of log prefixes,
  // and of another thread's output that landed in front of it).
  std::string from_match;
  std::size_t offset = 0;  // of the matching line's first byte within the source text
  std::string arrivals_pointer;

  // When and in which cell the line was written, and whether the kernel survived it: a later
  // cell ran to its end after it (see place_hits). Unknown for texts without times.
  std::optional<std::int64_t> at_ms;
  std::optional<std::int64_t> cell;
  std::optional<std::int64_t> survived_until_cell;  // the last cell that finished after it
  [[nodiscard]] bool survived() const { return survived_until_cell.has_value(); }

  // Written close to the end: near the death rather than hours before it.
  [[nodiscard]] bool recent() const { return lines_in_source - line < 60; }
};

// The texts of a report worth scanning: the watchdog's stderr tail, the stderr stream seen
// on iopub, the last error's value and the kernel log lines the OOM probe kept.
std::vector<TextSource> text_sources(const nlohmann::json& report);

// Places each hit in time and in a cell, from the texts' arrival times and the report's cells,
// and marks the ones the kernel survived.
class ReportView;
void place_hits(const ReportView& view, std::vector<SignatureHit>& hits);

// The same for anything else with a time (an Xid event): its cell, and the last cell that
// ran to its end after it when the kernel survived it.
struct TimePlacement {
  std::optional<std::int64_t> cell;
  std::optional<std::int64_t> survived_until_cell;
};
TimePlacement place_in_time(const ReportView& view, std::int64_t at_ms);

// Every signature that matches, one hit per (signature, source), most recent line kept.
std::vector<SignatureHit> scan(const SignatureTable& table, const std::vector<TextSource>& sources);

}  // namespace kwd::diagnosis
