#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace kwd::watch {

// What a dying kernel wrote to fd 2 that nobody read. ipykernel points fd 2 at a pipe of its
// own and forwards what it reads from a thread; when a library writes its error and aborts
// at once ("terminate called after...", "Check failed:", CUDA_ERROR_OUT_OF_MEMORY), those
// bytes are still in that pipe when the process dies, and die with it. Holding a duplicate of
// the pipe's read end keeps them: never read while the kernel lives (ipykernel's thread does
// that), drained after its death. One implementation per platform folder.
class LastWords {
 public:
  virtual ~LastWords() = default;
  // Looks for the kernel's own stderr pipe (cheap; call until it says true). `our_pipe_fd`
  // is the read end of the pipe the kernel was started with, so that it is not mistaken
  // for the kernel's.
  virtual bool try_attach() = 0;
  // After the kernel's death: what was left unread, at most `limit` bytes. Never blocks.
  virtual std::string drain(std::size_t limit) = 0;
  // Why nothing can be kept ("" while attached or still looking).
  [[nodiscard]] virtual std::string problem() const = 0;
};

std::unique_ptr<LastWords> make_last_words(pid_t kernel_pid, int our_pipe_fd);

}  // namespace kwd::watch
