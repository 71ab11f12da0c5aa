#include "kwd/report/html_prose.hpp"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "kwd/diagnosis/report_view.hpp"
#include "kwd/report/html_page.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::report {
namespace {

using diagnosis::ReportView;
using nlohmann::json;

std::string bytes(double b) {
  return util::format_bytes(b);
}

std::string count(std::int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string join(const std::vector<std::string>& parts, const std::string& last_sep = " and ") {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? last_sep : ", ";
    out += parts[i];
  }
  return out;
}

std::string first_line(const std::string& code) {
  std::istringstream in(code);
  for (std::string line; std::getline(in, line);) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    line = line.substr(start);
    return line.size() > 70 ? line.substr(0, 69) + "…" : line;
  }
  return "";
}

std::string strings_of(const json& items) {
  std::vector<std::string> out;
  for (const auto& item : items)
    out.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  return join(out);
}

struct Ctx {
  const ReportView& r;
  double died;
};

std::string termination(const Ctx& c) {
  const auto t = c.r.object("/termination");
  if (!t)
    return "<p>The kernel did not end: this report is about a kernel that stopped answering.</p>";
  std::string s;
  if (t->text("/kind").value_or("") == "signal") {
    s = "The kernel was " +
        escape_html(t->text("/description")
                        .value_or("killed by " + t->text("/signal_name").value_or("a signal"))) +
        (t->integer("/signal") ? " (signal " + std::to_string(*t->integer("/signal")) + ")" : "") +
        (t->flag("/core_dumped") ? ", and dumped core." : ", no core dump.");
  } else if (auto code = t->integer("/exit_code")) {
    s = "The kernel exited with code " + std::to_string(*code) + ".";
  } else {
    s = "The kernel ended: " + escape_html(t->text("/description").value_or("how is not known")) +
        ".";
  }
  if (auto rc = t->integer("/returncode"))
    s += " Jupyter's kernel manager sees the return code " + std::to_string(*rc) + ".";
  const auto& received = t->array("/watchdog_received");
  if (!received.empty())
    s += " The watchdog itself had received " + escape_html(strings_of(received)) +
         ", so the death was asked for.";
  return "<p>" + s + "</p>";
}

std::string kernel(const Ctx& c) {
  const auto k = c.r.object("/kernel");
  if (!k) return "";
  std::string s = "<p>The kernel";
  if (auto pid = k->integer("/pid")) s += " was process " + std::to_string(*pid) + ",";
  if (auto started = k->integer("/started_at_ms"))
    s += " started " + escape_html(util::local_wall_time(*started));
  if (auto died = k->integer("/died_at_ms"))
    s += " and died " + escape_html(util::local_wall_time(*died));
  if (auto up = k->number("/uptime_s")) s += ", after " + escape_html(util::format_duration(*up));
  s += ".";
  if (auto nb = k->text("/notebook"); nb && !nb->empty()) {
    static const std::map<std::string, std::string, std::less<>> sources = {
        {"connection_file", "the connection file"},
        {"JPY_SESSION_NAME", "the kernel's JPY_SESSION_NAME"},
        {"jupyter_server", "the Jupyter server's sessions"}};
    const auto source = k->text("/notebook_source").value_or("");
    const auto said = sources.find(source);
    s += " It ran the notebook " + escape_html(*nb) +
         (source.empty()
              ? ""
              : " (as " + escape_html(said != sources.end() ? said->second : source) + " says)") +
         ".";
  }
  s += "</p>";
  std::string argv;
  for (const auto& a : k->array("/argv"))
    argv += (argv.empty() ? "" : " ") + (a.is_string() ? a.get<std::string>() : a.dump());
  if (!argv.empty()) s += "<p>Its command line: <code>" + escape_html(argv) + "</code></p>";
  std::vector<std::string> ids;
  if (auto id = k->text("/kernel_id"); id && !id->empty())
    ids.push_back("kernel id <code>" + escape_html(*id) + "</code>");
  if (auto file = k->text("/connection_file"); file && !file->empty())
    ids.push_back("connection file <code>" + escape_html(*file) + "</code>");
  if (!ids.empty()) s += "<p>Jupyter knows it by its " + join(ids) + ".</p>";
  return s;
}

std::string watchdog(const Ctx& c) {
  const auto w = c.r.object("/watchdog");
  if (!w) return "";
  std::string s =
      "<p>kernel-watchdog " + escape_html(w->scalar("/version").value_or("")) + " watched it";
  if (auto pid = w->integer("/pid")) s += " as process " + std::to_string(*pid);
  if (auto mode = w->text("/mode")) s += ", in " + escape_html(*mode) + " mode";
  if (w->has("/faulthandler"))
    s += w->flag("/faulthandler")
             ? "; it gave the kernel Python's faulthandler, so a crash prints the Python stack"
             : "; it did not give the kernel Python's faulthandler";
  return s + ".</p>";
}

std::string execution(const Ctx& c) {
  const auto e = c.r.object("/execution");
  if (!e) return "";
  std::string s = "<p>";
  if (auto state = e->text("/state_at_death"))
    s += "When it ended the kernel was " + escape_html(*state) + ". ";
  if (auto started = e->integer("/cells_started"))
    s += count(*started, "cell had", "cells had") + " started. ";
  if (e->object("/cell_in_flight")) s += "The cell that was running is shown above. ";
  if (e->flag("/shutdown_requested")) s += "A shutdown had been requested. ";
  s += "</p>";
  const auto& last = e->array("/last_cells");
  if (!last.empty()) {
    s += "<p>The cells that ran before it, oldest first:</p><ul>";
    for (const auto& item : last) {
      const ReportView cell(item);
      std::string li = "cell [" + cell.scalar("/execution_count").value_or("?") + "]";
      if (auto code = cell.text("/code"))
        li += " <code>" + escape_html(first_line(*code)) + "</code>";
      if (auto d = cell.number("/duration_s"))
        li += " ran " + escape_html(util::format_duration(*d));
      if (auto status = cell.text("/status"); status && *status != "ok")
        li += " and ended with " + escape_html(*status);
      if (auto ended = cell.number("/ended_at_ms"))
        li += ", ended " + time_in_words(*ended, c.died);
      if (auto delta = cell.number("/rss_delta"); delta && std::abs(*delta) >= 1024)
        li += "; its memory changed by " + std::string(*delta < 0 ? "−" : "+") +
              escape_html(bytes(std::abs(*delta)));
      if (auto peak = cell.number("/rss_peak")) li += ", peak " + escape_html(bytes(*peak));
      s += "<li>" + li + "</li>";
    }
    s += "</ul>";
  }
  if (const auto err = e->object("/last_error"))
    s += "<p>The last error a cell raised: " + escape_html(err->text("/ename").value_or("?")) +
         ": " + escape_html(err->text("/evalue").value_or("")) + "</p>";
  if (auto tail = e->text("/stream_stderr_tail"); tail && !tail->empty())
    s += "<p>What the cells last wrote to stderr:</p><pre>" + escape_html(*tail) + "</pre>";
  return s;
}

std::string cgroup(const Ctx& c) {
  const auto g = c.r.object("/cgroup");
  if (!g) return "";
  std::string s = "<p>The kernel ran in the memory cgroup <code>" +
                  escape_html(g->text("/path").value_or("?")) + "</code>";
  if (auto v = g->integer("/version")) s += " (cgroup v" + std::to_string(*v) + ")";
  if (g->flag("/created_by_watchdog")) s += ", made by kernel-watchdog for this kernel alone";
  s += ". ";
  if (auto limit = g->number("/limit"); limit && *limit > 0) {
    s += "Its limit was " + escape_html(bytes(*limit));
    if (auto at = g->number("/limit_set_at")) s += ", set " + time_in_words(*at, c.died);
    s += ". ";
  } else {
    s += "It had no memory limit of its own. ";
  }
  std::vector<std::string> use;
  if (auto usage = g->number("/usage")) use.push_back(escape_html(bytes(*usage)) + " at the end");
  if (auto max = g->number("/max_usage")) use.push_back("at most " + escape_html(bytes(*max)));
  if (!use.empty()) s += "Its processes used " + join(use, ", ") + ". ";
  if (auto delta = g->integer("/oom_kill_delta"))
    s += *delta == 0
             ? "Its OOM killer did not fire while the kernel ran."
             : "Its OOM killer fired " + count(*delta, "time", "times") + " while the kernel ran.";
  if (auto fail = g->integer("/events/failcnt"); fail && *fail > 0)
    s += " Allocations hit the limit " + count(*fail, "time", "times") + ".";
  s += "</p>";
  const auto& others = g->array("/other_processes");
  if (!others.empty()) {
    s += "<p>Other processes in the cgroup:</p><ul>";
    for (const auto& item : others) {
      const ReportView p(item);
      s += "<li>process " + p.scalar("/pid").value_or("?");
      if (auto cmd = p.text("/command_line"))
        s += " <code>" + escape_html(cmd->substr(0, 100)) + "</code>";
      if (auto rss = p.number("/rss")) s += ", " + escape_html(bytes(*rss));
      s += "</li>";
    }
    s += "</ul>";
  }
  return s;
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", v);
  return buf;
}

std::string system_memory(const Ctx& c) {
  const auto m = c.r.object("/system_memory");
  if (!m) return "";
  std::string s = "<p>";
  if (auto total = m->number("/mem_total")) s += "The machine has " + escape_html(bytes(*total));
  if (auto avail = m->number("/mem_available"))
    s +=
        (s.size() > 3 ? "; " : "") + escape_html(bytes(*avail)) + " of it was available at the end";
  s += ". ";
  if (auto swap = m->number("/swap_total"); swap && *swap > 0)
    s += "Swap: " + escape_html(bytes(*swap)) + ", " +
         escape_html(bytes(m->number("/swap_free").value_or(0))) + " free. ";
  else if (swap)
    s += "It has no swap. ";
  if (auto some = m->number("/psi/some_avg10"))
    s += "Memory pressure over the last 10 s: some task waited for memory " + percent(*some) +
         " of the time, all of them " + percent(m->number("/psi/full_avg10").value_or(0)) + ".";
  return s + "</p>";
}

std::string oom_evidence(const Ctx& c) {
  const auto o = c.r.object("/oom_evidence");
  if (!o) return "";
  std::string s = "<p>";
  if (o->flag("/oom_killed")) {
    s += "The kernel log shows the OOM killer taking the kernel";
    const auto& pids = o->array("/matched_pids");
    if (!pids.empty()) s += " (process " + escape_html(strings_of(pids)) + ")";
    s += ". ";
  } else if (o->flag("/kernel_log_readable")) {
    s += "The kernel log shows no OOM kill of the kernel's processes. ";
  } else {
    s += "The kernel log could not be read, so an OOM kill could not be seen there. ";
  }
  if (auto others = o->integer("/other_oom_kills_seen"); others && *others > 0)
    s += "It shows " + count(*others, "OOM kill", "OOM kills") + " of other processes. ";
  if (auto lost = o->integer("/kernel_log_records_lost"); lost && *lost > 0)
    s += count(*lost, "record", "records") + " of the log were lost before they could be read. ";
  s += "</p>";
  const auto& lines = o->array("/kernel_log");
  if (!lines.empty()) {
    s += "<p>Its lines:</p><pre>";
    for (const auto& line : lines)
      s += escape_html(line.is_string() ? line.get<std::string>() : line.dump()) + "\n";
    s += "</pre>";
  }
  return s;
}

std::string ms_in_words(double ms) {
  return ms >= 1000 ? util::format_duration(ms / 1000) : std::to_string(std::lround(ms)) + " ms";
}

std::string heartbeat(const Ctx& c) {
  const auto h = c.r.object("/heartbeat");
  if (!h) return "";
  if (h->has("/watched") && !h->flag("/watched")) return "<p>Its heartbeat was not watched.</p>";
  std::string s = "<p>The watchdog pinged the kernel's heartbeat";
  if (auto every = h->number("/interval_ms")) s += " every " + escape_html(ms_in_words(*every));
  if (auto timeout = h->number("/timeout_ms"))
    s += ", waiting " + escape_html(ms_in_words(*timeout)) + " for each answer";
  s += ": " + count(h->integer("/beats_total").value_or(0), "beat was", "beats were") +
       " answered and " + count(h->integer("/misses_total").value_or(0), "was", "were") + " missed";
  if (auto n = h->integer("/misses_to_hang"))
    s += " (" + std::to_string(*n) + " in a row make a hang)";
  s += ".";
  if (auto last = h->number("/last_beat_ms"))
    s += " The last answer came " + time_in_words(*last, c.died) + ".";
  return s + "</p>";
}

std::string protocol(const Ctx& c) {
  const auto p = c.r.object("/protocol");
  if (!p) return "";
  std::string s = "<p>The watchdog read the kernel's messages over " +
                  escape_html(p->text("/transport").value_or("?"));
  s += p->flag("/signed")
           ? ", signed with " + escape_html(p->text("/signature_scheme").value_or("?"))
           : ", unsigned";
  if (p->flag("/curve")) s += " and encrypted with CURVE";
  s += ": " + count(p->integer("/messages_seen").value_or(0), "message", "messages") + " seen, " +
       count(p->integer("/disconnects").value_or(0), "disconnect", "disconnects") + ", " +
       count(p->integer("/reconnects").value_or(0), "reconnect", "reconnects") + ".";
  if (auto failures = p->integer("/handshake_failures"); failures && *failures > 0)
    s += " " + count(*failures, "handshake", "handshakes") + " failed.";
  if (auto problem = p->text("/connection_file/problem"); problem && !problem->empty())
    s += " The connection file had a problem: " + escape_html(*problem) + ".";
  return s + "</p>";
}

std::string probes(const Ctx& c) {
  const auto& list = c.r.array("/probes");
  if (list.empty()) return "";
  std::string seen, blind;
  for (const auto& item : list) {
    const ReportView p(item);
    const std::string li = "<li><b>" + escape_html(p.text("/name").value_or("?")) +
                           "</b>: " + escape_html(p.text("/reason").value_or("")) + "</li>";
    (p.flag("/available") ? seen : blind) += li;
  }
  std::string s;
  if (!seen.empty()) s += "<p>What the watchdog could see:</p><ul>" + seen + "</ul>";
  if (!blind.empty()) s += "<p>What it could not see, and why:</p><ul>" + blind + "</ul>";
  return s;
}

std::string notes(const Ctx& c) {
  const auto& list = c.r.array("/notes");
  if (list.empty()) return "<p>The watchdog did everything it meant to.</p>";
  std::string s = "<ul>";
  for (const auto& n : list)
    s += "<li>" + escape_html(n.is_string() ? n.get<std::string>() : n.dump()) + "</li>";
  return s + "</ul>";
}

}  // namespace

std::string time_in_words(double unix_ms, double died_at_ms) {
  // A time no int64 holds (a damaged report: 1e308 ms) is shown as the number it is; the cast
  // would be undefined (clang's UBSan, float-cast-overflow, found it in the readers' test).
  if (!(unix_ms > -9.2e18 && unix_ms < 9.2e18)) {
    char number[48];
    std::snprintf(number, sizeof number, "%g ms since 1970", unix_ms);
    return number;
  }
  std::string s = util::local_wall_time(static_cast<std::int64_t>(unix_ms));
  if (!std::isnan(died_at_ms)) {
    const double before = (died_at_ms - unix_ms) / 1000.0;
    if (std::abs(before) < 0.0005)
      s += " (at the death)";
    else
      s += " (" + util::format_duration(std::abs(before)) +
           (before > 0 ? " before the death)" : " after the death)");
  }
  return escape_html(s);
}

std::optional<std::string> section_in_words(std::string_view key, const json& report) {
  static const std::map<std::string_view, std::function<std::string(const Ctx&)>> sections = {
      {"termination", termination},
      {"kernel", kernel},
      {"watchdog", watchdog},
      {"execution", execution},
      {"cgroup", cgroup},
      {"system_memory", system_memory},
      {"oom_evidence", oom_evidence},
      {"heartbeat", heartbeat},
      {"protocol", protocol},
      {"probes", probes},
      {"notes", notes}};
  const auto found = sections.find(key);
  if (found == sections.end()) return std::nullopt;
  const ReportView r(report);
  const Ctx c{
      r, r.number("/kernel/died_at_ms").value_or(r.number("/hang/detected_at_ms").value_or(NAN))};
  return found->second(c);
}

}  // namespace kwd::report
