#include "kwd/diagnosis/python_traceback.hpp"

#include <charconv>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

namespace kwd::diagnosis {
namespace {

constexpr std::string_view kFatalMarker = "Fatal Python error: ";
constexpr std::string_view kBlockSuffix = "(most recent call first):";

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      std::string_view line = text.substr(start, i - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (i < text.size() || !line.empty()) lines.push_back(line);
      start = i + 1;
    }
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string line_of(const std::string& code, int line) {
  if (line <= 0) return {};
  std::istringstream in(code);
  std::string text;
  for (int n = 1; std::getline(in, text); ++n)
    if (n == line) return text;
  return {};
}

nlohmann::json traceback_json(const FaulthandlerDump& dump, const char* source,
                              const nlohmann::json& report) {
  std::string cell_code;
  const nlohmann::json::json_pointer code_ptr{"/execution/cell_in_flight/code"};
  if (report.contains(code_ptr) && report.at(code_ptr).is_string())
    cell_code = report.at(code_ptr).get<std::string>();
  // The cell being run executes as <module> in its own file; functions defined in earlier
  // cells live in other files whose code we may not have.
  std::string running_cell_file;
  for (auto it = dump.frames.rbegin(); it != dump.frames.rend(); ++it)
    if (is_cell_file(it->file) && it->function == "<module>") {
      running_cell_file = it->file;
      break;
    }
  auto frames = nlohmann::json::array();
  for (const auto& f : dump.frames) {
    nlohmann::json frame = {{"file", f.file}, {"line", f.line}, {"function", f.function}};
    frame["in_cell"] = is_cell_file(f.file);
    // A cell's <module> frame on the stack means a cell was running, even one whose start
    // never reached IOPub (a kernel that dies within milliseconds of starting it).
    if (!running_cell_file.empty() && f.file == running_cell_file) {
      frame["cell"] = "in flight";
      if (auto text = line_of(cell_code, f.line); !text.empty()) frame["code"] = text;
    }
    frames.push_back(std::move(frame));
  }
  return {{"source", source},
          {"fatal_error", dump.fatal_error},
          {"thread", dump.thread},
          {"order", "most recent call first"},
          {"frames", std::move(frames)},
          {"text", dump.text}};
}

}  // namespace

bool is_cell_file(std::string_view file) {
  static const std::regex cell(R"((^|/)ipykernel_[0-9]+/[0-9]+\.py$)");
  return std::regex_search(file.begin(), file.end(), cell);
}

std::optional<PythonFrame> parse_faulthandler_frame(std::string_view line) {
  // '  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at'
  // Searched, not matched: another thread's output may have landed in front of it.
  static const std::regex frame(R"re(File "(.*)", line (\d+|\?\?\?) in (.*)$)re");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(line.begin(), line.end(), m, frame)) return std::nullopt;
  PythonFrame f;
  f.file = m[1].str();
  // A line number too large for an int (a forged or garbled dump) is an unknown line, as
  // "???" is: std::stoi would throw out of a diagnosis that must not.
  const auto number = m[2].str();
  int line_number = 0;
  if (number != "???" &&
      std::from_chars(number.data(), number.data() + number.size(), line_number).ec == std::errc())
    f.line = line_number;
  else
    f.line = 0;
  f.function = std::string(trim(m[3].str()));
  return f;
}

std::optional<FaulthandlerDump> parse_faulthandler(std::string_view text) {
  const auto at = text.rfind(kFatalMarker);
  if (at == std::string_view::npos) return std::nullopt;
  const auto lines = split_lines(text.substr(at));
  if (lines.empty()) return std::nullopt;

  // A dying ipykernel's other threads still write: ipykernel forwards what native code wrote
  // to fd 2 ("terminate called...", "what(): ...") into the same pipe while faulthandler
  // writes its dump, so foreign lines, and even foreign text in the middle of a line, are
  // expected inside the dump. Nothing but "Extension modules:" or the end of the text ends it.
  static const std::regex fatal_name(
      "(Segmentation fault|Aborted|Bus error|Floating[- ]point exception|Illegal instruction)");
  FaulthandlerDump dump;
  std::smatch m;
  const std::string first(lines[0].substr(kFatalMarker.size()));
  if (std::regex_search(first, m, fatal_name)) dump.fatal_error = m[1].str();
  bool crashing_block = false;
  std::size_t end = lines.size();
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const std::string_view t = trim(line);
    if (t.starts_with("Extension modules:")) {
      end = i + 1;
      break;
    }
    if (dump.fatal_error.empty()) {
      const std::string s(t);
      if (std::regex_match(s, m, fatal_name)) {
        dump.fatal_error = m[1].str();
        continue;
      }
    }
    if (t.ends_with(kBlockSuffix)) {
      const auto current = t.find("Current thread 0x");
      const auto stack = t.find("Stack (");
      crashing_block = current != std::string_view::npos || stack != std::string_view::npos;
      if (crashing_block) {
        const auto from = current != std::string_view::npos ? current : stack;
        dump.thread = std::string(trim(t.substr(from, t.size() - kBlockSuffix.size() - from)));
        dump.frames.clear();  // a second "current" block (a nested dump) replaces the first
      }
      continue;
    }
    if (crashing_block)
      if (auto frame = parse_faulthandler_frame(line)) dump.frames.push_back(std::move(*frame));
  }
  std::string whole;
  for (std::size_t i = 0; i < end; ++i) {
    whole.append(lines[i]);
    whole.push_back('\n');
  }
  dump.text = std::move(whole);
  return dump;
}

nlohmann::json find_python_traceback(const nlohmann::json& report) {
  if (!report.is_object()) return nullptr;
  const std::pair<const char*, const char*> places[] = {
      {"/stderr_tail/text", "faulthandler, on the kernel's stderr (kept by the watchdog)"},
      {"/execution/stream_stderr_tail", "faulthandler, in the stderr output the notebook showed"}};
  for (const auto& [pointer, source] : places) {
    const nlohmann::json::json_pointer ptr{pointer};
    if (!report.contains(ptr) || !report.at(ptr).is_string()) continue;
    if (auto dump = parse_faulthandler(report.at(ptr).get_ref<const std::string&>()))
      return traceback_json(*dump, source, report);
  }
  return nullptr;
}

}  // namespace kwd::diagnosis
