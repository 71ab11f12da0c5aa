#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "kwd/diagnosis/report_view.hpp"
#include "kwd/report/html_page.hpp"
#include "kwd/timeline/trend.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::report {
namespace {

using diagnosis::ReportView;
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

// Coarse samples (older, one per period) then the full-rate ones, for one series.
std::vector<Point> series_points(const ReportView& r, const std::string& key) {
  std::vector<Point> points;
  const double recent_start = r.number("/memory/samples/t_ms/0").value_or(INFINITY);
  for (const char* part : {"older_samples", "samples"}) {
    const std::string base = std::string("/memory/") + part + "/";
    const auto& t = r.array(base + "t_ms");
    const auto& v = r.array(base + key);
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

std::string relative_time(double seconds, bool tenths) {
  // Beyond a century the axis is meaningless anyway, and lround would overflow.
  if (!std::isfinite(seconds) || std::fabs(seconds) > 3.2e9) return "?";
  if (tenths && std::fabs(seconds) < 60 && std::lround(seconds * 10) % 10 != 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f s", std::fabs(seconds));
    return (seconds < 0 ? "−" : "+") + std::string(text);
  }
  const long s = std::lround(seconds);
  if (s == 0) return "0 s";
  const long a = std::labs(s);
  std::string text = a >= 60 ? std::to_string(a / 60) + " min" +
                                   (a % 60 ? " " + std::to_string(a % 60) + " s" : "")
                             : std::to_string(a) + " s";
  return (s < 0 ? "−" : "+") + text;
}

}  // namespace

std::string render_memory_chart(const json& report, int width, int height) {
  const ReportView r(report);
  std::vector<Series> series{
      {"rss", "RSS (kernel processes)", "#1f6feb", false, {}},
      {"gpu_used", "GPU memory (kernel)", "#8250df", false, {}},
      {"cgroup_usage", "cgroup usage", "#bf8700", false, {}},
      {"cgroup_limit", "cgroup limit", "#cf222e", true, {}},
  };
  for (auto& s : series)
    s.points = series_points(r, s.key);

  // The end of the story: the death, or when the hang was detected.
  const double end_t =
      r.number("/kernel/died_at_ms").value_or(r.number("/hang/detected_at_ms").value_or(NAN));

  // Cells as spans: the finished ones, then the one in flight up to the end.
  struct Span {
    double from, to;
    std::string label, status;
  };
  std::vector<Span> spans;
  const auto label = [](const ReportView& cell) {
    return "[" + cell.scalar("/execution_count").value_or("?") + "]";
  };
  for (const auto& item : r.array("/execution/last_cells")) {
    const ReportView c(item);
    const auto from = c.number("/started_at_ms"), to = c.number("/ended_at_ms");
    if (from && to) spans.push_back({*from, *to, label(c), c.text("/status").value_or("ok")});
  }
  if (const auto flight = r.object("/execution/cell_in_flight"))
    if (const auto from = flight->number("/started_at_ms"))
      spans.push_back({*from, std::isnan(end_t) ? *from : end_t, label(*flight), "in flight"});

  // The kernel's own scale: its series set the height; a limit is drawn only when it is near
  // (within twice the kernel's peak), else named in the legend as off the scale, so that a
  // 128 GiB machine does not flatten a 2 GiB kernel into the axis.
  double t0 = INFINITY, t1 = -INFINITY, vmax = 0;
  for (const auto& s : series)
    for (const auto& p : s.points) {
      t0 = std::min(t0, p.t);
      t1 = std::max(t1, p.t);
      if (!s.dashed) vmax = std::max(vmax, p.v);
    }
  const auto near = [&](double v) { return vmax > 0 && v <= vmax * 2; };
  std::vector<std::string> off_scale;
  for (auto& s : series) {
    if (!s.dashed || s.points.empty()) continue;
    double top = 0;
    for (const auto& p : s.points)
      top = std::max(top, p.v);
    if (near(top)) {
      vmax = std::max(vmax, top);
    } else {
      off_scale.push_back(std::string(s.label) + " " + util::format_bytes(top));
      s.points.clear();
    }
  }
  // The tightest limit is drawn across the whole chart when it is near.
  const double limit = r.number("/memory/limits/tightest/bytes").value_or(NAN);
  const std::string limit_name =
      timeline::limit_in_words(r.text("/memory/limits/tightest/name").value_or("limit"));
  if (!std::isnan(end_t)) t1 = std::max(t1, end_t);
  for (const auto& sp : spans) {
    t0 = std::min(t0, sp.from);
    t1 = std::max(t1, sp.to);
  }
  const bool have_data = std::isfinite(t0) && std::isfinite(t1);
  const bool limit_drawn = !std::isnan(limit) && near(limit);
  if (limit_drawn) vmax = std::max(vmax, limit);
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
  // Time labels, relative to the end, at round steps from it (each label once: six evenly
  // spaced ticks over 3 s read "-2 s" twice).
  const double ref = std::isnan(end_t) ? t1 : end_t;
  static constexpr double kSteps[] = {0.1,  0.2,   0.5,   1,     2,     5,      10,    15,
                                      30,   60,    120,   300,   600,   900,    1800,  3600,
                                      7200, 14400, 21600, 43200, 86400, 172800, 604800};
  const double span_s = (t1 - t0) / 1000.0;
  double step = kSteps[std::size(kSteps) - 1];
  for (const double s : kSteps)
    if (span_s / s <= 6) {
      step = s;
      break;
    }
  if (std::isfinite(span_s) && span_s > 0 && span_s / step <= 12) {
    const double first = std::ceil((t0 - ref) / 1000.0 / step - 1e-9);
    for (double k = first; ref + k * step * 1000.0 <= t1 + 1e-6; k += 1) {
      const double t = ref + k * step * 1000.0;
      svg << "<text x=\"" << num(X(t)) << "\" y=\"" << y1 + 44 << "\" text-anchor=\"middle\" "
          << "font-size=\"11\" fill=\"#57606a\">" << relative_time(k * step, step < 1)
          << "</text>\n";
    }
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
  if (limit_drawn)
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
  if (limit_drawn)
    svg << "<text x=\"" << x0 + 8 + legend * 170 << "\" y=\"14\" font-size=\"11\" fill=\"#cf222e\">"
        << "- - " << escape_html(limit_name) << " " << escape_html(util::format_bytes(limit))
        << "</text>\n";
  else if (!std::isnan(limit))
    off_scale.push_back(limit_name + " " + util::format_bytes(limit));
  if (!off_scale.empty()) {
    std::string text = "far above, not drawn: ";
    for (std::size_t i = 0; i < off_scale.size(); ++i)
      text += (i > 0 ? ", " : "") + off_scale[i];
    svg << "<text class=\"off-scale\" x=\"" << x1 << "\" y=\"" << y0 - 6
        << "\" text-anchor=\"end\" font-size=\"11\" fill=\"#57606a\">" << escape_html(text)
        << "</text>\n";
  }
  // The death (or the hang) marker.
  if (!std::isnan(end_t)) {
    std::string what = "died";
    if (auto signal = r.text("/termination/signal_name"))
      what += " of " + *signal;
    else if (r.number("/termination/exit_code"))
      what += ", exit " + r.scalar("/termination/exit_code").value_or("?");
    if (r.has("/hang") && !r.has("/termination")) what = "hang detected";
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
