// macOS has no way to take a file descriptor out of another process (no pidfd_getfd), so a
// dying kernel's unread stderr cannot be kept there; the report says so.
#include "kwd/watch/last_words.hpp"

namespace kwd::watch {
namespace {

class NoLastWords final : public LastWords {
 public:
  bool try_attach() override { return true; }
  std::string drain(std::size_t /*limit*/) override { return {}; }
  [[nodiscard]] std::string problem() const override {
    return "macOS cannot duplicate another process's file descriptor";
  }
};

}  // namespace

std::unique_ptr<LastWords> make_last_words(pid_t /*kernel_pid*/, int /*our_pipe_fd*/) {
  return std::make_unique<NoLastWords>();
}

}  // namespace kwd::watch
