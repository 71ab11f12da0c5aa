#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace kwd::report {

// The report as one self-contained HTML page: no script, no external asset, no request
// (a Content-Security-Policy of default-src 'none' says so to the browser too). It shows the
// diagnosis first, an SVG chart of memory over time with the cells as spans and the death
// marked, and then every section of the report.
std::string render_html(const nlohmann::json& report);

// The memory chart alone: an <svg> element (RSS, GPU memory and the tightest limit over
// time, cells as spans on the time axis, the death marker).
std::string render_memory_chart(const nlohmann::json& report, int width, int height);

// Text made safe for HTML element content and attribute values.
std::string escape_html(std::string_view text);

}  // namespace kwd::report
