#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>

#include "kwd/stacks/pure.hpp"

namespace kwd::stacks {
namespace {

std::string_view first_word(std::string_view text) {
  const auto end = text.find_first_of(" \t\n");
  return text.substr(0, end);
}

// The value after "Key:" on its own line of a /proc/PID/status text, trimmed.
std::optional<std::string_view> status_field(std::string_view text, std::string_view key) {
  for (std::string_view line : lines_of(text)) {
    if (line.starts_with(key) && line.size() > key.size() && line[key.size()] == ':') {
      line.remove_prefix(key.size() + 1);
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
        line.remove_prefix(1);
      return line;
    }
  }
  return std::nullopt;
}

bool names_a_secret(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string_view word :
       {"token", "secret", "password", "passwd", "key", "credential", "auth"})
    if (lower.find(word) != std::string::npos) return true;
  return false;
}

}  // namespace

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t at = 0;
  while (at < text.size()) {
    auto end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

std::string syscall_name(long number) {
  // Those a stuck thread is found in: waits, sleeps, I/O. Others are named by number.
  struct Entry {
    long number;
    const char* name;
  };
#if defined(__aarch64__)
  static constexpr Entry kTable[] = {{22, "epoll_pwait"},   {29, "ioctl"},
                                     {63, "read"},          {64, "write"},
                                     {72, "pselect6"},      {73, "ppoll"},
                                     {95, "waitid"},        {98, "futex"},
                                     {101, "nanosleep"},    {115, "clock_nanosleep"},
                                     {124, "sched_yield"},  {202, "accept"},
                                     {207, "recvfrom"},     {212, "recvmsg"},
                                     {242, "accept4"},      {260, "wait4"},
                                     {441, "epoll_pwait2"}, {449, "futex_waitv"}};
#else
  static constexpr Entry kTable[] = {
      {0, "read"},          {1, "write"},      {7, "poll"},       {16, "ioctl"},
      {17, "pread64"},      {19, "readv"},     {23, "select"},    {24, "sched_yield"},
      {34, "pause"},        {35, "nanosleep"}, {43, "accept"},    {45, "recvfrom"},
      {47, "recvmsg"},      {61, "wait4"},     {202, "futex"},    {230, "clock_nanosleep"},
      {232, "epoll_wait"},  {247, "waitid"},   {270, "pselect6"}, {271, "ppoll"},
      {281, "epoll_pwait"}, {288, "accept4"},  {299, "recvmmsg"}, {441, "epoll_pwait2"},
      {449, "futex_waitv"}};
#endif
  for (const auto& e : kTable)
    if (e.number == number) return e.name;
  return {};
}

std::string blocked_syscall(std::string_view text) {
  const auto word = first_word(text);
  long number = 0;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), number);
  // "running" (no number), "-1 ..." (stopped outside a system call).
  if (ec != std::errc() || end != word.data() + word.size() || number < 0) return {};
  auto name = syscall_name(number);
  return name.empty() ? "syscall " + std::to_string(number) : name;
}

std::optional<pid_t> tracer_pid(std::string_view status_text) {
  const auto value = status_field(status_text, "TracerPid");
  if (!value) return std::nullopt;
  const auto word = first_word(*value);
  pid_t pid = 0;
  if (std::from_chars(word.data(), word.data() + word.size(), pid).ec != std::errc())
    return std::nullopt;
  return pid;
}

bool signal_in_mask(std::string_view status_text, std::string_view field, int signo) {
  const auto value = status_field(status_text, field);
  if (!value || signo < 1 || signo > 64) return false;
  const auto word = first_word(*value);
  std::uint64_t mask = 0;
  if (std::from_chars(word.data(), word.data() + word.size(), mask, 16).ec != std::errc())
    return false;
  return (mask >> (signo - 1)) & 1U;
}

std::optional<std::uint64_t> mapping_end(std::string_view maps, std::uint64_t address) {
  for (const std::string_view line : lines_of(maps)) {
    std::uint64_t low = 0;
    std::uint64_t high = 0;
    const auto [dash, ec1] = std::from_chars(line.data(), line.data() + line.size(), low, 16);
    if (ec1 != std::errc() || dash == line.data() + line.size() || *dash != '-') continue;
    const auto [stop, ec2] = std::from_chars(dash + 1, line.data() + line.size(), high, 16);
    if (ec2 != std::errc() || stop == dash + 1) continue;
    if (address >= low && address < high) return high;
  }
  return std::nullopt;
}

std::string redact_command(std::string_view command) {
  std::string out;
  out.reserve(command.size());
  std::size_t at = 0;
  while (at <= command.size()) {
    const auto end = std::min(command.find(' ', at), command.size());
    std::string word(command.substr(at, end - at));
    // scheme://user:password@host: everything between "://" and the last '@' before the path.
    if (const auto scheme = word.find("://"); scheme != std::string::npos) {
      const auto path = word.find('/', scheme + 3);
      const auto at_sign = word.rfind('@', path == std::string::npos ? word.size() : path);
      if (at_sign != std::string::npos && at_sign > scheme + 3)
        word.replace(scheme + 3, at_sign - scheme - 3, "<redacted>");
    }
    if (const auto equals = word.find('=');
        equals != std::string::npos && equals > 0 &&
        names_a_secret(std::string_view(word).substr(0, equals)))
      word.replace(equals + 1, std::string::npos, "<redacted>");
    out += word;
    if (end == command.size()) break;
    out += ' ';
    at = end + 1;
  }
  return out;
}

}  // namespace kwd::stacks
