#include "kwd/daemon/off_loop_read.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <mutex>

#include "kwd/util/clock.hpp"
#include "kwd/util/wipe.hpp"

namespace kwd::daemon {

struct OffLoopRead::Answer {
  std::mutex mutex;
  std::optional<platform::RootView::FileRead> read;  // (under mutex)
  // A connection file holds the kernel's key: an answer nobody took is wiped with it.
  ~Answer() {
    if (read && read->text) util::wipe(read->text->data(), read->text->size());
  }
};

OffLoopRead::OffLoopRead(Read read, std::chrono::milliseconds wait)
    : worker_(std::make_unique<platform::ReadWorker>("kwd-file-read")),
      answer_(std::make_shared<Answer>()),
      started_ms_(util::steady_ms()) {
  worker_->post([answer = answer_, read = std::move(read)] {
    auto got = read();
    const std::lock_guard lock(answer->mutex);
    answer->read = std::move(got);
  });
  worker_->wait_idle(wait);
}

OffLoopRead::~OffLoopRead() = default;

std::optional<platform::RootView::FileRead> OffLoopRead::take() {
  if (!answer_) return std::nullopt;
  const std::lock_guard lock(answer_->mutex);
  auto got = std::move(answer_->read);
  answer_->read.reset();
  return got;
}

std::optional<platform::ReadWorker::Blocked> OffLoopRead::blocked(
    std::chrono::milliseconds for_at_least) const {
  return worker_ ? worker_->blocked(for_at_least) : std::nullopt;
}

struct FileLook::Answer {
  std::mutex mutex;
  std::optional<bool> present;  // (under mutex)
};

FileLook::FileLook(std::string path)
    : path_(std::move(path)), answer_(std::make_shared<Answer>()) {}

std::optional<bool> FileLook::present(std::chrono::milliseconds wait) {
  // A look still waiting on the file system: no second one behind it.
  if (!worker_.idle() && !worker_.wait_idle(wait)) return std::nullopt;
  worker_.post([answer = answer_, path = path_] {
    const platform::ReadingFile reading(path);
    struct stat st {};
    std::optional<bool> present;
    if (::lstat(path.c_str(), &st) == 0)
      present = true;
    else if (errno == ENOENT)
      present = false;
    const std::lock_guard lock(answer->mutex);
    answer->present = present;
  });
  if (!worker_.wait_idle(wait)) return std::nullopt;
  const std::lock_guard lock(answer_->mutex);
  return answer_->present;
}

}  // namespace kwd::daemon
