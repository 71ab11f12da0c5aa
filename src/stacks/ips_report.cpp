#include <csignal>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "kwd/stacks/system_crash_report.hpp"
#include "kwd/util/demangle.hpp"
#include "kwd/util/signal_name.hpp"

namespace kwd::stacks {
namespace {

using nlohmann::json;

std::string ips_text(const json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<std::uint64_t> unsigned_at(const json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  if (it->is_number_integer() && it->get<std::int64_t>() >= 0) return it->get<std::uint64_t>();
  return std::nullopt;
}

bool true_at(const json& object, const char* key) {
  if (!object.is_object()) return false;
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

// A register of threadState: {"pc": {"value": 4305..., "matchesCrashFrame": 1}}.
std::uint64_t register_value(const json& state, const char* name) {
  if (!state.is_object()) return 0;
  const auto it = state.find(name);
  return it == state.end() ? 0 : unsigned_at(*it, "value").value_or(0);
}

// This platform's number for the report's "SIGSEGV": only the crash signals matter here.
int crash_signal_number(const std::string& name) {
  for (const int signal : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP})
    if (util::signal_name(signal) == name) return signal;
  return 0;
}

// "EXC_BAD_ACCESS (SIGSEGV): KERN_INVALID_ADDRESS at 0x0": as Console shows the exception.
std::string describe_exception(const json& exception) {
  std::string out = ips_text(exception, "type");
  if (const auto signal = ips_text(exception, "signal"); !signal.empty())
    out += out.empty() ? signal : " (" + signal + ")";
  if (const auto subtype = ips_text(exception, "subtype"); !subtype.empty())
    out += (out.empty() ? "" : ": ") + subtype;
  return out;
}

// "asi": {"libsystem_c.dylib": ["abort() called"], ...} -> "libsystem_c.dylib: abort() called".
std::vector<std::string> application_messages(const json& asi) {
  std::vector<std::string> out;
  if (!asi.is_object()) return out;
  for (const auto& [image, lines] : asi.items()) {
    if (!lines.is_array()) continue;
    for (const auto& line : lines)
      if (line.is_string()) out.push_back(image + ": " + line.get<std::string>());
  }
  return out;
}

struct UsedImage {
  std::uint64_t base = 0;
  std::string path;
};

std::vector<UsedImage> used_images(const json& images) {
  std::vector<UsedImage> out;
  if (!images.is_array()) return out;
  for (const auto& image : images) {
    UsedImage i;
    i.base = unsigned_at(image, "base").value_or(0);
    // A path under a user's home can be hidden by the report ("*"): the name still says which.
    i.path = ips_text(image, "path");
    if (i.path.empty()) i.path = ips_text(image, "name");
    out.push_back(std::move(i));
  }
  return out;
}

NativeFrame frame_of(const json& frame, const std::vector<UsedImage>& images) {
  NativeFrame out;
  const auto offset_in_image = unsigned_at(frame, "imageOffset").value_or(0);
  if (const auto index = unsigned_at(frame, "imageIndex"); index && *index < images.size()) {
    out.module = images[*index].path;
    out.pc = images[*index].base + offset_in_image;
  } else {
    out.pc = offset_in_image;
  }
  out.function = util::demangle(ips_text(frame, "symbol"));
  out.offset = unsigned_at(frame, "symbolLocation").value_or(offset_in_image);
  out.file = ips_text(frame, "sourceFile");
  if (const auto line = unsigned_at(frame, "sourceLine");
      line && *line <= static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    out.line = static_cast<int>(*line);
  return out;
}

}  // namespace

IpsKind ips_kind(std::string_view text) {
  const auto newline = text.find('\n');
  if (newline == std::string_view::npos) return IpsKind::unreadable;
  const auto metadata = json::parse(text.substr(0, newline), nullptr, false);
  if (!metadata.is_object()) return IpsKind::unreadable;
  // bug_type 309 is a process's crash; others (hangs, resource reports, panics) differ.
  return ips_text(metadata, "bug_type") == "309" ? IpsKind::crash : IpsKind::other;
}

std::optional<SystemCrashReport> parse_ips_crash(std::string_view text) {
  if (ips_kind(text) != IpsKind::crash) return std::nullopt;
  const auto newline = text.find('\n');
  const auto body = json::parse(text.substr(newline + 1), nullptr, false);
  if (!body.is_object()) return std::nullopt;
  const auto pid = unsigned_at(body, "pid");
  if (!pid || *pid == 0 || *pid > static_cast<std::uint64_t>(std::numeric_limits<pid_t>::max()))
    return std::nullopt;

  SystemCrashReport out;
  out.pid = static_cast<pid_t>(*pid);
  out.process = ips_text(body, "procName");
  const json none;
  const auto& exception = body.contains("exception") ? body["exception"] : none;
  out.exception = describe_exception(exception);
  out.signal = crash_signal_number(ips_text(exception, "signal"));
  out.messages = application_messages(body.contains("asi") ? body["asi"] : none);

  const auto& threads = body.contains("threads") ? body["threads"] : none;
  if (!threads.is_array()) return out;
  // faultingThread is an index into threads; older reports mark the thread "triggered" only.
  std::optional<std::size_t> faulting;
  if (const auto index = unsigned_at(body, "faultingThread"); index && *index < threads.size())
    faulting = static_cast<std::size_t>(*index);
  for (std::size_t i = 0; !faulting && i < threads.size(); ++i)
    if (true_at(threads[i], "triggered")) faulting = i;
  if (!faulting) return out;

  const auto& thread = threads[*faulting];
  out.thread_id = unsigned_at(thread, "id").value_or(0);
  const auto& state =
      thread.is_object() && thread.contains("threadState") ? thread["threadState"] : none;
  out.pc = register_value(state, "pc");
  if (out.pc == 0) out.pc = register_value(state, "rip");
  out.address = register_value(state, "far");
  if (out.address == 0) out.address = register_value(state, "cr2");
  const auto images = used_images(body.contains("usedImages") ? body["usedImages"] : none);
  if (thread.is_object() && thread.contains("frames") && thread["frames"].is_array())
    for (const auto& frame : thread["frames"])
      if (frame.is_object()) out.frames.push_back(frame_of(frame, images));
  return out;
}

CrashStack crash_stack_from(const SystemCrashReport& report, std::size_t max_frames) {
  CrashStack out;
  out.fault.pid = report.pid;
  // A thread id past pid_t's range is kept out rather than cut to another thread's number.
  if (report.thread_id <= static_cast<std::uint64_t>(std::numeric_limits<pid_t>::max()))
    out.fault.tid = static_cast<pid_t>(report.thread_id);
  out.fault.signal = report.signal;
  out.fault.address = report.address;
  out.fault.pc = report.pc != 0 ? report.pc : (report.frames.empty() ? 0 : report.frames[0].pc);
  out.frames = report.frames;
  if (out.frames.size() > max_frames) {
    out.frames.resize(max_frames);
    out.truncated = true;
  }
  out.messages = report.messages;
  if (out.frames.empty()) out.missing = "the system's crash report names no frame of the thread";
  return out;
}

CrashStack system_crash_report_not_found(const SystemCrashReportSearch& search,
                                         std::chrono::milliseconds waited) {
  CrashStack out;
  out.fault.pid = search.pid;
  out.fault.signal = search.signal;
  out.capture_ms = waited.count();
  out.missing = "the system wrote no crash report for pid " + std::to_string(search.pid) +
                " within " + std::to_string(waited.count()) +
                " ms of its death (its crash reporter may be off, or slower than that)";
  return out;
}

}  // namespace kwd::stacks
