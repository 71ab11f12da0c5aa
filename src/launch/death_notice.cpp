#include "kwd/launch/death_notice.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <string_view>

#include "kwd/diagnosis/report_view.hpp"
#include "kwd/platform/regular_file.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/shell_word.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::launch {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kMaxNoticeBytes = 64 * 1024;

std::optional<util::SafeDir> notices_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && fs::path(xdg).is_absolute()) {
    try {
      return util::SafeDir::open_private(fs::path(xdg) / "kernel-watchdog" / "notices");
    } catch (const util::FileError& e) {
      spdlog::debug("death notices: not in $XDG_RUNTIME_DIR: {}", e.what());
    }
  }
  try {
    return util::SafeDir::open_private(report::ReportStore::fallback_dir().parent_path() /
                                       "notices");
  } catch (const util::FileError& e) {
    spdlog::debug("death notices: no private directory: {}", e.what());
    return std::nullopt;
  }
}

// A kernel id is the connection file's, which anyone can name: only a plain file name.
std::optional<std::string> notice_name(const std::string& kernel_id) {
  if (kernel_id.empty() || kernel_id.size() > 128) return std::nullopt;
  for (const char c : kernel_id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return std::nullopt;
  return "notice-" + kernel_id + ".json";
}

// A manager restarts a dead kernel within seconds; a notice older than this was never taken
// by a restart (autorestart off, the user started another kernel) and must not be shown to a
// kernel that merely reuses the connection file's name later.
constexpr std::time_t kNoticeLifetimeS = 10 * 60;

bool stale(const struct stat& st) {
  return std::time(nullptr) - st.st_mtime > kNoticeLifetimeS;
}

std::string local_time_of_day(std::int64_t epoch_ms) {
  const std::time_t seconds = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm local{};
  if (::localtime_r(&seconds, &local) == nullptr) return "";
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

}  // namespace

// Text that Markdown (and the HTML it may carry) shows as it is: a headline quotes stderr.
std::string markdown_literal(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (std::string_view("\\`*_{}[]()#+-.!|~").find(c) != std::string_view::npos)
      out += std::string("\\") + c;
    else
      out += c;
  }
  return out;
}

nlohmann::json death_notice(const nlohmann::json& report, const fs::path& report_path) {
  const diagnosis::ReportView view(report);
  std::string headline = view.text("/diagnosis/headline").value_or("");
  if (headline.empty()) headline = "the kernel died unexpectedly";
  const auto died_at_ms = view.integer("/kernel/died_at_ms");
  const std::string when = died_at_ms ? " at " + local_time_of_day(*died_at_ms) : "";
  // The file itself: it works whatever store the reader's shell would look in (a wrap's own
  // --report-dir, the fallback after a full disk).
  const std::string command =
      "kernel-watchdog reports show " + util::shell_word(report_path.string());
  return {{"text", "kernel-watchdog: this notebook's previous kernel died" + when + ": " +
                       headline + "\nSee why: " + command + "\n"},
          {"markdown", "**kernel-watchdog**: this notebook's previous kernel died" + when + ": " +
                           markdown_literal(headline) + "  \nSee why: `" + command + "`"},
          {"report", report_path.stem().string()}};
}

void leave_death_notice(const std::string& kernel_id, const nlohmann::json& notice) noexcept {
  try {
    const auto name = notice_name(kernel_id);
    if (!name) return;
    auto dir = notices_dir();
    if (!dir) return;
    dir->sweep_older_than("notice-", kNoticeLifetimeS);
    dir->write_file(*name, notice.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    0600);
  } catch (const std::exception& e) {
    spdlog::debug("death notice not left: {}", e.what());
  }
}

std::optional<std::string> claim_death_notice(const std::string& kernel_id) noexcept {
  try {
    const auto name = notice_name(kernel_id);
    if (!name) return std::nullopt;
    auto dir = notices_dir();
    if (!dir) return std::nullopt;
    auto file = platform::open_regular_file(dir->fd(), name->c_str(), O_NOFOLLOW);
    if (!file.fd) return std::nullopt;
    const util::UniqueFd fd = std::move(file.fd);
    const struct stat& st = file.st;
    if (st.st_uid != ::geteuid() || static_cast<std::size_t>(st.st_size) > kMaxNoticeBytes)
      return std::nullopt;
    if (stale(st)) {  // no restart followed that death: a kernel started later is not its heir
      ::unlinkat(dir->fd(), name->c_str(), 0);
      return std::nullopt;
    }
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    if (::read(fd.get(), text.data(), text.size()) != st.st_size) return std::nullopt;
    // The one whose unlink succeeds has it: two kernels started at once show it once.
    if (::unlinkat(dir->fd(), name->c_str(), 0) != 0) return std::nullopt;
    return text;
  } catch (const std::exception& e) {
    spdlog::debug("death notice not claimed: {}", e.what());
    return std::nullopt;
  }
}

}  // namespace kwd::launch
