#include <charconv>

#include "kwd/stacks/pure.hpp"

namespace kwd::stacks {
namespace {

constexpr std::string_view kCurrent = "Current thread 0x";
constexpr std::string_view kOther = "Thread 0x";

// "Thread 0x00007f2a... (most recent call first):" -> its ident; nullopt for another line.
std::optional<std::uint64_t> header_ident(std::string_view line, bool& current) {
  current = line.starts_with(kCurrent);
  if (current)
    line.remove_prefix(kCurrent.size());
  else if (line.starts_with(kOther))
    line.remove_prefix(kOther.size());
  else
    return std::nullopt;
  std::uint64_t ident = 0;
  const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), ident, 16);
  if (ec != std::errc() || end == line.data()) return std::nullopt;
  return ident;
}

}  // namespace

std::vector<PythonThreadDump> parse_python_threads(std::string_view text) {
  std::vector<PythonThreadDump> threads;
  for (const std::string_view line : lines_of(text)) {
    bool current = false;
    if (const auto ident = header_ident(line, current)) {
      threads.push_back({*ident, current, {}});
      continue;
    }
    if (threads.empty()) continue;
    if (auto frame = diagnosis::parse_faulthandler_frame(line))
      threads.back().frames.push_back(std::move(*frame));
  }
  return threads;
}

void join_python(ProcessStacks& stacks, std::vector<PythonThreadDump> dump) {
  for (auto& block : dump) {
    ThreadStacks* owner = nullptr;
    for (auto& t : stacks.threads)
      if (t.thread_pointer != 0 && t.thread_pointer == block.ident) owner = &t;
    if (owner == nullptr) {
      stacks.python_unjoined.push_back({block.ident, block.current, std::move(block.frames)});
      continue;
    }
    owner->python_ident = block.ident;
    owner->python_current = block.current;
    owner->python = std::move(block.frames);
  }
}

}  // namespace kwd::stacks
