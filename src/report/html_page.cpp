#include "kwd/report/html_page.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/report/html_prose.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::report {
namespace {

using diagnosis::ReportView;
using nlohmann::json;

// Inline only: the Content-Security-Policy allows inline styles and nothing else.
constexpr const char* kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.headline{font-size:22px;font-weight:600;color:#82071e;margin:8px 0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;background:#eaeef2;margin-right:6px;font-size:12px}
.badge.high{background:#dafbe1}.badge.medium{background:#fff8c5}.badge.low{background:#ffebe9}
.badge.error{background:#ffebe9;color:#82071e}.badge.warning{background:#fff8c5;color:#7d4e00}
table{border-collapse:collapse;margin:4px 0;font-size:13px;max-width:100%} td,th{border:1px solid #d0d7de;padding:3px 6px;vertical-align:top;text-align:left;overflow-wrap:anywhere}
th{background:#f6f8fa} code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap;word-break:break-all}
.code .here{background:#ffebe9;font-weight:bold}.muted{color:#57606a}.missing{color:#9a6700}
ol.remedies li{margin-bottom:8px}.why{color:#57606a;font-size:13px}
details{margin:6px 0} .kv td:first-child{font-weight:600;white-space:nowrap}
)css";

std::string esc(const std::string& s) {
  return escape_html(s);
}

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "—";
  return v.dump();
}

// A field of the report (or of one item of it) as HTML-escaped text; "—" when not known.
std::string field(const ReportView& v, std::string_view pointer) {
  const auto* value = v.find(pointer);
  return esc(value != nullptr ? text_of(*value) : "—");
}

// How a number is read, from the name it has in the report (and its parent's: a trend's
// "peak" under "rss" is bytes, under "processes" a count).
struct NumberContext {
  std::string key, parent;
  double died_at_ms = NAN;  // for "4.2 s before death"
};

bool bytes_named(std::string_view name) {
  static const std::set<std::string_view> bytes = {"rss",
                                                   "pss",
                                                   "swap",
                                                   "uss",
                                                   "gpu_used",
                                                   "gpu_total",
                                                   "gpu_device_used",
                                                   "cgroup_usage",
                                                   "cgroup_limit",
                                                   "cgroup_max_usage",
                                                   "mem_available",
                                                   "mem_total",
                                                   "used",
                                                   "total",
                                                   "limit",
                                                   "current",
                                                   "max_usage",
                                                   "free",
                                                   "rss_start",
                                                   "rss_end",
                                                   "rss_peak",
                                                   "rss_delta",
                                                   "gpu_start",
                                                   "gpu_end",
                                                   "gpu_peak",
                                                   "gpu_delta",
                                                   "gpu_at_start",
                                                   "rss_at_start",
                                                   "memory_used",
                                                   "memory_total",
                                                   "peak_rss"};
  return bytes.contains(name) || name.ends_with("bytes") || name.ends_with("_bytes");
}

// A point in time (milliseconds since the epoch): said as the reader's local time and how long
// before the death, never as the raw number (that is in the JSON, the page's last part).
bool is_epoch_ms(double v, const NumberContext& c) {
  return (c.key.ends_with("_ms") || c.key.ends_with("_at")) && v > 1e12 && v < 9.2e18;
}

std::string significant(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// A number as a person reads it: sizes in KiB/MiB/GiB (and per second for a slope), epoch
// milliseconds as a UTC time and how long before the death, durations and ratios rounded.
// Empty when the raw number is the best way to say it.
std::string number_for_people(double v, const NumberContext& c) {
  const bool bytes_parent = bytes_named(c.parent);
  // A slope is bytes per second unless its series counts something else.
  const bool counted = c.parent == "processes" || c.parent == "threads" ||
                       c.parent.starts_with("psi") || c.parent.starts_with("pressure");
  if (c.key.starts_with("slope") && !counted)
    return (v < 0 ? "−" : "+") + util::format_bytes(std::abs(v)) + "/s";
  if (bytes_named(c.key) ||
      (bytes_parent && (c.key == "peak" || c.key == "last" || c.key == "min" || c.key == "max"))) {
    if (std::abs(v) < 1024) return "";
    return (v < 0 ? "−" : "") + util::format_bytes(std::abs(v));
  }
  if (is_epoch_ms(v, c)) return time_in_words(v, c.died_at_ms);
  if (c.key.ends_with("_s") || c.key.ends_with("_seconds")) {
    if (std::abs(v) >= 2 * 3600) return significant(v / 3600, 3) + " h";
    if (std::abs(v) >= 120) return significant(v / 60, 3) + " min";
    return significant(v, 3) + " s";
  }
  if (v != std::floor(v)) return significant(v, 4);
  return "";
}

// A field's name as a reader says it; the report's own name stays as the cell's tooltip. The
// units are the value's to say (sizes, times and durations are shown in words), so a name's
// "_ms", "_s" and "_bytes" go.
std::string key_in_words(const std::string& key) {
  static const std::map<std::string, std::string, std::less<>> words = {
      {"core_dumped", "core dumped"},
      {"returncode", "return code (as Popen shows it)"},
      {"exit_code", "exit code"},
      {"signal_name", "signal"},
      {"cell_in_flight", "cell running when it died"},
      {"execution_count", "cell number"},
      {"watchdog_received", "signals the watchdog itself received"},
      {"oom_kill_delta", "OOM kills while it ran"},
      {"oom_kill", "OOM kills"},
      {"rss", "resident memory (RSS)"},
      {"pss", "proportional memory (PSS)"},
      {"gpu_used", "GPU memory used"},
      {"gpu_total", "GPU memory"},
      {"cgroup_usage", "cgroup usage"},
      {"cgroup_limit", "cgroup limit"},
      {"mem_available", "memory available"},
      {"mem_total", "machine's memory"},
      {"pid", "process id"},
      {"ppid", "parent process id"},
      {"t_ms", "time"},
      {"slope_10s", "growth over the last 10 s"},
      {"slope_60s", "growth over the last minute"},
      {"time_to_limit_s", "time to the limit at this rate"},
  };
  if (const auto found = words.find(key); found != words.end()) return found->second;
  std::string out = key;
  for (const std::string_view unit : {"_ms", "_bytes", "_s"})
    if (out.size() > unit.size() + 1 && out.ends_with(unit)) {
      out.resize(out.size() - unit.size());
      break;
    }
  std::replace(out.begin(), out.end(), '_', ' ');
  return out;
}

// A field's name cell: its words, its name in the report as the tooltip when they differ.
std::string key_cell(const std::string& key) {
  const std::string words = key_in_words(key);
  if (words == key) return esc(key);
  return "<span title=\"" + esc(key) + "\">" + esc(words) + "</span>";
}

// Any JSON value as HTML: objects as key/value tables, arrays of objects as tables, long or
// multi-line strings as <pre>. The fallback that makes "every section" true. Numbers are said
// for people, with the raw value as the cell's tooltip.
void render_value(std::ostringstream& out, const json& v, int depth = 0,
                  const NumberContext& context = {}) {
  const auto child = [&](const std::string& key) {
    return NumberContext{key, context.key, context.died_at_ms};
  };
  if (v.is_object()) {
    if (v.empty()) {
      out << "<span class=\"muted\">(empty)</span>";
      return;
    }
    out << "<table class=\"kv\">";
    for (const auto& [k, item] : v.items()) {
      out << "<tr><td>" << key_cell(k) << "</td><td>";
      render_value(out, item, depth + 1, child(k));
      out << "</td></tr>";
    }
    out << "</table>";
  } else if (v.is_array()) {
    if (v.empty()) {
      out << "<span class=\"muted\">(none)</span>";
      return;
    }
    const bool objects =
        std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_object(); });
    if (objects && depth < 4) {
      std::vector<std::string> keys;
      for (const auto& e : v)
        for (const auto& [k, _] : e.items())
          if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      out << "<table><tr>";
      for (const auto& k : keys)
        out << "<th>" << key_cell(k) << "</th>";
      out << "</tr>";
      std::size_t rows = 0;
      for (const auto& e : v) {
        if (++rows > 200) break;
        out << "<tr>";
        for (const auto& k : keys) {
          out << "<td>";
          if (e.contains(k)) render_value(out, e[k], depth + 1, child(k));
          out << "</td>";
        }
        out << "</tr>";
      }
      out << "</table>";
      if (v.size() > 200) out << "<p class=\"muted\">" << v.size() - 200 << " more rows</p>";
    } else if (v.size() > 40 && std::all_of(v.begin(), v.end(), [](const json& e) {
                 return e.is_number() || e.is_null();
               })) {
      out << "<span class=\"muted\">" << v.size() << " values</span>";
    } else {
      bool first = true;
      for (const auto& e : v) {
        if (!first) out << ", ";
        first = false;
        render_value(out, e, depth + 1, context);
      }
    }
  } else if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s.find('\n') != std::string::npos || s.size() > 160)
      out << "<pre>" << esc(s) << "</pre>";
    else
      out << esc(s);
  } else if (v.is_number()) {
    const std::string raw = text_of(v);
    const std::string people = number_for_people(v.get<double>(), context);
    if (is_epoch_ms(v.get<double>(), context))
      out << people;  // already escaped; no raw epoch number as a tooltip either
    else if (people.empty())
      out << esc(raw);
    else
      out << "<span title=\"" << esc(raw) << "\">" << esc(people) << "</span>";
  } else if (v.is_boolean()) {
    out << "<span title=\"" << (v.get<bool>() ? "true" : "false") << "\">"
        << (v.get<bool>() ? "yes" : "no") << "</span>";
  } else {
    out << esc(text_of(v));
  }
}

// Where in the report a piece of evidence was found, in words; the JSON pointer stays as the
// tooltip, for whoever reads the JSON.
std::string where_in_words(const std::string& pointer, const std::optional<std::string>& line) {
  static const std::vector<std::pair<std::string_view, std::string_view>> places = {
      {"/termination", "how the kernel ended"},
      {"/stderr_tail", "the kernel's stderr"},
      {"/python_traceback/frames/", "Python stack, frame "},
      {"/python_traceback", "Python stack"},
      {"/memory", "memory samples"},
      {"/cgroup", "memory cgroup"},
      {"/oom_evidence", "kernel log (OOM killer)"},
      {"/kernel_log", "kernel log"},
      {"/gpu", "GPU (NVML)"},
      {"/execution", "cells"},
      {"/fingerprint", "loaded libraries"},
      {"/hang", "heartbeats"},
      {"/heartbeat", "heartbeats"},
      {"/system_memory", "system memory"},
      {"/process_tree", "process tree"},
      {"/kernel", "the kernel"},
  };
  std::string words;
  for (const auto& [prefix, name] : places)
    if (pointer.starts_with(prefix)) {
      words = std::string(name);
      if (name.ends_with("frame ")) {
        const std::string index =
            pointer.substr(prefix.size(), pointer.find('/', prefix.size()) - prefix.size());
        words += std::all_of(index.begin(), index.end(), ::isdigit) && !index.empty()
                     ? std::to_string(std::stoul(index.substr(0, 6)) + 1)
                     : index;
      }
      break;
    }
  if (words.empty()) words = pointer.empty() ? "—" : pointer;
  if (line) words += ", line " + *line;
  return words;
}

void section(std::ostringstream& out, const std::string& id, const std::string& title) {
  out << "<h2 id=\"" << esc(id) << "\">" << esc(title) << "</h2>\n";
}

void diagnosis_section(std::ostringstream& out, const ReportView& r) {
  const auto d = r.object("/diagnosis");
  if (!d) return;
  const auto& evidence = d->array("/evidence");
  section(out, "evidence", "Evidence");
  if (!evidence.empty()) {
    out << "<table><tr><th>fact</th><th>seen in</th></tr>";
    for (const auto& item : evidence) {
      const ReportView e(item);
      const std::string pointer = e.text("/pointer").value_or("");
      std::optional<std::string> line;
      if (e.number("/line")) line = e.scalar("/line");
      out << "<tr><td>" << (item.is_object() ? field(e, "/fact") : field(e, "")) << "</td><td>"
          << esc(where_in_words(pointer, line)) << "</td></tr>";
    }
    out << "</table>\n";
  } else {
    out << "<p class=\"muted\">No evidence items.</p>\n";
  }
  section(out, "remedies", "What to do");
  out << "<ol class=\"remedies\">";
  for (const auto& item : d->array("/remedies")) {
    const ReportView remedy(item);
    out << "<li>" << (item.is_object() ? field(remedy, "/text") : field(remedy, ""))
        << "<div class=\"why\">why: " << field(remedy, "/why") << "</div></li>";
  }
  out << "</ol>\n";
  const auto& missing = d->array("/missing");
  if (!missing.empty()) {
    out << "<p><b>What the report could not tell:</b></p><ul class=\"missing\">";
    for (const auto& m : missing)
      out << "<li>" << esc(text_of(m)) << "</li>";
    out << "</ul>\n";
  }
  const auto& sigs = d->array("/signatures");
  if (!sigs.empty()) {
    out << "<details><summary>Recognised stderr signatures (" << sigs.size()
        << ")</summary><table><tr><th>signature</th><th>supports</th><th>seen in</th><th>text</th>"
           "<th>seen in public</th></tr>";
    for (const auto& item : sigs) {
      const ReportView sig(item);
      out << "<tr><td>" << field(sig, "/id") << "</td><td>" << field(sig, "/supports")
          << "</td><td>"
          << esc(where_in_words(sig.text("/pointer").value_or(""), sig.scalar("/line")))
          << "</td><td><code>" << field(sig, "/text") << "</code></td><td>" << field(sig, "/source")
          << "</td></tr>";
    }
    out << "</table></details>\n";
  }
}

std::int64_t crash_line(const ReportView& r) {
  for (const auto& frame : r.array("/python_traceback/frames")) {
    const ReportView f(frame);
    if (f.text("/cell").value_or("") == "in flight")
      if (auto line = f.integer("/line")) return *line;
  }
  return 0;
}

void cell_section(std::ostringstream& out, const ReportView& r) {
  const auto cell = r.object("/execution/cell_in_flight");
  if (!cell) return;
  section(out, "cell", "Running cell [" + cell->scalar("/execution_count").value_or("—") + "]");
  out << "<p class=\"muted\">running for "
      << esc(cell->number("/running_for_s") ? util::format_duration(*cell->number("/running_for_s"))
                                            : std::string("an unknown time"));
  if (auto rss = cell->number("/rss_at_start"))
    out << ", RSS at start " << esc(util::format_bytes(*rss));
  if (auto peak = cell->number("/rss_peak")) out << ", peak " << esc(util::format_bytes(*peak));
  if (auto gpu = cell->number("/gpu_at_start"))
    out << "; GPU memory at start " << esc(util::format_bytes(*gpu));
  if (auto peak = cell->number("/gpu_peak")) out << ", peak " << esc(util::format_bytes(*peak));
  out << "</p><pre class=\"code\">";
  std::istringstream code(cell->text("/code").value_or(""));
  const std::int64_t here = crash_line(r);
  std::int64_t n = 0;
  for (std::string line; std::getline(code, line);) {
    ++n;
    const std::string row = (n < 10 ? " " : "") + std::to_string(n) + "  " + line;
    if (n == here)
      out << "<span class=\"here\">" << esc(row) << "   ← crashed here</span>\n";
    else
      out << esc(row) << "\n";
  }
  out << "</pre>\n";
}

void traceback_section(std::ostringstream& out, const ReportView& r) {
  const auto tb = r.object("/python_traceback");
  if (!tb) return;
  section(out, "python_traceback", "Python stack at the crash");
  out << "<p>" << field(*tb, "/fatal_error") << " — <span class=\"muted\">" << field(*tb, "/source")
      << "; " << field(*tb, "/thread")
      << ", most recent call first</span></p><table><tr><th>function</th><th>file</th><th>line</th>"
         "<th>code</th></tr>";
  for (const auto& frame : tb->array("/frames")) {
    const ReportView f(frame);
    out << "<tr" << (f.flag("/in_cell") ? " class=\"here\"" : "") << "><td>"
        << field(f, "/function") << "</td><td><code>" << field(f, "/file") << "</code></td><td>"
        << field(f, "/line") << "</td><td><code>" << esc(f.text("/code").value_or(""))
        << "</code></td></tr>";
  }
  out << "</table><details><summary>faulthandler's full output</summary><pre>"
      << field(*tb, "/text") << "</pre></details>\n";
}

// "cause: crash in native code" for a cause of the table; the bare id for any other.
std::string cause_badge(const ReportView& d) {
  const auto id = d.scalar("/cause");
  const auto* cause = diagnosis::find_cause(id.value_or(""));
  if (cause == nullptr) return "<span class=\"badge\">cause: " + esc(id.value_or("—")) + "</span>";
  return "<span class=\"badge " + std::string(diagnosis::severity_name(cause->severity)) +
         "\" title=\"" + esc(std::string(cause->id)) +
         "\">cause: " + esc(std::string(cause->name)) + "</span>";
}

}  // namespace

std::string render_html(const json& report) {
  const ReportView r(report);
  std::ostringstream out;
  const bool hang = r.text("/kind").value_or("") == "hang";
  const std::string headline = cause_line(report);
  const std::string notebook = r.text("/kernel/notebook").value_or("");

  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "style-src 'unsafe-inline'; img-src data:\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<title>" << esc(notebook.empty() ? std::string() : notebook + ": ") << esc(headline)
      << " — kernel-watchdog</title>\n<style>" << kStyle << "</style></head><body><main>\n";
  out << "<h1>Kernel " << (hang ? "hang" : "crash") << " report <span class=\"muted\">"
      << field(r, "/id") << "</span></h1>\n";
  out << "<div class=\"headline\">" << esc(headline) << "</div>\n<p>";
  if (const auto d = r.object("/diagnosis")) {
    const std::string confidence = d->scalar("/confidence").value_or("—");
    out << cause_badge(*d) << "<span class=\"badge " << esc(confidence)
        << "\">confidence: " << esc(confidence) << "</span>";
  }
  // The facts the report has, in words; what it lacks is left out rather than shown as "—".
  std::vector<std::string> facts;
  if (!notebook.empty()) facts.push_back("notebook " + esc(notebook));
  if (r.has("/kernel/pid")) facts.push_back("kernel pid " + field(r, "/kernel/pid"));
  if (auto started = r.integer("/kernel/started_at_ms"))
    facts.push_back("started " + esc(util::local_wall_time(*started)));
  if (hang) {
    if (auto detected = r.integer("/hang/detected_at_ms"))
      facts.push_back("hang detected " + esc(util::local_wall_time(*detected)));
  } else if (auto died = r.integer("/kernel/died_at_ms")) {
    facts.push_back("died " + esc(util::local_wall_time(*died)));
  }
  if (auto up = r.number("/kernel/uptime_s"))
    facts.push_back("up " + esc(util::format_duration(*up)));
  std::string joined;
  for (const auto& fact : facts)
    joined += (joined.empty() ? "" : ", ") + fact;
  out << "<span class=\"muted\">" << joined << "</span></p>\n";

  diagnosis_section(out, r);
  section(out, "memory", "Memory over time");
  out << render_memory_chart(report, 1040, 340);
  cell_section(out, r);
  traceback_section(out, r);

  const double died_at_ms =
      r.number("/kernel/died_at_ms").value_or(r.number("/hang/detected_at_ms").value_or(NAN));
  // Every other section, in a stable and useful order, then anything else there is.
  const std::vector<std::pair<const char*, const char*>> order{
      {"termination", "How it ended"},
      {"execution", "The cells"},
      {"memory", "Memory: trend, limits, peaks"},
      {"fingerprint", "Environment fingerprint"},
      {"gpu", "GPU"},
      {"cgroup", "Its memory cgroup"},
      {"system_memory", "The machine's memory"},
      {"oom_evidence", "The OOM killer"},
      {"process_tree", "Process tree"},
      {"hang", "Hang"},
      {"heartbeat", "Heartbeats"},
      {"protocol", "Messages"},
      {"kernel", "The kernel process"},
      {"watchdog", "The watchdog"},
      {"probes", "What the watchdog could see"},
      {"notes", "What the watchdog could not do"},
  };
  std::set<std::string> shown{"diagnosis", "python_traceback", "stderr_tail", "id",
                              "schema",    "schema_version",   "kind"};
  for (const auto& [key, title] : order) {
    shown.insert(key);
    const auto* found = r.find(std::string("/") + key);
    if (found == nullptr) continue;
    section(out, key, title);
    if (const auto words = section_in_words(key, report)) {
      out << *words << "\n";
      continue;
    }
    json value = *found;
    if (std::string_view(key) == "memory" && value.is_object()) {
      // The series are in the chart; the table keeps the rest.
      for (const char* series : {"samples", "older_samples"})
        if (value.contains(series) && value[series].is_object()) {
          json counts = json::object();
          for (const auto& [name, points] : value[series].items())
            counts[name] = std::to_string(points.size()) + " points";
          value[series] = counts;
        }
    }
    render_value(out, value, 0, NumberContext{key, "", died_at_ms});
    out << "\n";
  }
  // Sections from other writers, shown as they are.
  if (const auto* whole = r.find(""); whole != nullptr && whole->is_object())
    for (const auto& [key, value] : whole->items()) {
      if (shown.contains(key) || value.is_null()) continue;
      section(out, key, key);
      render_value(out, value);
      out << "\n";
    }
  section(out, "stderr", "Kernel stderr (last bytes kept)");
  out << "<p class=\"muted\">" << field(r, "/stderr_tail/bytes_total") << " bytes written in all"
      << (r.flag("/stderr_tail/truncated") ? ", older bytes dropped" : "") << "</p><pre>"
      << esc(r.text("/stderr_tail/text").value_or("")) << "</pre>\n";
  out << "<h2 id=\"raw\">The report as JSON</h2><details id=\"raw-json\"><summary>"
      << "The whole report as the program wrote it (" << field(r, "/schema") << " version "
      << field(r, "/schema_version") << ")</summary><pre>" << esc(to_text(report, 1))
      << "</pre></details>\n";
  out << "</main></body></html>\n";
  return out.str();
}

}  // namespace kwd::report
