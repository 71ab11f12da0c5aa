#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "kwd/daemon/runtime_dir_watcher.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::daemon {
namespace {

class InotifyRuntimeDirWatcher final : public RuntimeDirWatcher {
 public:
  explicit InotifyRuntimeDirWatcher(std::vector<std::filesystem::path> dirs)
      : dirs_(std::move(dirs)), fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (!fd_)
      spdlog::warn("inotify unavailable ({}); kernels are found by scans alone",
                   std::strerror(errno));
    rewatch();
  }

  [[nodiscard]] int fd() const override { return fd_.get(); }

  void rewatch() override {
    if (!fd_) return;
    for (const auto& dir : dirs_) {
      if (watched_.contains(dir.string())) continue;
      const int wd = ::inotify_add_watch(
          fd_.get(), dir.c_str(),
          IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR);
      if (wd >= 0) watched_.emplace(dir.string(), wd);
    }
  }

  Changes drain() override {
    Changes changes;
    alignas(inotify_event) char buf[8192];
    for (;;) {
      const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n <= 0) break;
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buf + at);
        if (event->len > 0 && std::string_view(event->name).ends_with(".json")) {
          if (event->mask & (IN_DELETE | IN_MOVED_FROM)) {
            const auto dir = std::find_if(watched_.begin(), watched_.end(),
                                          [&](const auto& e) { return e.second == event->wd; });
            if (dir != watched_.end()) changes.removed.push_back(dir->first + "/" + event->name);
          } else {
            changes.written = true;
          }
        }
        if (event->mask & IN_IGNORED) {  // the directory went away: watched again if it returns
          std::erase_if(watched_, [&](const auto& entry) { return entry.second == event->wd; });
        }
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    return changes;
  }

 private:
  std::vector<std::filesystem::path> dirs_;
  util::UniqueFd fd_;
  std::map<std::string, int> watched_;
};

}  // namespace

std::unique_ptr<RuntimeDirWatcher> make_runtime_dir_watcher(
    std::vector<std::filesystem::path> dirs) {
  return std::make_unique<InotifyRuntimeDirWatcher>(std::move(dirs));
}

}  // namespace kwd::daemon
