// Unbuilt here (see src/probes/darwin/README.md): written to <sys/event.h> as documented.
#include "kwd/daemon/runtime_dir_watcher.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/event.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "kwd/util/unique_dir.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::daemon {
namespace {

// The "*.json" names in the directory `fd` is open on (an O_EVTONLY fd, kept for kqueue): read
// through a descriptor of its own, whose offset starts at the beginning (a dup would share,
// and leave, the watched fd's).
std::set<std::string> json_names(int fd) {
  std::set<std::string> names;
  util::UniqueFd own(::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!own) return names;
  const util::UniqueDir dir(::fdopendir(own.get()));
  if (!dir) return names;
  (void)own.release();  // closedir closes it now
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string_view name(entry->d_name);
    if (name.ends_with(".json")) names.emplace(name);
  }
  return names;
}

// kqueue's EVFILT_VNODE says only that a directory changed, not what: each change is answered
// by listing that directory again and comparing its "*.json" names with the last listing.
class KqueueRuntimeDirWatcher final : public RuntimeDirWatcher {
 public:
  explicit KqueueRuntimeDirWatcher(std::vector<std::filesystem::path> dirs)
      : dirs_(std::move(dirs)), queue_(::kqueue()) {
    if (!queue_)
      spdlog::warn("kqueue unavailable ({}); kernels are found by scans alone",
                   std::strerror(errno));
    else
      ::fcntl(queue_.get(), F_SETFD, FD_CLOEXEC);
    rewatch();
  }

  [[nodiscard]] int fd() const override { return queue_.get(); }

  void rewatch() override {
    if (!queue_) return;
    for (const auto& dir : dirs_) {
      if (watched_.contains(dir.string())) continue;
      util::UniqueFd fd(::open(dir.c_str(), O_EVTONLY | O_DIRECTORY | O_CLOEXEC));
      if (!fd) continue;
      struct kevent change {};
      EV_SET(&change, fd.get(), EVFILT_VNODE, EV_ADD | EV_CLEAR,
             NOTE_WRITE | NOTE_DELETE | NOTE_RENAME | NOTE_REVOKE, 0, nullptr);
      if (::kevent(queue_.get(), &change, 1, nullptr, 0, nullptr) != 0) continue;
      Watched w{std::move(fd), {}};
      w.names = json_names(w.fd.get());
      watched_.emplace(dir.string(), std::move(w));
    }
  }

  Changes drain() override {
    Changes changes;
    struct kevent events[16];
    const timespec no_wait{0, 0};
    for (;;) {
      const int n = ::kevent(queue_.get(), nullptr, 0, events, 16, &no_wait);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i) {
        const int fd = static_cast<int>(events[i].ident);
        const auto it = std::find_if(watched_.begin(), watched_.end(), [&](const auto& entry) {
          return entry.second.fd.get() == fd;
        });
        if (it == watched_.end()) continue;
        if (events[i].fflags & (NOTE_DELETE | NOTE_RENAME | NOTE_REVOKE)) {
          watched_.erase(it);  // closing the fd removes its kevent; watched again if it returns
          continue;
        }
        auto names = json_names(fd);
        for (const auto& name : names)
          if (!it->second.names.contains(name)) changes.written = true;
        for (const auto& name : it->second.names)
          if (!names.contains(name)) changes.removed.push_back(it->first + "/" + name);
        it->second.names = std::move(names);
      }
      if (n < 16) break;
    }
    return changes;
  }

 private:
  struct Watched {
    util::UniqueFd fd;
    std::set<std::string> names;
  };
  std::vector<std::filesystem::path> dirs_;
  util::UniqueFd queue_;
  std::map<std::string, Watched> watched_;
};

}  // namespace

std::unique_ptr<RuntimeDirWatcher> make_runtime_dir_watcher(
    std::vector<std::filesystem::path> dirs) {
  return std::make_unique<KqueueRuntimeDirWatcher>(std::move(dirs));
}

}  // namespace kwd::daemon
