#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "kwd/report/html_page.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::report {
namespace {

using nlohmann::json;

struct Point {
  double t;
  double v;
};

struct Series {
  const char* key;
  const char* label;
  const char* color;
  bool dashed;
  std::vector<Point> points;
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

const json& at(const json& j, const char* key) {
  static const json null_value;
  return j.is_object() && j.contains(key) ? j[key] : null_value;
}

// Coarse samples (older, one per period) then the full-rate ones, for one series.
std::vector<Point> series_points(const json& memory, const char* key) {
  std::vector<Point> points;
  double recent_start = INFINITY;
  const json& recent = at(memory, "samples");
  if (at(recent, "t_ms").is_array() && !recent["t_ms"].empty() && recent["t_ms"][0].is_number())
    recent_start = recent["t_ms"][0].get<double>();
  for (const char* part : {"older_samples", "samples"}) {
    const json& s = at(memory, part);
    const json& t = at(s, "t_ms");
    const json& v = at(s, key);
    if (!t.is_array() || !v.is_array()) continue;
    for (std::size_t i = 0; i < std::min(t.size(), v.size()); ++i) {
      if (!t[i].is_number() || !v[i].is_number()) continue;
      const double when = t[i].get<double>();
      if (std::string_view(part) == "older_samples" && when >= recent_start) continue;
      points.push_back({when, v[i].get<double>()});
    }
  }
  std::sort(points.begin(), points.end(), [](auto& a, auto& b) { return a.t < b.t; });
  return points;
}

std::string relative_time(double seconds) {
  const long s = std::lround(seconds);
  if (s == 0) return "0 s";
  const long a = std::labs(s);
  std::string text = a >= 60 ? std::to_string(a / 60) + " min" +
                                   (a % 60 ? " " + std::to_string(a % 60) + " s" : "")
                             : std::to_string(a) + " s";
  return (s < 0 ? "−" : "+") + text;
}

}  // namespace

std::string render_memory_chart(const json& r, int width, int height) {
  const json& memory = at(r, "memory");
  std::vector<Series> series{
      {"rss", "RSS (kernel processes)", "#1f6feb", false, {}},
      {"gpu_used", "GPU memory (kernel)", "#8250df", false, {}},
      {"cgroup_usage", "cgroup usage", "#bf8700", false, {}},
      {"cgroup_limit", "cgroup limit", "#cf222e", true, {}},
  };
  for (auto& s : series)
    s.points = series_points(memory, s.key);

  // The end of the story: the death, or when the hang was detected.
  double end_t = NAN;
  if (at(at(r, "kernel"), "died_at_ms").is_number())
    end_t = r["kernel"]["died_at_ms"].get<double>();
  else if (at(at(r, "hang"), "detected_at_ms").is_number())
    end_t = r["hang"]["detected_at_ms"].get<double>();

  // Cells as spans: the finished ones, then the one in flight up to the end.
  struct Span {
    double from, to;
    std::string label, status;
  };
  std::vector<Span> spans;
  const json& execution = at(r, "execution");
  for (const auto& c :
       at(execution, "last_cells").is_array() ? execution["last_cells"] : json::array())
    if (at(c, "started_at_ms").is_number() && at(c, "ended_at_ms").is_number())
      spans.push_back({c["started_at_ms"].get<double>(), c["ended_at_ms"].get<double>(),
                       "[" + at(c, "execution_count").dump() + "]",
                       at(c, "status").is_string() ? c["status"].get<std::string>() : "ok"});
  const json& flight = at(execution, "cell_in_flight");
  if (at(flight, "started_at_ms").is_number())
    spans.push_back({flight["started_at_ms"].get<double>(),
                     std::isnan(end_t) ? flight["started_at_ms"].get<double>() : end_t,
                     "[" + at(flight, "execution_count").dump() + "]", "in flight"});

  double t0 = INFINITY, t1 = -INFINITY, vmax = 0;
  for (const auto& s : series)
    for (const auto& p : s.points) {
      t0 = std::min(t0, p.t);
      t1 = std::max(t1, p.t);
      vmax = std::max(vmax, p.v);
    }
  // The tightest limit is drawn across the whole chart (if it is not off the scale).
  double limit = NAN;
  std::string limit_name;
  const json& tightest = at(at(memory, "limits"), "tightest");
  if (at(tightest, "bytes").is_number()) {
    limit = tightest["bytes"].get<double>();
    limit_name = at(tightest, "name").is_string() ? tightest["name"].get<std::string>() : "limit";
  }
  if (!std::isnan(end_t)) t1 = std::max(t1, end_t);
  for (const auto& sp : spans) {
    t0 = std::min(t0, sp.from);
    t1 = std::max(t1, sp.to);
  }
  const bool have_data = std::isfinite(t0) && std::isfinite(t1);
  if (!std::isnan(limit) && (vmax == 0 || limit <= vmax * 4)) vmax = std::max(vmax, limit);
  if (vmax <= 0) vmax = 1;
  vmax *= 1.08;
  if (have_data && t1 - t0 < 1000) t0 = t1 - 1000;

  const double x0 = 78, x1 = width - 16, y0 = 28, y1 = height - 64;
  auto X = [&](double t) { return x0 + (t - t0) / (t1 - t0) * (x1 - x0); };
  auto Y = [&](double v) { return y1 - v / vmax * (y1 - y0); };

  std::ostringstream svg;
  svg << "<svg class=\"chart\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
      << width << ' ' << height
      << "\" role=\"img\" aria-label=\"Memory over time\">\n<title>Memory over time</title>\n";
  svg << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << x1 - x0 << "\" height=\""
      << y1 - y0 << "\" fill=\"#fbfbfc\" stroke=\"#d0d7de\"/>\n";
  if (!have_data) {
    svg << "<text x=\"" << (x0 + x1) / 2 << "\" y=\"" << (y0 + y1) / 2
        << "\" text-anchor=\"middle\" fill=\"#57606a\">no memory samples in this "
           "report</text>\n</svg>\n";
    return svg.str();
  }
  // Value grid and labels.
  for (int i = 0; i <= 4; ++i) {
    const double v = vmax / 1.08 * i / 4;
    svg << "<line x1=\"" << x0 << "\" x2=\"" << x1 << "\" y1=\"" << num(Y(v)) << "\" y2=\""
        << num(Y(v)) << "\" stroke=\"#eaeef2\"/><text x=\"" << x0 - 6 << "\" y=\"" << num(Y(v) + 4)
        << "\" text-anchor=\"end\" font-size=\"11\" fill=\"#57606a\">"
        << escape_html(util::format_bytes(v)) << "</text>\n";
  }
  // Time labels, relative to the end.
  const double ref = std::isnan(end_t) ? t1 : end_t;
  for (int i = 0; i <= 5; ++i) {
    const double t = t0 + (t1 - t0) * i / 5;
    svg << "<text x=\"" << num(X(t)) << "\" y=\"" << y1 + 44 << "\" text-anchor=\"middle\" "
        << "font-size=\"11\" fill=\"#57606a\">" << relative_time((t - ref) / 1000.0) << "</text>\n";
  }
  // Cells on the time axis.
  for (const auto& sp : spans) {
    const double a = X(sp.from), b = std::max(X(sp.to), a + 2);
    const char* fill = sp.status == "in flight" ? "#ffd8b5"
                       : sp.status == "error"   ? "#ffcecb"
                                                : "#d8e8ff";
    svg << "<g class=\"cell\"><rect x=\"" << num(a) << "\" y=\"" << y1 + 8 << "\" width=\""
        << num(b - a) << "\" height=\"18\" fill=\"" << fill << "\" stroke=\"#8c959f\"><title>cell "
        << escape_html(sp.label) << " " << escape_html(sp.status) << "</title></rect>";
    if (b - a > 24)
      svg << "<text x=\"" << num((a + b) / 2) << "\" y=\"" << y1 + 21
          << "\" text-anchor=\"middle\" font-size=\"10\">" << escape_html(sp.label) << "</text>";
    svg << "</g>\n";
  }
  svg << "<text x=\"" << x0 - 6 << "\" y=\"" << y1 + 21
      << "\" text-anchor=\"end\" font-size=\"11\" fill=\"#57606a\">cells</text>\n";
  // The limit line.
  if (!std::isnan(limit) && limit <= vmax)
    svg << "<path class=\"series limit\" d=\"M " << num(x0) << ',' << num(Y(limit)) << " L "
        << num(x1) << ',' << num(Y(limit)) << "\" stroke=\"#cf222e\" stroke-width=\"1.5\" "
        << "stroke-dasharray=\"6 4\" fill=\"none\"><title>" << escape_html(limit_name) << ": "
        << escape_html(util::format_bytes(limit)) << "</title></path>\n";
  // The series.
  int legend = 0;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    std::string d;
    for (std::size_t i = 0; i < s.points.size(); ++i)
      d += (i == 0 ? "M " : " L ") + num(X(s.points[i].t)) + ',' + num(Y(s.points[i].v));
    if (s.points.size() == 1) d += " l 2,0";
    svg << "<path class=\"series " << s.key << "\" d=\"" << d << "\" stroke=\"" << s.color
        << "\" stroke-width=\"1.8\" fill=\"none\"" << (s.dashed ? " stroke-dasharray=\"3 3\"" : "")
        << "/>\n";
    svg << "<rect x=\"" << x0 + 8 + legend * 170 << "\" y=\"8\" width=\"12\" height=\"4\" fill=\""
        << s.color << "\"/><text x=\"" << x0 + 24 + legend * 170 << "\" y=\"14\" font-size=\"11\">"
        << s.label << "</text>\n";
    ++legend;
  }
  if (!std::isnan(limit))
    svg << "<text x=\"" << x0 + 8 + legend * 170 << "\" y=\"14\" font-size=\"11\" fill=\"#cf222e\">"
        << "- - " << escape_html(limit_name) << " " << escape_html(util::format_bytes(limit))
        << "</text>\n";
  // The death (or the hang) marker.
  if (!std::isnan(end_t)) {
    std::string what = "died";
    const json& term = at(r, "termination");
    if (at(term, "signal_name").is_string())
      what += " of " + term["signal_name"].get<std::string>();
    else if (at(term, "exit_code").is_number())
      what += ", exit " + term["exit_code"].dump();
    if (!at(r, "hang").is_null() && term.is_null()) what = "hang detected";
    svg << "<g class=\"death\"><line x1=\"" << num(X(end_t)) << "\" x2=\"" << num(X(end_t))
        << "\" y1=\"" << y0 << "\" y2=\"" << y1 + 28
        << "\" stroke=\"#82071e\" stroke-width=\"2\"/><text x=\"" << num(X(end_t) - 4) << "\" y=\""
        << y0 + 14
        << "\" text-anchor=\"end\" font-size=\"12\" font-weight=\"bold\" fill=\"#82071e\">"
        << escape_html(what) << "</text></g>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace kwd::report
