#include "kwd/stacks/linux/unwind_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "kwd/stacks/stacks_json.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::stacks::linux_stacks {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

void write_all(int fd, const std::string& text) noexcept {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// The child's whole life. Only what is safe after fork() in a process that had threads:
// no logging (spdlog's mutexes may be held by a thread that is not here), memory and
// system calls only.
[[noreturn]] void child_main(int out, const Libdw& lib, pid_t pid, const std::vector<pid_t>& tids,
                             std::size_t max_frames, Clock::time_point deadline) {
  try {
    const auto freeze_budget = std::chrono::milliseconds(500);
    const FrozenProcess frozen = freeze_and_copy(pid, tids, freeze_budget);
    json head = {{"frozen_us", frozen.frozen_us}, {"threads", json::array()}};
    for (const auto& image : frozen.images)
      head["threads"].push_back({{"tid", image.tid}, {"tp", image.thread_pointer}});
    write_all(out, head.dump() + "\n");
    // Leave a margin before the parent's own deadline for the last line to arrive.
    const auto names_until = deadline - (deadline - Clock::now()) / 4;
    // A pool's threads share most of their frames: each distinct frame is sent once, the
    // first time a thread has it ("new_frames", numbered in the order sent), and a thread's
    // stack as those numbers.
    std::map<std::pair<std::uint64_t, int>, std::size_t> sent;
    unwind(lib, pid, frozen.images, max_frames, names_until, [&](const UnwoundThread& t) {
      std::vector<NativeFrame> fresh;
      json ids = json::array();
      for (const auto& frame : t.frames) {
        const auto [at, added] = sent.try_emplace({frame.pc, frame.line}, sent.size());
        if (added) fresh.push_back(frame);
        ids.push_back(at->second);
      }
      write_all(out, json{{"tid", t.tid},
                          {"new_frames", frames_to_json(fresh)},
                          {"frame_ids", std::move(ids)},
                          {"truncated", t.truncated},
                          {"problem", t.problem}}
                             .dump() +
                         "\n");
    });
  } catch (const std::exception& e) {
    write_all(out, json{{"error", e.what()}}.dump() + "\n");
  } catch (...) {
    write_all(out, "{\"error\":\"unknown failure\"}\n");
  }
  ::_exit(0);
}

// `table`: the distinct frames the child sent so far, in order (their numbers).
void take_line(const std::string& line, NativeCapture& out, std::vector<NativeFrame>& table) {
  const auto doc = json::parse(line, nullptr, false);
  if (!doc.is_object()) return;
  if (const auto e = doc.find("error"); e != doc.end() && e->is_string()) {
    out.problem = e->get<std::string>();
  } else if (const auto f = doc.find("frozen_us"); f != doc.end() && f->is_number_integer()) {
    out.frozen_us = f->get<std::int64_t>();
    for (const auto& t : doc.value("threads", json::array()))
      out.thread_pointers.emplace_back(t.value("tid", 0), t.value("tp", std::uint64_t{0}));
  } else {
    UnwoundThread t;
    t.tid = doc.value("tid", 0);
    for (auto& frame : frames_from_json(doc.value("new_frames", json::array())))
      table.push_back(std::move(frame));
    for (const auto& id : doc.value("frame_ids", json::array()))
      if (id.is_number_unsigned() && id.get<std::size_t>() < table.size())
        t.frames.push_back(table[id.get<std::size_t>()]);
    t.truncated = doc.value("truncated", false);
    t.problem = doc.value("problem", "");
    out.threads.push_back(std::move(t));
  }
}

}  // namespace

NativeCapture capture_native(const Libdw& lib, pid_t pid, const std::vector<pid_t>& tids,
                             std::size_t max_frames, std::chrono::milliseconds budget) {
  NativeCapture out;
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    out.problem = std::string("cannot make a pipe: ") + std::strerror(errno);
    return out;
  }
  util::UniqueFd read_end(ends[0]);
  util::UniqueFd write_end(ends[1]);
  const auto deadline = Clock::now() + budget;
  const pid_t child = ::fork();
  if (child < 0) {
    out.problem = std::string("cannot fork the unwinder: ") + std::strerror(errno);
    return out;
  }
  if (child == 0) {
    // The watchdog's handlers are inherited: a signal to the whole process group (Jupyter's
    // interrupt or shutdown) would reach the watchdog's signal pipe twice, and be passed on
    // twice. Nothing but SIGKILL may end the unwinder; and it ends with the watchdog (its
    // end detaches whatever it still traced).
    sigset_t all;
    ::sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    read_end.reset();
    child_main(write_end.get(), lib, pid, tids, max_frames, deadline);
  }
  write_end.reset();

  std::string pending;
  std::vector<NativeFrame> table;
  bool ended = false;
  while (!ended) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{read_end.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char buffer[65536];
    const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ended = true;
      break;
    }
    pending.append(buffer, static_cast<std::size_t>(n));
    for (auto newline = pending.find('\n'); newline != std::string::npos;
         newline = pending.find('\n')) {
      take_line(pending.substr(0, newline), out, table);
      pending.erase(0, newline + 1);
    }
  }
  // Killing the child detaches whatever it still traced: the kernel does it at the tracer's
  // exit.
  if (!ended) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ended && out.problem.empty())
    out.problem = "the unwinder ran out of its " + std::to_string(budget.count()) +
                  " ms; frames found by then are kept";
  else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL && out.problem.empty())
    out.problem = std::string("the unwinder crashed (") + ::strsignal(WTERMSIG(status)) +
                  "); frames found by then are kept";
  return out;
}

}  // namespace kwd::stacks::linux_stacks
