#include "kwd/report/terminal_summary.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <vector>

#include "kwd/util/size_parse.hpp"

namespace kwd::report {
namespace {

using nlohmann::json;

struct Paint {
  bool on;
  std::string operator()(const std::string& text, const char* code) const {
    return on ? std::string("\x1b[") + code + "m" + text + "\x1b[0m" : text;
  }
};

std::string str(const json& j, const char* key, const std::string& fallback = "?") {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  if (j[key].is_string()) return j[key].get<std::string>();
  return j[key].dump();
}

std::vector<std::string> last_lines(const std::string& text, std::size_t n) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line))
    lines.push_back(line);
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(n));
  return lines;
}

}  // namespace

std::string sparkline(const json& series, std::size_t width) {
  static constexpr std::array<const char*, 8> kBars{"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::vector<double> values;
  if (series.is_array())
    for (const auto& v : series)
      if (v.is_number()) values.push_back(v.get<double>());
  if (values.empty() || width == 0) return "";
  // Each character stands for a bucket of samples, drawn at the bucket's maximum.
  std::vector<double> buckets;
  const std::size_t n = std::min(width, values.size());
  for (std::size_t b = 0; b < n; ++b) {
    const std::size_t lo = b * values.size() / n;
    const std::size_t hi = std::max(lo + 1, (b + 1) * values.size() / n);
    buckets.push_back(*std::max_element(values.begin() + static_cast<std::ptrdiff_t>(lo),
                                        values.begin() + static_cast<std::ptrdiff_t>(hi)));
  }
  const auto [mn, mx] = std::minmax_element(buckets.begin(), buckets.end());
  std::string out;
  for (double v : buckets) {
    const double span = *mx - *mn;
    const auto level = span <= 0 ? 0 : static_cast<std::size_t>((v - *mn) / span * 7.0 + 0.5);
    out += kBars[std::min<std::size_t>(level, 7)];
  }
  return out;
}

namespace {

// Splits `text` into lines of at most `width` columns (counting bytes; good enough for the
// ASCII our own messages use), the first prefixed by `first`, the rest by `rest`.
std::string wrap(const std::string& text, std::size_t width, const std::string& first,
                 const std::string& rest) {
  std::string out, line = first;
  std::size_t line_words = 0;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    if (line_words > 0 && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = rest;
      line_words = 0;
    }
    line += (line_words > 0 ? " " : "") + word;
    ++line_words;
  }
  return out + line + "\n";
}

std::string clip(const std::string& text, std::size_t width) {
  if (text.size() <= width) return text;
  return text.substr(0, width > 1 ? width - 1 : 0) + "…";
}

// The line number of the running cell at which Python was when it died, or 0.
int crash_line_in_cell(const json& r) {
  const json& tb = r.value("python_traceback", json::object());
  if (!tb.is_object()) return 0;
  for (const auto& f : tb.value("frames", json::array()))
    if (f.value("cell", "") == "in flight") return f.value("line", 0);
  return 0;
}

void cell_section(std::ostringstream& out, const json& r, const Paint& paint, std::size_t width) {
  const json* execution =
      r.contains("execution") && r["execution"].is_object() ? &r["execution"] : nullptr;
  if (execution == nullptr) return;
  const json& cell = execution->value("cell_in_flight", json());
  if (!cell.is_object()) {
    out << "\n" << paint("Cell in flight", "1");
    if (crash_line_in_cell(r) > 0)
      out << "  one, never announced on IOPub (the kernel died as it started; its line "
          << crash_line_in_cell(r) << " is on the crashing stack)\n";
    else
      out << "  none (kernel was " << execution->value("state_at_death", std::string("?")) << ")\n";
    return;
  }
  out << "\n" << paint("Cell in flight", "1") << "  [" << str(cell, "execution_count") << "]";
  if (cell.contains("running_for_s")) out << "  running " << str(cell, "running_for_s") << " s";
  if (cell.contains("rss_at_start") && cell["rss_at_start"].is_number())
    out << "  (RSS at start " << util::format_bytes(cell["rss_at_start"].get<double>()) << ")";
  out << "\n";
  std::vector<std::string> lines;
  std::istringstream code(cell.value("code", std::string()));
  for (std::string line; std::getline(code, line);)
    lines.push_back(line);
  const int crash = crash_line_in_cell(r);
  // Seven lines: around the crash when it is known, else the start of the cell.
  const int n = static_cast<int>(lines.size());
  int first = crash > 0 ? std::max(1, crash - 3) : 1;
  const int last = std::min(n, first + 6);
  first = std::max(1, last - 6);
  for (int i = first; i <= last; ++i) {
    const bool here = i == crash;
    std::string row = (here ? "> " : "  ") + std::to_string(i) + " | " + lines[i - 1];
    row = clip(row, width - 2);
    out << "  " << (here ? paint(row, "1;31") : row) << "\n";
  }
  if (last < n) out << "     ... " << (n - last) << " more lines\n";
}

void memory_section(std::ostringstream& out, const json& r, const Paint& paint, int width) {
  const json& memory = r.value("memory", json::object());
  const json& samples = memory.value("samples", json::object());
  if (!samples.is_object() || !samples.contains("rss")) return;
  const auto bars = static_cast<std::size_t>(std::max(width - 40, 10));
  const json& peak = memory.value("peak", json::object());
  out << "\n"
      << paint("Memory", "1") << " (kernel processes, last " << samples["rss"].size()
      << " samples)\n";
  out << "  RSS " << sparkline(samples["rss"], bars);
  if (peak.contains("rss")) out << "  peak " << util::format_bytes(peak["rss"].get<double>());
  const auto& rss = samples["rss"];
  if (!rss.empty() && rss.back().is_number())
    out << ", last " << util::format_bytes(rss.back().get<double>());
  out << "\n";
  if (samples.contains("gpu_used") && !sparkline(samples["gpu_used"], bars).empty()) {
    out << "  GPU " << sparkline(samples["gpu_used"], bars);
    if (peak.contains("gpu_used"))
      out << "  peak " << util::format_bytes(peak["gpu_used"].get<double>());
    out << "\n";
  }
  const json& limits = memory.value("limits", json::object());
  const json& tightest = limits.is_object() ? limits.value("tightest", json()) : json();
  std::string extra;
  if (tightest.is_object() && tightest.contains("bytes") && tightest["bytes"].is_number())
    extra += "limit " + util::format_bytes(tightest["bytes"].get<double>()) + " (" +
             tightest.value("name", std::string("?")) + ")";
  const json& trend = memory.value("trend", json::object());
  if (trend.is_object() && trend.contains("rss") && trend["rss"].is_object() &&
      trend["rss"].contains("slope_60s") && trend["rss"]["slope_60s"].is_number()) {
    const double slope = trend["rss"]["slope_60s"].get<double>();
    extra += std::string(extra.empty() ? "" : " · ") + (slope >= 0 ? "+" : "-") +
             util::format_bytes(std::abs(slope)) + "/s over the last minute";
  }
  if (!extra.empty()) out << "  " << extra << "\n";
}

void environment_line(std::ostringstream& out, const json& r, const Paint& paint,
                      std::size_t width) {
  const json& fp = r.value("fingerprint", json::object());
  if (!fp.is_object()) return;
  std::string line;
  const json& py = fp.value("python", json::object());
  if (py.is_object() && py.contains("version") && py["version"].is_string())
    line = "python " + py["version"].get<std::string>();
  for (const auto& f : fp.value("frameworks", json::array()))
    if (f.is_object())
      line +=
          (line.empty() ? "" : " · ") + f.value("name", std::string("?")) +
          (f.contains("version") && f["version"].is_string() ? " " + f["version"].get<std::string>()
                                                             : "");
  if (!line.empty()) out << paint("Environment", "1") << "  " << clip(line, width - 13) << "\n";
  for (const auto& inc : fp.value("incompatibilities", json::array()))
    if (inc.is_object())
      out << paint("  incompatible: ", "1;33") << inc.value("what", std::string("?")) << "\n";
}

}  // namespace

std::string render_summary(const json& r, const SummaryStyle& style) {
  const Paint paint{style.color};
  const auto width = static_cast<std::size_t>(std::max(style.width, 40));
  std::ostringstream out;
  const json& kernel = r.value("kernel", json::object());
  const json& term = r.value("termination", json::object());
  const json& diag = r.value("diagnosis", json::object());
  const bool hang = r.value("kind", std::string()) == "hang";

  out << paint(hang ? "Kernel hang report" : "Kernel crash report", "1") << "  " << str(r, "id")
      << "\n";
  const std::string headline = diag.is_object() && diag.contains("headline")
                                   ? str(diag, "headline")
                                   : "Kernel " + str(term, "description");
  // The answer first, in red when the terminal shows colour.
  std::istringstream headline_lines(wrap(headline, width, "", "  "));
  for (std::string line; std::getline(headline_lines, line);)
    out << paint(line, "1;31") << "\n";
  std::string facts;
  if (diag.is_object() && diag.contains("cause"))
    facts = "cause " + str(diag, "cause") + " · confidence " + str(diag, "confidence") + " · ";
  facts += "pid " + str(kernel, "pid") + " · up " + str(kernel, "uptime_s") + " s · " +
           (hang ? "detected " + str(r.value("hang", json::object()), "detected_at_ms")
                 : "died " + str(kernel, "died_at"));
  out << "  " << paint(clip(facts, width - 2), "2") << "\n";

  if (diag.is_object() && !diag.value("evidence", json::array()).empty()) {
    out << "\n" << paint("Evidence", "1") << "\n";
    int shown = 0;
    for (const auto& e : diag["evidence"]) {
      if (++shown > 6) break;
      out << clip("  • " + e.value("fact", std::string()), width) << "\n";
    }
    if (diag["evidence"].size() > 6) out << "    (" << diag["evidence"].size() - 6 << " more)\n";
  }
  cell_section(out, r, paint, width);
  memory_section(out, r, paint, static_cast<int>(width));

  if (diag.is_object() && !diag.value("remedies", json::array()).empty()) {
    out << "\n" << paint("What to do", "1") << "\n";
    int n = 0;
    for (const auto& rem : diag["remedies"]) {
      if (++n > 4) break;
      const std::string num = std::to_string(n) + ". ";
      out << wrap(rem.value("text", std::string()), width, "  " + num, "     ");
      out << paint(wrap("why: " + rem.value("why", std::string()), width, "     ", "     "), "2");
    }
    if (diag["remedies"].size() > 4)
      out << "     (" << diag["remedies"].size() - 4 << " more in the report)\n";
  }
  out << "\n";
  environment_line(out, r, paint, width);
  if (diag.is_object())
    for (const auto& m : diag.value("missing", json::array()))
      out << paint("not known: ", "33") << clip(m.get<std::string>(), width - 11) << "\n";

  const json& tail = r.value("stderr_tail", json::object());
  const std::string stderr_text = tail.is_object() ? tail.value("text", "") : "";
  if (!stderr_text.empty()) {
    out << paint("Last stderr lines", "1") << "\n";
    for (const auto& line : last_lines(stderr_text, 4))
      out << clip("  | " + line, width) << "\n";
  }
  for (const auto& note : r.value("notes", json::array()))
    if (note.is_string()) out << paint("note: ", "33") << note.get<std::string>() << "\n";
  return out.str();
}

}  // namespace kwd::report
