// Death of a process that is not our child, on macOS: kqueue's EVFILT_PROC with
// NOTE_EXIT | NOTE_EXITSTATUS delivers the wait status in the event's data. Not built on
// this project's Linux CI; written from the documented kqueue(2) API.
#include <sys/event.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "kwd/util/unique_fd.hpp"
#include "kwd/watch/death_source.hpp"

namespace kwd::watch {
namespace {

class KqueueDeathSource final : public DeathSource {
 public:
  explicit KqueueDeathSource(pid_t pid) : kq_(::kqueue()) {
    if (!kq_) throw std::system_error(errno, std::generic_category(), "kqueue");
    struct kevent change {};
    EV_SET(&change, pid, EVFILT_PROC, EV_ADD | EV_ONESHOT, NOTE_EXIT | NOTE_EXITSTATUS, 0, nullptr);
    if (::kevent(kq_.get(), &change, 1, nullptr, 0, nullptr) != 0)
      throw std::system_error(errno, std::generic_category(), "kevent(EVFILT_PROC)");
  }
  [[nodiscard]] int fd() const override { return kq_.get(); }

  std::optional<ProcessEnd> check() override {
    if (ended_) return ended_;
    struct kevent event {};
    const timespec zero{0, 0};
    if (::kevent(kq_.get(), nullptr, 0, &event, 1, &zero) <= 0) return std::nullopt;
    if ((event.fflags & NOTE_EXIT) == 0) return std::nullopt;
    ended_ = ProcessEnd{Termination::from_wait_status(static_cast<int>(event.data)), "kqueue"};
    return ended_;
  }

 private:
  util::UniqueFd kq_;
  std::optional<ProcessEnd> ended_;
};

}  // namespace

std::unique_ptr<DeathSource> make_process_death_source(pid_t pid) {
  return std::make_unique<KqueueDeathSource>(pid);
}

}  // namespace kwd::watch
