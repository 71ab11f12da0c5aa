#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace kwd::daemon {

// Says when a connection file may have appeared in one of the runtime directories (Linux:
// inotify; one implementation per platform folder). What appeared is not trusted: the
// daemon rescans and matches files to processes itself.
class RuntimeDirWatcher {
 public:
  virtual ~RuntimeDirWatcher() = default;
  // Readable when something changed; -1 when the platform has no such notification (the
  // periodic scan alone then finds kernels).
  [[nodiscard]] virtual int fd() const = 0;
  // What fd() announced, consumed: whether a connection file ("*.json") was written or moved
  // in, and the paths of those removed or moved away (a manager's clean-up after its
  // kernel's end). Directories that did not exist yet are watched once they do (see rewatch).
  struct Changes {
    bool written = false;
    std::vector<std::string> removed;
  };
  virtual Changes drain() = 0;
  // Watches the directories that exist now and were not watched yet.
  virtual void rewatch() = 0;
};

std::unique_ptr<RuntimeDirWatcher> make_runtime_dir_watcher(
    std::vector<std::filesystem::path> dirs);

}  // namespace kwd::daemon
