#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kwd::report {

// Limits on a report read from disk. Our writers stay far below both: the stderr tail and the
// memory timeline are bounded, and a report nests about six levels. A file beyond them was
// not written by us, and rendering it (the JSON dump, the HTML tables) recurses once per level.
inline constexpr std::uintmax_t kMaxReportBytes = 64u << 20;
inline constexpr int kMaxReportDepth = 64;

// One report file as read: the document, or why not.
struct ReportFile {
  std::string name;  // the file
  std::optional<nlohmann::json> document;
  std::string reason;  // why it was not read ("nested deeper than 64 levels"); empty if it was
  // One line naming the file and the reason.
  [[nodiscard]] std::string problem() const {
    return name + ": " + reason + "; not read as a kernel-watchdog report";
  }
};

// Reads a report: a regular file of at most kMaxReportBytes holding one JSON object nested at
// most kMaxReportDepth deep. Never throws.
ReportFile read_report_file(const std::filesystem::path& path);

// The same checks for text in memory; `name` stands for the file in the problem.
ReportFile parse_report(std::string_view text, const std::string& name);

}  // namespace kwd::report
