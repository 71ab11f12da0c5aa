#include "kwd/platform/linux/procfs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "kwd/util/unique_dir.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::platform::linux_proc {
namespace {

template <typename T>
bool to_number(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  // "PID (COMM) STATE PPID ..." where COMM may hold spaces and parentheses.
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  ProcStat st;
  if (!to_number(text.substr(0, open > 0 ? open - 1 : 0), st.pid)) return std::nullopt;
  st.comm = std::string(text.substr(open + 1, close - open - 1));
  // Field 3 (state) is token 0 after the closing parenthesis.
  std::string_view rest = text.substr(close + 1);
  int index = 0;
  std::size_t pos = 0;
  bool ok = true;
  while (pos < rest.size() && index <= 49) {
    while (pos < rest.size() && rest[pos] == ' ')
      ++pos;
    const std::size_t end = rest.find_first_of(" \n", pos);
    const std::string_view tok =
        rest.substr(pos, end == std::string_view::npos ? rest.size() - pos : end - pos);
    if (tok.empty()) break;
    switch (index) {
      case 0:
        st.state = tok[0];
        break;
      case 1:
        ok &= to_number(tok, st.ppid);
        break;
      case 6:
        ok &= to_number(tok, st.flags);
        break;
      case 17:
        ok &= to_number(tok, st.threads);
        break;
      case 19:
        ok &= to_number(tok, st.start_time);
        break;
      case 20:
        ok &= to_number(tok, st.vsize);
        break;
      case 21:
        ok &= to_number(tok, st.rss_pages);
        break;
      case 49: {
        int code = 0;
        if (to_number(tok, code)) st.exit_code = code;
        break;
      }
      default:
        break;
    }
    ++index;
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  if (!ok || index < 22) return std::nullopt;
  return st;
}

std::optional<std::int64_t> parse_statm_resident(std::string_view text) {
  const auto first = text.find(' ');
  if (first == std::string_view::npos) return std::nullopt;
  auto rest = text.substr(first + 1);
  rest = rest.substr(0, rest.find_first_of(" \n"));
  std::int64_t pages = 0;
  if (!to_number(rest, pages)) return std::nullopt;
  return pages;
}

std::optional<std::int64_t> parse_statm_size(std::string_view text) {
  std::int64_t pages = 0;
  if (!to_number(text.substr(0, text.find_first_of(" \n")), pages)) return std::nullopt;
  return pages;
}

std::optional<std::int64_t> find_kb_field(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = text.find('\n', pos);
    const std::string_view line =
        text.substr(pos, eol == std::string_view::npos ? text.size() - pos : eol - pos);
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ':') {
      std::string_view v = line.substr(key.size() + 1);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
        v.remove_prefix(1);
      const std::size_t sp = v.find(' ');
      std::int64_t n = 0;
      if (!to_number(v.substr(0, sp), n)) return std::nullopt;
      const bool kb = sp != std::string_view::npos && v.substr(sp + 1).starts_with("kB");
      if (kb && __builtin_mul_overflow(n, 1024, &n)) return std::nullopt;  // no such size
      return n;
    }
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  return std::nullopt;
}

std::optional<std::string> read_small_file(const std::string& path) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > (1u << 22)) break;  // nothing we read is this large; stop anyway
  }
  return out;
}

std::optional<std::string_view> pread_to_end(int fd, std::string& buf) {
  if (buf.size() < 4096) buf.resize(4096);
  std::size_t used = 0;
  for (;;) {
    if (used == buf.size()) {
      if (buf.size() >= (1u << 22)) break;  // nothing we read is this large; stop anyway
      buf.resize(buf.size() * 2);
    }
    const ssize_t n = ::pread(fd, buf.data() + used, buf.size() - used, static_cast<off_t>(used));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used == 0) return std::nullopt;
  return std::string_view(buf.data(), used);
}

std::optional<std::string_view> pread_all(int fd, std::string& buf) {
  if (buf.size() < 1024) buf.resize(1024);
  for (;;) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    if (static_cast<std::size_t>(n) < buf.size())
      return std::string_view(buf.data(), static_cast<std::size_t>(n));
    buf.resize(buf.size() * 2);
  }
}

std::optional<std::int64_t> boot_time_ms() {
  static const std::optional<std::int64_t> at = []() -> std::optional<std::int64_t> {
    const auto text = read_small_file("/proc/stat");
    if (!text) return std::nullopt;
    const auto line = text->find("\nbtime ");
    if (line == std::string::npos) return std::nullopt;
    const char* first = text->data() + line + 7;
    std::int64_t seconds = 0;
    const auto [end, ec] = std::from_chars(first, text->data() + text->size(), seconds);
    if (ec != std::errc() || end == first || seconds <= 0) return std::nullopt;
    return seconds * 1000;
  }();
  return at;
}

std::int64_t start_ticks_to_ms(std::uint64_t start_ticks) {
  static const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (ticks_per_second <= 0) return -1;
  return static_cast<std::int64_t>(start_ticks * 1000 /
                                   static_cast<std::uint64_t>(ticks_per_second));
}

std::int64_t started_at_ms(std::uint64_t start_ticks) {
  const auto boot = boot_time_ms();
  const std::int64_t since_boot = start_ticks_to_ms(start_ticks);
  if (!boot || since_boot < 0) return -1;
  return *boot + since_boot;
}

std::vector<pid_t> list_pids(const std::string& proc_root) {
  std::vector<pid_t> out;
  const util::UniqueDir proc(::opendir(proc_root.c_str()));
  if (!proc) return out;
  while (const dirent* entry = ::readdir(proc.get())) {
    pid_t pid = 0;
    const char* name = entry->d_name;
    const auto [end, ec] = std::from_chars(name, name + std::strlen(name), pid);
    if (ec == std::errc() && *end == '\0' && pid > 0) out.push_back(pid);
  }
  return out;
}

}  // namespace kwd::platform::linux_proc
