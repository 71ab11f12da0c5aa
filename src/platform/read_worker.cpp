#include "kwd/platform/read_worker.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "kwd/platform/thread_name.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::platform {

struct ReadWorker::State {
  std::string name;
  mutable std::mutex mutex;
  std::condition_variable work;          // a job, or the end, for the thread
  mutable std::condition_variable done;  // a job finished, for wait_idle
  std::deque<std::function<void()>> jobs;
  bool thread_running = false;
  bool running_job = false;
  bool ending = false;  // the worker is gone: jobs not started are dropped
  std::uint64_t posted = 0, finished = 0;
  std::string reading;  // the file the running job reads now ("" between reads)
  std::int64_t reading_since_ms = 0;

  static void run(const std::shared_ptr<State>& self);
};

namespace {
// The worker whose thread this is; null on every other thread.
thread_local ReadWorker::State* this_threads_worker = nullptr;

// Every worker made, for settle().
std::mutex workers_mutex;
std::vector<std::weak_ptr<ReadWorker::State>> workers;  // (under workers_mutex)
}  // namespace

void ReadWorker::State::run(const std::shared_ptr<State>& self) {
  name_this_thread(self->name.c_str());
  this_threads_worker = self.get();
  std::unique_lock lock(self->mutex);
  while (true) {
    self->work.wait_for(lock, kIdleEnd, [&] { return self->ending || !self->jobs.empty(); });
    if (self->jobs.empty() || self->ending) {
      // Idle for kIdleEnd, or the worker is gone: the next post starts a thread again.
      self->jobs.clear();
      self->thread_running = false;
      self->done.notify_all();
      return;
    }
    auto job = std::move(self->jobs.front());
    self->jobs.pop_front();
    self->running_job = true;
    lock.unlock();
    try {
      job();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a job's failure is its own to report
    }
    job = nullptr;  // what it held goes now, not with the next job
    lock.lock();
    self->running_job = false;
    self->reading.clear();
    ++self->finished;
    self->done.notify_all();
  }
}

ReadWorker::ReadWorker(std::string name) : state_(std::make_shared<State>()) {
  state_->name = std::move(name);
  const std::lock_guard lock(workers_mutex);
  std::erase_if(workers, [](const auto& w) { return w.expired(); });
  workers.push_back(state_);
}

void ReadWorker::settle(std::chrono::milliseconds timeout) {
  std::vector<std::shared_ptr<State>> alive;
  {
    const std::lock_guard lock(workers_mutex);
    for (const auto& w : workers)
      if (auto state = w.lock()) alive.push_back(std::move(state));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& state : alive) {
    std::unique_lock lock(state->mutex);
    state->done.wait_until(lock, deadline,
                           [&] { return !state->running_job || !state->reading.empty(); });
  }
}

ReadWorker::~ReadWorker() {
  const std::lock_guard lock(state_->mutex);
  state_->ending = true;
  state_->work.notify_all();
}

void ReadWorker::post(std::function<void()> job) {
  {
    const std::lock_guard lock(state_->mutex);
    ++state_->posted;
    bool queued = false;
    try {
      state_->jobs.push_back(std::move(job));  // on failure `job` is left as it was
      queued = true;
      if (state_->thread_running) {
        state_->work.notify_one();
        return;
      }
      // Detached: a thread stuck in a read cannot be joined; it holds its state to its end.
      std::thread(State::run, state_).detach();
      state_->thread_running = true;
      return;
    } catch (...) {  // no thread, or no memory, to be had
      if (queued) {
        job = std::move(state_->jobs.back());
        state_->jobs.pop_back();
      }
    }
  }
  // The job runs here, as it would have without a worker.
  try {
    job();
  } catch (...) {  // NOLINT(bugprone-empty-catch)
  }
  const std::lock_guard lock(state_->mutex);
  ++state_->finished;
  state_->done.notify_all();
}

bool ReadWorker::wait_idle(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(state_->mutex);
  const auto target = state_->posted;
  return state_->done.wait_for(lock, timeout, [&] { return state_->finished >= target; });
}

bool ReadWorker::idle() const {
  const std::lock_guard lock(state_->mutex);
  return state_->finished == state_->posted;
}

std::optional<ReadWorker::Blocked> ReadWorker::blocked(
    std::chrono::milliseconds for_at_least) const {
  const std::lock_guard lock(state_->mutex);
  if (!state_->running_job || state_->reading.empty() ||
      util::steady_ms() - state_->reading_since_ms < for_at_least.count())
    return std::nullopt;
  return Blocked{state_->reading, state_->reading_since_ms};
}

ReadingFile::ReadingFile(const std::string& path) {
  auto* state = this_threads_worker;
  if (state == nullptr) return;
  const std::lock_guard lock(state->mutex);
  // The outermost read is the one named (a read that stats its directory first, say).
  if (!state->reading.empty()) return;
  state->reading = path;
  state->reading_since_ms = util::steady_ms();
  marked_ = true;
  state->done.notify_all();  // settle() waits for a job to end or to be in a read
}

ReadingFile::~ReadingFile() {
  if (!marked_) return;
  auto* state = this_threads_worker;
  const std::lock_guard lock(state->mutex);
  state->reading.clear();
}

}  // namespace kwd::platform
