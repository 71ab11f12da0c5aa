#include "kwd/report/terminal_summary.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/timeline/trend.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::report {
namespace {

using diagnosis::ReportView;
using nlohmann::json;

struct Paint {
  bool on;
  std::string operator()(const std::string& text, const char* code) const {
    return on ? std::string("\x1b[") + code + "m" + text + "\x1b[0m" : text;
  }
};

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

// Columns of UTF-8 text, one per character: what our own text holds (no wide characters;
// the kernel's are made safe by terminal_safe, and cut, not wrapped).
std::size_t columns(const std::string& text) {
  std::size_t n = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

// The first `n` columns of `word` (whole UTF-8 characters), and the rest.
std::pair<std::string, std::string> split_at_column(const std::string& word, std::size_t n) {
  std::size_t seen = 0, cut = 0;
  for (; cut < word.size(); ++cut)
    if ((static_cast<unsigned char>(word[cut]) & 0xC0) != 0x80 && seen++ == n) break;
  return {word.substr(0, cut), word.substr(cut)};
}

// Splits `text` into lines of at most `width` columns, the first prefixed by `first`, the
// rest by `rest`. A word longer than a line has a line of its own, or, with
// `break_long_words` (a terminal), is continued on as many lines as it needs.
std::string wrap(const std::string& text, std::size_t width, const std::string& first,
                 const std::string& rest, bool break_long_words = false) {
  std::string out, line = first;
  std::size_t line_words = 0;
  std::istringstream words(text);
  std::string word;
  const std::size_t room = width > columns(rest) + 10 ? width - columns(rest) : 10;
  while (words >> word) {
    // A word that fits no line is begun where the line stands, not on a line of its own.
    const bool broken = break_long_words && columns(word) > room;
    if (line_words > 0 && !broken && columns(line) + 1 + columns(word) > width) {
      out += line + "\n";
      line = rest;
      line_words = 0;
    }
    while (broken && columns(line) + (line_words > 0 ? 1 : 0) + columns(word) > width) {
      const std::size_t used = columns(line) + (line_words > 0 ? 1 : 0);
      // At least one character on a line of its own, so that every pass moves on.
      const std::size_t fits =
          std::max<std::size_t>(width > used ? width - used : 0, line_words == 0 ? 1 : 0);
      auto [head, tail] = split_at_column(word, fits);
      out += line + (line_words > 0 && !head.empty() ? " " : "") + head + "\n";
      line = rest;
      line_words = 0;
      word = tail;
    }
    line += (line_words > 0 ? " " : "") + word;
    ++line_words;
  }
  return out + line + "\n";
}

std::string clip(const std::string& text, std::size_t width) {
  if (text.size() <= width) return text;
  // Cut before a whole UTF-8 character, never inside one.
  std::size_t cut = width > 1 ? width - 1 : 0;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return text.substr(0, cut) + "…";
}

// Text from the report, safe for the terminal: a string, or a number as JSON writes it.
std::string text(const ReportView& v, std::string_view pointer, const std::string& fallback = "?") {
  const auto value = v.scalar(pointer);
  return value ? terminal_safe(*value) : fallback;
}

// The line number of the running cell at which Python was when it died, or 0.
std::int64_t crash_line_in_cell(const ReportView& r) {
  for (const auto& frame : r.array("/python_traceback/frames")) {
    const ReportView f(frame);
    if (f.text("/cell").value_or("") == "in flight") return f.integer("/line").value_or(0);
  }
  return 0;
}

std::vector<std::string> code_lines(const std::string& code) {
  std::vector<std::string> lines;
  std::istringstream in(code);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

void cell_section(std::ostringstream& out, const ReportView& r, const Paint& paint,
                  std::size_t width, bool clip_code) {
  const auto execution = r.object("/execution");
  if (!execution) return;
  const std::int64_t crash = crash_line_in_cell(r);
  const auto cell = execution->object("/cell_in_flight");
  if (!cell) {
    out << "\n" << paint("Running cell", "1");
    if (crash > 0)
      out << "  one the kernel never announced (it died as the cell started; the cell's line "
          << crash << " is on the crashing stack)\n";
    else if (const auto state = execution->text("/state_at_death"))
      out << "  none: the kernel was " << terminal_safe(*state) << "\n";
    else
      out << "  none known (the kernel published no status"
          << (r.has("/startup") ? ": it never became ready" : " before its end") << ")\n";
    return;
  }
  out << "\n" << paint("Running cell", "1") << "  [" << text(*cell, "/execution_count") << "]";
  if (auto running = cell->number("/running_for_s"))
    out << "  for " << util::format_duration(*running);
  if (auto rss = cell->number("/rss_at_start"))
    out << "  (RSS at start " << util::format_bytes(*rss) << ")";
  const auto gpu_start = cell->number("/gpu_at_start");
  const auto gpu_peak = cell->number("/gpu_peak");
  if (gpu_start && gpu_peak)
    out << "  (GPU " << util::format_bytes(*gpu_start) << " at start, peak "
        << util::format_bytes(*gpu_peak) << ")";
  out << "\n";
  const auto lines = code_lines(terminal_safe(cell->text("/code").value_or("")));
  const auto n = static_cast<std::int64_t>(lines.size());
  // Seven lines: around the crash when it is known (and inside the code), else the start.
  const std::int64_t here = crash <= n ? crash : 0;
  std::int64_t first = here > 0 ? std::max<std::int64_t>(1, here - 3) : 1;
  const std::int64_t last = std::min(n, first + 6);
  first = std::max<std::int64_t>(1, last - 6);
  for (std::int64_t i = first; i <= last; ++i) {
    const bool at_crash = i == here;
    std::string row = (at_crash ? "> " : "  ") + std::to_string(i) + " | " +
                      lines[static_cast<std::size_t>(i - 1)];
    if (clip_code) row = clip(row, width - 2);
    out << "  " << (at_crash ? paint(row, "1;31") : row) << "\n";
  }
  if (last < n) out << "     ... " << (n - last) << " more lines\n";
}

void memory_section(std::ostringstream& out, const ReportView& r, const Paint& paint, int width) {
  const auto* rss = r.find("/memory/samples/rss");
  if (rss == nullptr || !rss->is_array()) return;
  const auto bars = static_cast<std::size_t>(std::max(width - 40, 10));
  out << "\n"
      << paint("Memory", "1") << " (kernel processes, last " << rss->size() << " samples)\n";
  out << "  RSS " << sparkline(*rss, bars);
  if (auto peak = r.number("/memory/peak/rss")) out << "  peak " << util::format_bytes(*peak);
  if (!rss->empty() && rss->back().is_number())
    out << ", last " << util::format_bytes(rss->back().get<double>());
  out << "\n";
  const auto& gpu = r.array("/memory/samples/gpu_used");
  if (!sparkline(gpu, bars).empty()) {
    out << "  GPU " << sparkline(gpu, bars);
    if (auto peak = r.number("/memory/peak/gpu_used"))
      out << "  peak " << util::format_bytes(*peak);
    out << "\n";
  }
  std::string extra;
  if (auto limit = r.number("/memory/limits/tightest/bytes"))
    extra += "closest limit: " +
             terminal_safe(timeline::limit_in_words(
                 r.text("/memory/limits/tightest/name").value_or("memory limit"))) +
             ", " + util::format_bytes(*limit);
  if (auto slope = r.number("/memory/trend/rss/slope_60s"))
    extra += std::string(extra.empty() ? "" : " · ") + (*slope >= 0 ? "+" : "-") +
             util::format_bytes(std::abs(*slope)) + "/s over the last minute";
  if (!extra.empty()) out << wrap(extra, static_cast<std::size_t>(width), "  ", "  ");
}

void environment_line(std::ostringstream& out, const ReportView& r, const Paint& paint,
                      std::size_t width) {
  const auto fp = r.object("/fingerprint");
  if (!fp) return;
  std::string line;
  if (auto version = fp->text("/python/version")) line = "python " + terminal_safe(*version);
  for (const auto& framework : fp->array("/frameworks")) {
    const ReportView f(framework);
    if (!framework.is_object()) continue;
    line += (line.empty() ? "" : " · ") + text(f, "/name");
    if (auto version = f.text("/version")) line += " " + terminal_safe(*version);
  }
  // Wrapped with its label, which is then painted: the first line fits with it.
  if (!line.empty())
    out << paint("Environment", "1") << wrap(line, width, "Environment  ", "    ").substr(11);
  for (const auto& incompatibility : fp->array("/incompatibilities"))
    if (incompatibility.is_object())
      out << paint("  incompatible: ", "1;33") << text(ReportView(incompatibility), "/what")
          << "\n";
}

// The one-line items of a list (evidence facts, missing facts): an object's `field`, or the
// item itself when it is a plain value.
std::string item_text(const nlohmann::json& item, std::string_view field) {
  const ReportView v(item);
  return text(v, item.is_object() ? field : "", "");
}

void evidence_section(std::ostringstream& out, const ReportView& r, const Paint& paint,
                      std::size_t width, bool fit) {
  const auto& evidence = r.array("/diagnosis/evidence");
  if (evidence.empty()) return;
  out << "\n" << paint("Evidence", "1") << "\n";
  // A kernel log line quoted whole can be one 200-character word (oom-kill:constraint=...).
  for (std::size_t i = 0; i < evidence.size() && i < 6; ++i)
    out << wrap(item_text(evidence[i], "/fact"), width, "  • ", "    ", fit);
  if (evidence.size() > 6) out << "    (" << evidence.size() - 6 << " more in the report)\n";
}

// The stacks taken while the kernel was stuck: the main thread and those with Python frames
// first, a few frames each (the report keeps all).
void stacks_section(std::ostringstream& out, const ReportView& r, const Paint& paint,
                    std::size_t width, bool fit) {
  const auto stacks = r.object("/hang/stacks");
  if (!stacks) return;
  out << "\n" << paint("Where it is stuck", "1") << "\n";
  for (const char* part : {"/native_missing", "/python_missing"})
    if (const auto missing = stacks->text(part))
      out << wrap(std::string(part[1] == 'n' ? "native" : "Python") +
                      " frames not available: " + terminal_safe(*missing),
                  width, "  ", "    ", fit);
  std::vector<const json*> shown;
  for (const bool wanted : {true, false})
    for (const auto& t : stacks->array("/threads")) {
      const bool first = t.value("main", false) || !t.value("python", json::array()).empty();
      if (first == wanted && t.value("joined", json::array()).size() > 0) shown.push_back(&t);
    }
  constexpr std::size_t kThreads = 6, kFrames = 5;
  for (std::size_t i = 0; i < shown.size() && i < kThreads; ++i) {
    const ReportView t(*shown[i]);
    std::string heading = "Thread " + text(t, "/tid");
    if (auto name = t.text("/name")) heading += " \"" + terminal_safe(*name) + "\"";
    heading += ": " + text(t, "/state");
    if (auto syscall = t.text("/syscall")) heading += ", in " + *syscall;
    out << wrap(heading, width, "  ", "    ", fit);
    const auto& joined = t.array("/joined");
    for (std::size_t f = 0; f < joined.size() && f < kFrames; ++f)
      if (joined[f].is_string())
        out << wrap(terminal_safe(joined[f].get<std::string>()), width, "      ", "        ", fit);
    if (joined.size() > kFrames) out << "      (" << joined.size() - kFrames << " more frames)\n";
  }
  if (shown.size() > kThreads)
    out << "  (" << shown.size() - kThreads << " more threads in the report)\n";
}

// "crashy::poke(int volatile*) (libcrashy.so, crashy.cpp:5)" for one native frame.
std::string native_frame_text(const ReportView& frame) {
  const auto module = frame.text("/module").value_or("?");
  std::string text =
      frame.text("/function").value_or("??") + " (" +
      module.substr(module.rfind('/') == std::string::npos ? 0 : module.rfind('/') + 1);
  if (const auto file = frame.text("/file"))
    text += ", " + file->substr(file->rfind('/') == std::string::npos ? 0 : file->rfind('/') + 1) +
            ":" + std::to_string(frame.integer("/line").value_or(0));
  return text + ")";
}

// The faulting thread's native frames at a crash, from the faulting instruction down.
void crash_stack_section(std::ostringstream& out, const ReportView& r, const Paint& paint,
                         std::size_t width, bool fit) {
  const auto& frames = r.array("/crash_stack/frames");
  if (frames.empty()) return;
  out << "\n" << paint("Where it crashed", "1") << "\n";
  // A stripped library's own frames (a driver's, nine deep) say nothing one by one: a run of
  // them is one line, and the frame it came through shows.
  constexpr std::size_t kLines = 8;
  std::size_t i = 0, lines = 0;
  for (; i < frames.size() && lines < kLines; ++lines) {
    const ReportView frame(frames[i]);
    std::size_t run = 1;
    while (!frame.text("/function") && i + run < frames.size() &&
           !ReportView(frames[i + run]).text("/function") &&
           ReportView(frames[i + run]).text("/module") == frame.text("/module"))
      ++run;
    std::string line = native_frame_text(frame);
    if (run > 1) line = std::to_string(run) + " frames without a symbol " + line.substr(3);
    out << wrap(terminal_safe(line), width, "  ", "    ", fit);
    i += run;
  }
  if (i < frames.size()) out << "  (" << frames.size() - i << " more frames in the report)\n";
}

void remedies_section(std::ostringstream& out, const ReportView& r, const Paint& paint,
                      std::size_t width) {
  const auto& remedies = r.array("/diagnosis/remedies");
  if (remedies.empty()) return;
  out << "\n" << paint("What to do", "1") << "\n";
  for (std::size_t i = 0; i < remedies.size() && i < 4; ++i) {
    const std::string num = std::to_string(i + 1) + ". ";
    out << wrap(item_text(remedies[i], "/text"), width, "  " + num, "     ");
    out << paint(wrap("why: " + text(ReportView(remedies[i]), "/why", ""), width, "     ", "     "),
                 "2");
  }
  if (remedies.size() > 4) out << "     (" << remedies.size() - 4 << " more in the report)\n";
}

// The headline in the colour of the cause's severity.
const char* headline_colour(const ReportView& r) {
  const auto* cause = diagnosis::find_cause(r.text("/diagnosis/cause").value_or(""));
  return cause != nullptr && cause->severity == diagnosis::Severity::warning ? "1;33" : "1;31";
}

std::string title_line(const ReportView& r, bool hang) {
  std::string title = hang ? "Kernel hang report" : "Kernel crash report";
  if (const auto* cause = diagnosis::find_cause(r.text("/diagnosis/cause").value_or("")))
    title += ": " + std::string(cause->name);
  return title;
}

std::string facts_line(const ReportView& r, bool hang) {
  std::string facts;
  if (r.has("/diagnosis/cause"))
    facts = "cause " + text(r, "/diagnosis/cause") + " · confidence " +
            text(r, "/diagnosis/confidence") + " · ";
  if (auto notebook = r.text("/kernel/notebook"); notebook && !notebook->empty())
    facts += "notebook " + terminal_safe(*notebook) + " · ";
  // What is not known is left out, not shown as "?".
  if (r.has("/kernel/pid")) facts += "pid " + text(r, "/kernel/pid") + " · ";
  if (auto up = r.number("/kernel/uptime_s")) facts += "up " + util::format_duration(*up) + " · ";
  if (hang) {
    if (auto detected = r.integer("/hang/detected_at_ms"))
      facts += "detected " + util::local_wall_time(*detected);
  } else if (auto died = r.integer("/kernel/died_at_ms")) {
    facts += "died " + util::local_wall_time(*died);
  } else if (r.has("/kernel/died_at")) {
    facts += "died " + text(r, "/kernel/died_at");
  }
  if (facts.ends_with(" · ")) facts.resize(facts.size() - std::string_view(" · ").size());
  return facts;
}

}  // namespace

std::string render_summary(const json& report, const SummaryStyle& style) {
  const ReportView r(report);
  const Paint paint{style.color};
  const auto width = static_cast<std::size_t>(std::max(style.width, 40));
  const bool hang = r.text("/kind").value_or("") == "hang";
  std::ostringstream out;

  const std::string title = title_line(r, hang), id = text(r, "/id");
  out << paint(title, "1") << (columns(title) + 2 + columns(id) <= width ? "  " : "\n  ") << id
      << "\n";
  // The answer first, in colour when the terminal shows colour.
  // Without a diagnosis, how it ended ("Kernel killed by SIGKILL").
  const bool diagnosed = !r.text("/diagnosis/headline").value_or("").empty();
  const auto description = r.text("/termination/description");
  const std::string headline =
      terminal_safe(!diagnosed && description && !description->empty() ? "Kernel " + *description
                                                                       : cause_line(report));
  std::istringstream headline_lines(wrap(headline, width, "", "  "));
  for (std::string line; std::getline(headline_lines, line);)
    out << paint(line, headline_colour(r)) << "\n";
  out << paint(wrap(facts_line(r, hang), width, "  ", "  "), "2");

  evidence_section(out, r, paint, width, style.clip_long_lines);
  cell_section(out, r, paint, width, style.clip_long_lines);
  stacks_section(out, r, paint, width, style.clip_long_lines);
  crash_stack_section(out, r, paint, width, style.clip_long_lines);
  memory_section(out, r, paint, static_cast<int>(width));
  remedies_section(out, r, paint, width);
  out << "\n";
  environment_line(out, r, paint, width);
  for (const auto& missing : r.array("/diagnosis/missing"))
    if (auto m = item_text(missing, ""); !m.empty())
      out << paint("not known:", "33") << wrap(m, width, "not known: ", "    ").substr(10);

  if (const auto stderr_text = r.text("/stderr_tail/text"); stderr_text && !stderr_text->empty()) {
    out << paint("Last stderr lines", "1") << "\n";
    for (const auto& line : last_lines(terminal_safe(*stderr_text), 4))
      out << (style.clip_long_lines ? clip("  | " + line, width) : "  | " + line) << "\n";
  }
  for (const auto& note : r.array("/notes"))
    if (note.is_string())
      out << paint("note:", "33")
          << wrap(terminal_safe(note.get<std::string>()), width, "note: ", "    ").substr(5);
  return out.str();
}

}  // namespace kwd::report
