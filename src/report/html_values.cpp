#include "kwd/report/html_values.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "kwd/report/html_page.hpp"
#include "kwd/report/html_prose.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::report {

using nlohmann::json;

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "—";
  return v.dump();
}

namespace {

// How a number is read, from the name it has in the report (and its parent's: a trend's
// "peak" under "rss" is bytes, under "processes" a count).
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
  if (words == key) return escape_html(key);
  return "<span title=\"" + escape_html(key) + "\">" + escape_html(words) + "</span>";
}

}  // namespace

void render_value(std::ostringstream& out, const json& v, int depth, const NumberContext& context) {
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
      out << "<pre>" << escape_html(s) << "</pre>";
    else
      out << escape_html(s);
  } else if (v.is_number()) {
    const std::string raw = value_text(v);
    const std::string people = number_for_people(v.get<double>(), context);
    if (is_epoch_ms(v.get<double>(), context))
      out << people;  // already escaped; no raw epoch number as a tooltip either
    else if (people.empty())
      out << escape_html(raw);
    else
      out << "<span title=\"" << escape_html(raw) << "\">" << escape_html(people) << "</span>";
  } else if (v.is_boolean()) {
    out << "<span title=\"" << (v.get<bool>() ? "true" : "false") << "\">"
        << (v.get<bool>() ? "yes" : "no") << "</span>";
  } else {
    out << escape_html(value_text(v));
  }
}

}  // namespace kwd::report
