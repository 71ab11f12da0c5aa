#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kwd::report {

struct SummaryStyle {
  bool color = false;  // ANSI colours; only when writing to a terminal
  int width = 100;     // columns; text wraps at word boundaries to fit
  // Lines that are the kernel's own (cell code, stderr) are cut to the width on a terminal;
  // piped, they are kept whole.
  bool clip_long_lines = true;
};

// The one-screen answer for `reports show`: what killed the kernel, when, the memory
// before death, and what it wrote last.
std::string render_summary(const nlohmann::json& report, const SummaryStyle& style);

// "▁▂▃▅▇" over a series (nulls skipped), `width` characters wide.
std::string sparkline(const nlohmann::json& series, std::size_t width);

}  // namespace kwd::report
