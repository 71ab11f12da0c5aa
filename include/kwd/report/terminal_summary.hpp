#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kwd::report {

struct SummaryStyle {
  bool color = false;  // ANSI colours; only when writing to a terminal
  int width = 100;
};

// The one-screen answer for `reports show`: what killed the kernel, when, the memory
// before death, and what it wrote last.
std::string render_summary(const nlohmann::json& report, const SummaryStyle& style);

// "▁▂▃▅▇" over a series (nulls skipped), `width` characters wide.
std::string sparkline(const nlohmann::json& series, std::size_t width);

}  // namespace kwd::report
