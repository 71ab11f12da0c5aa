#include "kwd/daemon/runtime_dir_watcher.hpp"

namespace kwd::daemon {
namespace {

// No notification yet on macOS (kqueue EVFILT_VNODE on each directory would do): the
// daemon's periodic scan finds kernels there.
class NoRuntimeDirWatcher final : public RuntimeDirWatcher {
 public:
  [[nodiscard]] int fd() const override { return -1; }
  bool drain() override { return false; }
  void rewatch() override {}
};

}  // namespace

std::unique_ptr<RuntimeDirWatcher> make_runtime_dir_watcher(std::vector<std::filesystem::path>) {
  return std::make_unique<NoRuntimeDirWatcher>();
}

}  // namespace kwd::daemon
