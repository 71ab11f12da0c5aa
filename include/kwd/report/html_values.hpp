#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

// A report's values as HTML, said for people: numbers by what their field holds (bytes,
// rates, times before the death, counts), field names in words with the report's own name as
// the tooltip. The HTML page's worded tables and its fallback for every other section.

namespace kwd::report {

// How a number is read, from the name it has in the report (and its parent's: a trend's
// "peak" under "rss" is bytes, under "processes" a count).
struct NumberContext {
  std::string key, parent;
  double died_at_ms = NAN;  // for "4.2 s before death"
};

// A JSON value as plain text: strings as they are, null as "—", the rest as JSON.
std::string value_text(const nlohmann::json& v);

// Any JSON value as HTML: objects as key/value tables, arrays of objects as tables, long or
// multi-line strings as <pre>. The fallback that makes "every section" true. Numbers are said
// for people, with the raw value as the cell's tooltip.
void render_value(std::ostringstream& out, const nlohmann::json& v, int depth = 0,
                  const NumberContext& context = {});

}  // namespace kwd::report
