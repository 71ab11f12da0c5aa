#include "kwd/diagnosis/caught_signal.hpp"

#include <charconv>

#include "kwd/diagnosis/native_modules.hpp"
#include "kwd/util/demangle.hpp"
#include "kwd/util/signal_name.hpp"

namespace kwd::diagnosis {
namespace {

constexpr std::size_t kMaxFrames = 64;
// Stderr is the kernel's to write: what is read from it is capped before it reaches a headline.
constexpr std::size_t kMaxLine = 4096;
constexpr std::size_t kMaxName = 200;

std::string_view module_file_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string capped(std::string text) {
  if (text.size() > kMaxName) text = text.substr(0, kMaxName - 3) + "...";
  return text;
}

}  // namespace

std::optional<CaughtSignal::Frame> parse_backtrace_symbol(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.remove_suffix(1);
  // module(symbol+offset) [address]: the module is everything before the last '(' that opens
  // the symbol part (a path may itself hold parentheses).
  if (line.empty() || line.size() > kMaxLine || line.back() != ']') return std::nullopt;
  const auto bracket = line.rfind('[');
  if (bracket == std::string_view::npos || line.substr(bracket + 1).rfind("0x", 0) != 0)
    return std::nullopt;
  std::string_view head = line.substr(0, bracket);
  while (!head.empty() && head.back() == ' ')
    head.remove_suffix(1);
  CaughtSignal::Frame frame;
  if (!head.empty() && head.back() == ')') {
    const auto open = head.rfind('(');
    if (open == std::string_view::npos || open == 0) return std::nullopt;
    const std::string_view inside = head.substr(open + 1, head.size() - open - 2);
    frame.module = std::string(head.substr(0, open));
    const auto plus = inside.rfind('+');
    const std::string_view symbol =
        plus == std::string_view::npos ? inside : inside.substr(0, plus);
    if (plus != std::string_view::npos) frame.offset = std::string(inside.substr(plus));
    frame.function = capped(util::demangle(symbol));
  } else {
    frame.module = std::string(head);  // a frame with no symbol information at all
  }
  if (frame.module.empty() || frame.module.find(' ') != std::string::npos) return std::nullopt;
  return frame;
}

std::optional<CaughtSignal> parse_caught_signal(std::string_view line, std::string_view after) {
  static constexpr std::string_view kLead = "Error: signal ";
  const auto at = line.find(kLead);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view digits = line.substr(at + kLead.size());
  CaughtSignal caught;
  const auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), caught.number);
  if (ec != std::errc{} || caught.number <= 0 || caught.number > 64) return std::nullopt;
  // This platform's numbering: the kernel's handler printed its own.
  caught.name =
      util::signal_name(caught.number).value_or("signal " + std::to_string(caught.number));
  // The stack's lines follow at once; the first line that is not one ends it.
  while (!after.empty() && caught.frames.size() < kMaxFrames) {
    const auto newline = after.find('\n');
    const std::string_view next = after.substr(0, newline);
    auto frame = parse_backtrace_symbol(next);
    if (!frame) break;
    caught.frames.push_back(std::move(*frame));
    if (newline == std::string_view::npos) break;
    after.remove_prefix(newline + 1);
  }
  return caught;
}

std::optional<std::string> caught_signal_culprit(const CaughtSignal& caught) {
  // Frame 0 is the handler that printed the stack.
  for (std::size_t i = 1; i < caught.frames.size(); ++i) {
    const auto& frame = caught.frames[i];
    const std::string module = capped(std::string(module_file_name(frame.module)));
    if (is_runtime_module(module)) continue;
    if (!frame.function.empty()) return frame.function + " in " + module;
    return module + (frame.offset.empty() ? "" : " (" + capped(frame.offset) + ")");
  }
  return std::nullopt;
}

}  // namespace kwd::diagnosis
