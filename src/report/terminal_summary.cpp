#include "kwd/report/terminal_summary.hpp"

#include <algorithm>
#include <array>
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

std::string render_summary(const json& r, const SummaryStyle& style) {
  const Paint paint{style.color};
  std::ostringstream out;
  const json& kernel = r.value("kernel", json::object());
  const json& term = r.value("termination", json::object());
  const json& diag = r.value("diagnosis", json::object());

  out << paint("Kernel crash report", "1") << "  " << str(r, "id") << "\n";
  if (diag.contains("headline")) {
    out << paint(str(diag, "headline"), "1;31");
    if (diag.contains("confidence")) out << "  (confidence: " << str(diag, "confidence") << ")";
    out << "\n";
  } else {
    out << paint("Kernel " + str(term, "description"), "1;31") << "\n";
  }
  out << "  kernel pid " << str(kernel, "pid") << ", started " << str(kernel, "started_at")
      << ", died " << str(kernel, "died_at") << " (up " << str(kernel, "uptime_s") << " s)\n";
  out << "  command: ";
  for (const auto& a : kernel.value("argv", json::array()))
    out << a.get<std::string>() << " ";
  out << "\n";

  const json& memory = r.value("memory", json::object());
  const json& samples = memory.value("samples", json::object());
  if (samples.contains("rss")) {
    const json& peak = memory.value("peak", json::object());
    out << "\n"
        << paint("Memory", "1") << " (kernel process tree, last " << samples["t_ms"].size()
        << " samples)\n";
    out << "  RSS  "
        << sparkline(samples["rss"], static_cast<std::size_t>(std::max(style.width - 30, 10)))
        << "\n";
    if (peak.contains("rss")) out << "  peak " << util::format_bytes(peak["rss"].get<double>());
    const auto& rss = samples["rss"];
    if (!rss.empty() && rss.back().is_number())
      out << ", last " << util::format_bytes(rss.back().get<double>());
    out << "\n";
  }

  const json& tail = r.value("stderr_tail", json::object());
  const std::string text = tail.value("text", "");
  if (!text.empty()) {
    out << "\n" << paint("Last stderr lines", "1") << "\n";
    for (const auto& line : last_lines(text, 12))
      out << "  | " << line << "\n";
  }
  for (const auto& note : r.value("notes", json::array()))
    out << paint("note: ", "33") << note.get<std::string>() << "\n";
  return out.str();
}

}  // namespace kwd::report
