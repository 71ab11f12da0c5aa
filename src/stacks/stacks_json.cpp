#include "kwd/stacks/stacks_json.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kwd/stacks/pure.hpp"

namespace kwd::stacks {
namespace {

using nlohmann::json;

json or_null(const std::string& text) {
  return text.empty() ? json(nullptr) : json(text);
}

json python_to_json(const std::vector<PythonFrame>& frames) {
  auto out = json::array();
  for (const auto& f : frames)
    out.push_back({{"file", f.file},
                   {"line", f.line},
                   {"function", f.function},
                   {"in_cell", diagnosis::is_cell_file(f.file)}});
  return out;
}

std::string hex(std::uint64_t value) {
  return fmt::format("0x{:x}", value);
}

}  // namespace

json frames_to_json(const std::vector<NativeFrame>& frames) {
  auto out = json::array();
  for (const auto& f : frames)
    out.push_back({{"pc", hex(f.pc)},
                   {"module", or_null(f.module)},
                   {"function", or_null(f.function)},
                   {"offset", f.offset},
                   {"file", or_null(f.file)},
                   {"line", f.file.empty() ? json(nullptr) : json(f.line)}});
  return out;
}

std::vector<NativeFrame> frames_from_json(const json& frames) {
  std::vector<NativeFrame> out;
  if (!frames.is_array()) return out;
  for (const auto& f : frames) {
    if (!f.is_object()) continue;
    NativeFrame frame;
    const auto text = [&f](const char* key) {
      const auto it = f.find(key);
      return it != f.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    frame.pc = std::strtoull(text("pc").c_str(), nullptr, 16);
    frame.module = text("module");
    frame.function = text("function");
    frame.file = text("file");
    if (const auto it = f.find("offset"); it != f.end() && it->is_number_unsigned())
      frame.offset = it->get<std::uint64_t>();
    if (const auto it = f.find("line"); it != f.end() && it->is_number_integer())
      frame.line = it->get<int>();
    out.push_back(std::move(frame));
  }
  return out;
}

json to_json(const ProcessStacks& s) {
  auto threads = json::array();
  for (const auto& t : s.threads) {
    auto shown = json::array();
    for (const auto& f : joined_view(t))
      shown.push_back(f.text);
    threads.push_back(
        {{"tid", t.tid},
         {"name", t.name},
         {"state", t.state},
         {"wchan", or_null(t.wchan)},
         {"syscall", or_null(t.syscall)},
         {"main", t.tid == s.pid},
         {"native", frames_to_json(t.native)},
         {"native_truncated", t.native_truncated},
         {"native_problem", or_null(t.native_problem)},
         {"python_thread", t.python_ident ? json(hex(*t.python_ident)) : json(nullptr)},
         {"python_current", t.python_current},
         {"python", python_to_json(t.python)},
         {"joined", std::move(shown)}});
  }
  auto unjoined = json::array();
  for (const auto& p : s.python_unjoined)
    unjoined.push_back({{"python_thread", hex(p.ident)},
                        {"current", p.current},
                        {"python", python_to_json(p.frames)}});
  auto children = json::array();
  for (const auto& child : s.children)
    children.push_back(to_json(child));
  return {{"pid", s.pid},
          {"found", s.found},
          {"command", or_null(s.command)},
          {"taken_at_ms", s.taken_at_ms},
          {"capture_ms", s.capture_ms},
          {"frozen_us", s.frozen_us >= 0 ? json(s.frozen_us) : json(nullptr)},
          {"process_state", or_null(s.process_state)},
          {"threads_total", s.threads_total},
          {"native_missing", or_null(s.native_missing)},
          {"python_missing", or_null(s.python_missing)},
          {"order", "most recent call first"},
          {"threads", std::move(threads)},
          {"python_unjoined", std::move(unjoined)},
          {"children", std::move(children)},
          {"children_total", s.children_total}};
}

json to_json(const CrashStack& c) {
  // The system's report (macOS) says no si_code; the handler's message says all of these.
  const bool from_system = !c.system_report.empty();
  const bool reported = c.fault.tid != 0 || from_system;
  return {{"tid", c.fault.tid != 0 ? json(c.fault.tid) : json(nullptr)},
          {"signal", c.fault.signal},
          {"si_code", reported && !from_system ? json(c.fault.code) : json(nullptr)},
          {"fault_address", reported ? json(hex(c.fault.address)) : json(nullptr)},
          {"pc", reported ? json(hex(c.fault.pc)) : json(nullptr)},
          {"order", "most recent call first"},
          {"frames", frames_to_json(c.frames)},
          {"truncated", c.truncated},
          {"missing", or_null(c.missing)},
          {"frozen_us", c.frozen_us >= 0 ? json(c.frozen_us) : json(nullptr)},
          {"capture_ms", c.capture_ms},
          {"reported_at_ms", c.reported_at_ms > 0 ? json(c.reported_at_ms) : json(nullptr)},
          {"system_report", or_null(c.system_report)},
          {"messages", c.messages}};
}

}  // namespace kwd::stacks
