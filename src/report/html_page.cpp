#include "kwd/report/html_page.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kwd/report/report_document.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::report {
namespace {

using nlohmann::json;

// Inline only: the Content-Security-Policy allows inline styles and nothing else.
constexpr const char* kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.headline{font-size:22px;font-weight:600;color:#82071e;margin:8px 0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;background:#eaeef2;margin-right:6px;font-size:12px}
.badge.high{background:#dafbe1}.badge.medium{background:#fff8c5}.badge.low{background:#ffebe9}
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

const json& at(const json& j, const char* key) {
  static const json null_value;
  return j.is_object() && j.contains(key) ? j[key] : null_value;
}

// Any JSON value as HTML: objects as key/value tables, arrays of objects as tables, long or
// multi-line strings as <pre>. The fallback that makes "every section" true.
void render_value(std::ostringstream& out, const json& v, int depth = 0) {
  if (v.is_object()) {
    if (v.empty()) {
      out << "<span class=\"muted\">(empty)</span>";
      return;
    }
    out << "<table class=\"kv\">";
    for (const auto& [k, item] : v.items()) {
      out << "<tr><td>" << esc(k) << "</td><td>";
      render_value(out, item, depth + 1);
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
        out << "<th>" << esc(k) << "</th>";
      out << "</tr>";
      std::size_t rows = 0;
      for (const auto& e : v) {
        if (++rows > 200) break;
        out << "<tr>";
        for (const auto& k : keys) {
          out << "<td>";
          if (e.contains(k)) render_value(out, e[k], depth + 1);
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
        render_value(out, e, depth + 1);
      }
    }
  } else if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s.find('\n') != std::string::npos || s.size() > 160)
      out << "<pre>" << esc(s) << "</pre>";
    else
      out << esc(s);
  } else {
    out << esc(text_of(v));
  }
}

void section(std::ostringstream& out, const std::string& id, const std::string& title) {
  out << "<h2 id=\"" << esc(id) << "\">" << esc(title) << "</h2>\n";
}

void diagnosis_section(std::ostringstream& out, const json& d) {
  if (!d.is_object()) return;
  const auto evidence = at(d, "evidence");
  section(out, "evidence", "Evidence");
  if (evidence.is_array() && !evidence.empty()) {
    out << "<table><tr><th>fact</th><th>where in the report</th></tr>";
    for (const auto& e : evidence)
      out << "<tr><td>" << esc(text_of(at(e, "fact"))) << "</td><td><code>"
          << esc(text_of(at(e, "pointer")))
          << (at(e, "line").is_number() ? " line " + at(e, "line").dump() : "")
          << "</code></td></tr>";
    out << "</table>\n";
  } else {
    out << "<p class=\"muted\">No evidence items.</p>\n";
  }
  section(out, "remedies", "What to do");
  out << "<ol class=\"remedies\">";
  for (const auto& r : at(d, "remedies").is_array() ? d["remedies"] : json::array())
    out << "<li>" << esc(text_of(at(r, "text")))
        << "<div class=\"why\">why: " << esc(text_of(at(r, "why"))) << "</div></li>";
  out << "</ol>\n";
  const auto missing = at(d, "missing");
  if (missing.is_array() && !missing.empty()) {
    out << "<p><b>What the report could not tell:</b></p><ul class=\"missing\">";
    for (const auto& m : missing)
      out << "<li>" << esc(text_of(m)) << "</li>";
    out << "</ul>\n";
  }
  const auto sigs = at(d, "signatures");
  if (sigs.is_array() && !sigs.empty()) {
    out << "<details><summary>Recognised stderr signatures (" << sigs.size()
        << ")</summary><table><tr><th>signature</th><th>supports</th><th>line</th><th>text</th>"
           "<th>seen in public</th></tr>";
    for (const auto& s : sigs)
      out << "<tr><td>" << esc(text_of(at(s, "id"))) << "</td><td>"
          << esc(text_of(at(s, "supports"))) << "</td><td>" << esc(text_of(at(s, "pointer"))) << " "
          << esc(text_of(at(s, "line"))) << "</td><td><code>" << esc(text_of(at(s, "text")))
          << "</code></td><td>" << esc(text_of(at(s, "source"))) << "</td></tr>";
    out << "</table></details>\n";
  }
}

int crash_line(const json& r) {
  for (const auto& f : at(at(r, "python_traceback"), "frames").is_array()
                           ? r["python_traceback"]["frames"]
                           : json::array())
    if (at(f, "cell").is_string() && f["cell"] == "in flight" && at(f, "line").is_number())
      return f["line"].get<int>();
  return 0;
}

void cell_section(std::ostringstream& out, const json& r) {
  const json& cell = at(at(r, "execution"), "cell_in_flight");
  if (!cell.is_object()) return;
  section(out, "cell", "Cell in flight [" + text_of(at(cell, "execution_count")) + "]");
  out << "<p class=\"muted\">running for " << esc(text_of(at(cell, "running_for_s"))) << " s";
  if (at(cell, "rss_at_start").is_number())
    out << ", RSS at start " << esc(util::format_bytes(cell["rss_at_start"].get<double>()));
  if (at(cell, "rss_peak").is_number())
    out << ", peak " << esc(util::format_bytes(cell["rss_peak"].get<double>()));
  out << "</p><pre class=\"code\">";
  std::istringstream code(at(cell, "code").is_string() ? cell["code"].get<std::string>() : "");
  const int here = crash_line(r);
  int n = 0;
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

void traceback_section(std::ostringstream& out, const json& tb) {
  if (!tb.is_object()) return;
  section(out, "python_traceback", "Python stack at the crash");
  out << "<p>" << esc(text_of(at(tb, "fatal_error"))) << " — <span class=\"muted\">"
      << esc(text_of(at(tb, "source"))) << "; " << esc(text_of(at(tb, "thread")))
      << ", most recent call first</span></p><table><tr><th>function</th><th>file</th><th>line</th>"
         "<th>code</th></tr>";
  for (const auto& f : at(tb, "frames").is_array() ? tb["frames"] : json::array())
    out << "<tr"
        << (at(f, "in_cell").is_boolean() && f["in_cell"].get<bool>() ? " class=\"here\"" : "")
        << "><td>" << esc(text_of(at(f, "function"))) << "</td><td><code>"
        << esc(text_of(at(f, "file"))) << "</code></td><td>" << esc(text_of(at(f, "line")))
        << "</td><td><code>" << esc(at(f, "code").is_string() ? f["code"].get<std::string>() : "")
        << "</code></td></tr>";
  out << "</table><details><summary>faulthandler's full output</summary><pre>"
      << esc(text_of(at(tb, "text"))) << "</pre></details>\n";
}

}  // namespace

std::string render_html(const json& r) {
  std::ostringstream out;
  const json& d = at(r, "diagnosis");
  const json& kernel = at(r, "kernel");
  const bool hang = at(r, "kind").is_string() && r["kind"] == "hang";
  const std::string headline = cause_line(r.is_object() ? r : json::object());

  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "style-src 'unsafe-inline'; img-src data:\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<title>" << esc(headline) << " — kernel-watchdog</title>\n<style>" << kStyle
      << "</style></head><body><main>\n";
  out << "<h1>Kernel " << (hang ? "hang" : "crash") << " report <span class=\"muted\">"
      << esc(text_of(at(r, "id"))) << "</span></h1>\n";
  out << "<div class=\"headline\">" << esc(headline) << "</div>\n<p>";
  if (d.is_object()) {
    out << "<span class=\"badge\">cause: " << esc(text_of(at(d, "cause"))) << "</span>"
        << "<span class=\"badge " << esc(text_of(at(d, "confidence")))
        << "\">confidence: " << esc(text_of(at(d, "confidence"))) << "</span>";
  }
  out << "<span class=\"muted\">kernel pid " << esc(text_of(at(kernel, "pid"))) << ", started "
      << esc(text_of(at(kernel, "started_at"))) << ", "
      << (hang ? "hang detected" : "died " + esc(text_of(at(kernel, "died_at")))) << ", up "
      << esc(text_of(at(kernel, "uptime_s"))) << " s</span></p>\n";

  diagnosis_section(out, d);
  section(out, "memory", "Memory over time");
  out << render_memory_chart(r, 1040, 340);
  cell_section(out, r);
  traceback_section(out, at(r, "python_traceback"));

  // Every other section, in a stable and useful order, then anything else there is.
  const std::vector<std::pair<const char*, const char*>> order{
      {"termination", "Termination"},
      {"execution", "Execution (cells, outputs, last error)"},
      {"memory", "Memory: trend, limits, peaks"},
      {"fingerprint", "Environment fingerprint"},
      {"gpu", "GPU"},
      {"cgroup", "cgroup"},
      {"system_memory", "System memory"},
      {"oom_evidence", "OOM-killer evidence"},
      {"process_tree", "Process tree"},
      {"hang", "Hang"},
      {"heartbeat", "Heartbeat"},
      {"protocol", "Protocol"},
      {"kernel", "Kernel"},
      {"watchdog", "Watchdog"},
      {"probes", "Probes"},
      {"notes", "Notes"},
  };
  std::set<std::string> shown{"diagnosis", "python_traceback", "stderr_tail", "id",
                              "schema",    "schema_version",   "kind"};
  for (const auto& [key, title] : order) {
    if (!r.is_object() || !r.contains(key)) continue;
    shown.insert(key);
    section(out, key, title);
    json value = r[key];
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
    render_value(out, value);
    out << "\n";
  }
  if (r.is_object())
    for (const auto& [key, value] : r.items()) {
      if (shown.contains(key)) continue;
      section(out, key, key);
      render_value(out, value);
      out << "\n";
    }
  section(out, "stderr", "Kernel stderr (last bytes kept)");
  const json& tail = at(r, "stderr_tail");
  out << "<p class=\"muted\">" << esc(text_of(at(tail, "bytes_total"))) << " bytes written in all"
      << (at(tail, "truncated").is_boolean() && tail["truncated"].get<bool>()
              ? ", older bytes dropped"
              : "")
      << "</p><pre>" << esc(at(tail, "text").is_string() ? tail["text"].get<std::string>() : "")
      << "</pre>\n";
  out << "<h2 id=\"raw\">The report as JSON</h2><details><summary>" << esc(text_of(at(r, "schema")))
      << " version " << esc(text_of(at(r, "schema_version"))) << "</summary><pre>"
      << esc(to_text(r, 1)) << "</pre></details>\n";
  out << "</main></body></html>\n";
  return out.str();
}

}  // namespace kwd::report
