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
#include "kwd/report/html_values.hpp"
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

// A field of the report (or of one item of it) as HTML-escaped text; "—" when not known.
std::string field(const ReportView& v, std::string_view pointer) {
  const auto* value = v.find(pointer);
  return escape_html(value != nullptr ? value_text(*value) : "—");
}

// Where in the report a piece of evidence was found, in words; the JSON pointer stays as the
// tooltip, for whoever reads the JSON.
std::string where_in_words(const std::string& pointer, const std::optional<std::string>& line) {
  static const std::vector<std::pair<std::string_view, std::string_view>> places = {
      {"/termination", "how the kernel ended"},
      {"/stderr_tail", "the kernel's stderr"},
      {"/python_traceback/frames/", "Python stack, frame "},
      {"/python_traceback", "Python stack"},
      {"/crash_stack", "native stack at the crash"},
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
  out << "<h2 id=\"" << escape_html(id) << "\">" << escape_html(title) << "</h2>\n";
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
          << escape_html(where_in_words(pointer, line)) << "</td></tr>";
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
      out << "<li>" << escape_html(value_text(m)) << "</li>";
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
          << escape_html(where_in_words(sig.text("/pointer").value_or(""), sig.scalar("/line")))
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
      << escape_html(cell->number("/running_for_s")
                         ? util::format_duration(*cell->number("/running_for_s"))
                         : std::string("an unknown time"));
  if (auto rss = cell->number("/rss_at_start"))
    out << ", RSS at start " << escape_html(util::format_bytes(*rss));
  if (auto peak = cell->number("/rss_peak"))
    out << ", peak " << escape_html(util::format_bytes(*peak));
  if (auto gpu = cell->number("/gpu_at_start"))
    out << "; GPU memory at start " << escape_html(util::format_bytes(*gpu));
  if (auto peak = cell->number("/gpu_peak"))
    out << ", peak " << escape_html(util::format_bytes(*peak));
  out << "</p><pre class=\"code\">";
  std::istringstream code(cell->text("/code").value_or(""));
  const std::int64_t here = crash_line(r);
  std::int64_t n = 0;
  for (std::string line; std::getline(code, line);) {
    ++n;
    const std::string row = (n < 10 ? " " : "") + std::to_string(n) + "  " + line;
    if (n == here)
      out << "<span class=\"here\">" << escape_html(row) << "   ← crashed here</span>\n";
    else
      out << escape_html(row) << "\n";
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
        << field(f, "/line") << "</td><td><code>" << escape_html(f.text("/code").value_or(""))
        << "</code></td></tr>";
  }
  out << "</table><details><summary>faulthandler's full output</summary><pre>"
      << field(*tb, "/text") << "</pre></details>\n";
}

// The faulting thread's native frames (crash_stack), before the Python ones.
void crash_stack_section(std::ostringstream& out, const ReportView& r) {
  const auto stack = r.object("/crash_stack");
  if (!stack) return;
  section(out, "crash_stack", "Native stack at the crash");
  if (const auto missing = stack->text("/missing"))
    out << "<p class=\"muted\">Not all there: " << escape_html(*missing) << "</p>";
  const auto& frames = stack->array("/frames");
  if (frames.empty()) return;
  out << "<p class=\"muted\">thread " << field(*stack, "/tid") << ", signal "
      << field(*stack, "/signal") << ", fault address " << field(*stack, "/fault_address")
      << "; most recent call first</p><table><tr><th>function</th><th>library</th><th>file</th>"
         "<th>line</th><th>pc</th></tr>";
  for (const auto& frame : frames) {
    const ReportView f(frame);
    out << "<tr><td><code>" << field(f, "/function") << "</code></td><td><code>"
        << field(f, "/module") << "</code></td><td><code>" << field(f, "/file")
        << "</code></td><td>" << field(f, "/line") << "</td><td><code>" << field(f, "/pc")
        << "</code></td></tr>";
  }
  out << "</table>\n";
}

// "cause: crash in native code" for a cause of the table; the bare id for any other.
std::string cause_badge(const ReportView& d) {
  const auto id = d.scalar("/cause");
  const auto* cause = diagnosis::find_cause(id.value_or(""));
  if (cause == nullptr)
    return "<span class=\"badge\">cause: " + escape_html(id.value_or("—")) + "</span>";
  return "<span class=\"badge " + std::string(diagnosis::severity_name(cause->severity)) +
         "\" title=\"" + escape_html(std::string(cause->id)) +
         "\">cause: " + escape_html(std::string(cause->name)) + "</span>";
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
      << "<title>" << escape_html(notebook.empty() ? std::string() : notebook + ": ")
      << escape_html(headline) << " — kernel-watchdog</title>\n<style>" << kStyle
      << "</style></head><body><main>\n";
  out << "<h1>Kernel " << (hang ? "hang" : "crash") << " report <span class=\"muted\">"
      << field(r, "/id") << "</span></h1>\n";
  out << "<div class=\"headline\">" << escape_html(headline) << "</div>\n<p>";
  if (const auto d = r.object("/diagnosis")) {
    const std::string confidence = d->scalar("/confidence").value_or("—");
    out << cause_badge(*d) << "<span class=\"badge " << escape_html(confidence)
        << "\">confidence: " << escape_html(confidence) << "</span>";
  }
  // The facts the report has, in words; what it lacks is left out rather than shown as "—".
  std::vector<std::string> facts;
  if (!notebook.empty()) facts.push_back("notebook " + escape_html(notebook));
  if (r.has("/kernel/pid")) facts.push_back("kernel pid " + field(r, "/kernel/pid"));
  if (auto started = r.integer("/kernel/started_at_ms"))
    facts.push_back("started " + escape_html(util::local_wall_time(*started)));
  if (hang) {
    if (auto detected = r.integer("/hang/detected_at_ms"))
      facts.push_back("hang detected " + escape_html(util::local_wall_time(*detected)));
  } else if (auto died = r.integer("/kernel/died_at_ms")) {
    facts.push_back("died " + escape_html(util::local_wall_time(*died)));
  }
  if (auto up = r.number("/kernel/uptime_s"))
    facts.push_back("up " + escape_html(util::format_duration(*up)));
  std::string joined;
  for (const auto& fact : facts)
    joined += (joined.empty() ? "" : ", ") + fact;
  out << "<span class=\"muted\">" << joined << "</span></p>\n";

  diagnosis_section(out, r);
  section(out, "memory", "Memory over time");
  out << render_memory_chart(report, 1040, 340);
  cell_section(out, r);
  crash_stack_section(out, r);
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
      {"drm_gpu", "GPU (AMD/Intel, from DRM fdinfo)"},
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
  std::set<std::string> shown{"diagnosis", "python_traceback", "crash_stack",    "stderr_tail",
                              "id",        "schema",           "schema_version", "kind"};
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
      << escape_html(r.text("/stderr_tail/text").value_or("")) << "</pre>\n";
  out << "<h2 id=\"raw\">The report as JSON</h2><details id=\"raw-json\"><summary>"
      << "The whole report as the program wrote it (" << field(r, "/schema") << " version "
      << field(r, "/schema_version") << ")</summary><pre>" << escape_html(to_text(report, 1))
      << "</pre></details>\n";
  out << "</main></body></html>\n";
  return out.str();
}

}  // namespace kwd::report
