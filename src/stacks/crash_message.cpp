#include <signal.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "kwd/platform/host.hpp"
#include "kwd/stacks/crash.hpp"

namespace kwd::stacks {
namespace {

// "key=value" at the front of `rest` (after spaces); the value parsed in `base`.
template <typename T>
bool take(std::string_view& rest, std::string_view key, T& value, int base = 10) {
  while (rest.starts_with(' '))
    rest.remove_prefix(1);
  if (!rest.starts_with(key) || rest.size() <= key.size() || rest[key.size()] != '=') return false;
  rest.remove_prefix(key.size() + 1);
  if (base == 16) {
    if (!rest.starts_with("0x")) return false;
    rest.remove_prefix(2);
  }
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value, base);
  if (ec != std::errc() || end == rest.data()) return false;
  rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  return true;
}

}  // namespace

std::optional<FatalSignal> parse_fatal_signal(std::string_view message) {
  constexpr std::string_view kHead = "kwd-crash 1";
  if (!message.starts_with(kHead)) return std::nullopt;
  std::string_view rest = message.substr(kHead.size());
  FatalSignal f;
  if (!take(rest, "pid", f.pid) || !take(rest, "tid", f.tid) || !take(rest, "sig", f.signal) ||
      !take(rest, "code", f.code) || !take(rest, "addr", f.address, 16) ||
      !take(rest, "pc", f.pc, 16))
    return std::nullopt;
  if (rest != "\n" && !rest.empty()) return std::nullopt;
  if (f.pid <= 0 || f.tid <= 0 || f.signal <= 0 || f.signal > 64) return std::nullopt;
  return f;
}

bool is_crash_signal(int signal) {
  return signal == SIGSEGV || signal == SIGBUS || signal == SIGILL || signal == SIGFPE ||
         signal == SIGABRT || signal == SIGTRAP;
}

bool cut_at_fault(std::vector<NativeFrame>& frames, std::uint64_t pc) {
  if (pc == 0) return false;
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (frames[i].pc == pc) {
      frames.erase(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  return false;
}

std::filesystem::path crash_handler_library() {
  std::error_code ec;
  if (const char* path = std::getenv("KERNEL_WATCHDOG_CRASH_LIBRARY"); path && *path)
    return std::filesystem::is_regular_file(path, ec) ? std::filesystem::path(path)
                                                      : std::filesystem::path();
  const auto dir = platform::self_executable().parent_path();
  for (const auto& candidate :
       {dir / kCrashHandlerLibraryName,
        dir.parent_path() / "lib" / "kernel-watchdog" / kCrashHandlerLibraryName})
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  return {};
}

}  // namespace kwd::stacks
