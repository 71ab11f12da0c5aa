#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace kwd::daemon {

// One report as one JSON line, for a node's log shipper (Fluent Bit, Vector, Promtail) to
// collect from the daemon's stdout: what an operator filters and alerts on (kind, cause,
// headline, termination, kernel and notebook, pod and container, the report's path), never
// the report's bulk (memory samples, stderr, outputs) and nothing secret (a report holds no
// key). Each string is cut to kMaxLineField bytes (at a UTF-8 boundary), so the line, its
// newline included, stays under kMaxReportLine bytes, which log pipelines take whole.
inline constexpr std::size_t kMaxLineField = 512;
inline constexpr std::size_t kMaxReportLine = 8192;
// The pod and container come from the report's "kubernetes" section, when it has one.
std::string report_line(const nlohmann::json& report, const std::string& report_path);

}  // namespace kwd::daemon
