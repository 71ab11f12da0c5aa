#include "kwd/platform/service_log.hpp"

#include <dlfcn.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/logging/log_fields.hpp"

namespace kwd::platform {
namespace {

using SendV = int (*)(const struct iovec* iov, int n);

// $JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected; it is inherited, so it
// counts only while our stderr is still that stream (not redirected by a shell since).
bool stderr_is_the_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  const std::string_view text(stream);
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  unsigned long long device = 0, inode = 0;
  const auto d = std::from_chars(text.data(), text.data() + colon, device);
  const auto i = std::from_chars(text.data() + colon + 1, text.data() + text.size(), inode);
  if (d.ec != std::errc() || i.ec != std::errc()) return false;
  struct stat st {};
  return ::fstat(2, &st) == 0 && st.st_dev == device && st.st_ino == inode;
}

// syslog(3) priorities, as journald's PRIORITY= wants them.
int priority_of(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical:
      return 2;
    case spdlog::level::err:
      return 3;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::info:
      return 6;
    default:
      return 7;
  }
}

class JournalSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  JournalSink(void* library, SendV send) : library_(library), send_(send) {}
  ~JournalSink() override { ::dlclose(library_); }
  JournalSink(const JournalSink&) = delete;
  JournalSink& operator=(const JournalSink&) = delete;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::vector<std::string> fields;
    fields.push_back("MESSAGE=" + std::string(msg.payload.data(), msg.payload.size()));
    fields.push_back("PRIORITY=" + std::to_string(priority_of(msg.level)));
    fields.emplace_back("SYSLOG_IDENTIFIER=kernel-watchdog");
    for (const auto& [name, value] : logging::LogFields::current()) {
      std::string key;
      for (char c : name)
        key += std::isalnum(static_cast<unsigned char>(c)) != 0
                   ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                   : '_';
      fields.push_back(key + "=" + value);
    }
    std::vector<iovec> parts;
    for (auto& f : fields)
      parts.push_back({f.data(), f.size()});
    send_(parts.data(), static_cast<int>(parts.size()));  // a lost line must not stop us
  }
  void flush_() override {}

 private:
  void* library_;
  SendV send_;
};

}  // namespace

std::shared_ptr<spdlog::sinks::sink> service_log_sink() {
  if (!stderr_is_the_journal()) return nullptr;
  void* library = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return nullptr;
  const auto send = reinterpret_cast<SendV>(::dlsym(library, "sd_journal_sendv"));
  if (send == nullptr) {
    ::dlclose(library);
    return nullptr;
  }
  return std::make_shared<JournalSink>(library, send);
}

}  // namespace kwd::platform
