#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kwd/platform/read_worker.hpp"
#include "kwd/platform/root_view.hpp"

namespace kwd::daemon {

// One read of a kernel's file (its connection file) on a thread of its own, for the daemon's
// loop: a file on a mount that stopped answering (an NFS home, a pod's root over FUSE) holds up
// this read, never the loop and the other kernels on it. The loop waits a moment for the
// answer (a read that answers takes microseconds) and otherwise asks again later.
class OffLoopRead {
 public:
  using Read = std::function<platform::RootView::FileRead()>;
  // Starts `read`, and waits up to `wait` for its answer.
  OffLoopRead(Read read, std::chrono::milliseconds wait);
  ~OffLoopRead();
  OffLoopRead(OffLoopRead&&) noexcept = default;
  OffLoopRead& operator=(OffLoopRead&&) noexcept = default;

  // The answer, once the read has given it (taken: the caller then owns the text, and the key
  // in it); nullopt while it has not.
  std::optional<platform::RootView::FileRead> take();
  // The file the read has been blocked in for at least `for_at_least`, and since when.
  [[nodiscard]] std::optional<platform::ReadWorker::Blocked> blocked(
      std::chrono::milliseconds for_at_least) const;
  // Steady ms when the read was started.
  [[nodiscard]] std::int64_t started_ms() const { return started_ms_; }

  struct Answer;

 private:
  std::unique_ptr<platform::ReadWorker> worker_;
  std::shared_ptr<Answer> answer_;
  std::int64_t started_ms_ = 0;
};

// Whether a kernel's file is there (lstat), asked off the loop: the death of a kernel whose
// connection file is on a mount that stopped answering must not stop the daemon's loop. One
// question at a time: while one waits on the file system, the next is not asked.
class FileLook {
 public:
  explicit FileLook(std::string path);
  // true: there; false: not there (ENOENT); nullopt: not known (no answer within `wait`, or
  // another error).
  std::optional<bool> present(std::chrono::milliseconds wait);

  struct Answer;

 private:
  std::string path_;
  std::shared_ptr<Answer> answer_;
  platform::ReadWorker worker_{"kwd-file-look"};
};

}  // namespace kwd::daemon
