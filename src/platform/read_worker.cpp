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
  mutable std::condition_variable done;  // a job finished, for wait_idle
  std::deque<std::function<void()>> jobs;
  // In the pool's queue or being run: a worker's jobs run on one thread at a time, in order.
  bool scheduled = false;
  bool running_job = false;
  bool ending = false;  // the worker is gone: jobs not started are dropped
  std::uint64_t posted = 0, finished = 0;
  std::string reading;  // the file the running job reads now ("" between reads)
  std::int64_t reading_since_ms = 0;
};

namespace {

using State = ReadWorker::State;

// The threads every worker's jobs run on. A thread takes a worker with jobs, runs them, and
// takes the next; a worker whose read is blocked holds its thread, and another one is started
// for the workers behind it, so that no worker waits on another's read. Threads idle for
// kIdleEnd end.
//
// Lock order: a worker's State::mutex, then the pool's.
struct Pool {
  std::mutex mutex;
  std::condition_variable work;
  std::deque<std::shared_ptr<State>> ready;  // workers with jobs and no thread (under mutex)
  // Threads not running a worker's jobs: waiting, or about to look at `ready` (under mutex).
  std::size_t free_threads = 0;
  std::uint64_t started = 0;  // (under mutex)
  // ReadWorkers alive: with none, idle threads end at once, as a worker's own thread did.
  std::size_t live_workers = 0;  // (under mutex)
};

// Held by every pool thread too, so that the pool outlives the process's static destructors
// for a thread still in a read then.
const std::shared_ptr<Pool>& the_pool() {
  static const auto pool = std::make_shared<Pool>();
  return pool;
}

constexpr const char* kIdleThreadName = "kwd-read-pool";

// The worker whose jobs this thread runs now; null on every other thread.
thread_local State* this_threads_worker = nullptr;

// Every worker made, for settle().
std::mutex workers_mutex;
std::vector<std::weak_ptr<State>> workers;  // (under workers_mutex)

// Runs the worker's jobs until it has none. On a pool thread (`pool` set), the thread is
// counted free again in the same step as the worker stops being scheduled: a post after it
// finds the thread, and starts no other.
void run_jobs(const std::shared_ptr<State>& state, Pool* pool) {
  auto* const previous = this_threads_worker;
  this_threads_worker = state.get();
  std::unique_lock lock(state->mutex);
  while (!state->ending && !state->jobs.empty()) {
    auto job = std::move(state->jobs.front());
    state->jobs.pop_front();
    state->running_job = true;
    lock.unlock();
    try {
      job();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a job's failure is its own to report
    }
    job = nullptr;  // what it held goes now, not with the next job
    lock.lock();
    state->running_job = false;
    state->reading.clear();
    ++state->finished;
    state->done.notify_all();
  }
  state->jobs.clear();  // the worker is gone, or there are none
  this_threads_worker = previous;
  std::unique_lock<std::mutex> pool_lock;
  if (pool != nullptr) {
    pool_lock = std::unique_lock(pool->mutex);
    ++pool->free_threads;
  }
  state->scheduled = false;
  state->done.notify_all();
}

void pool_thread(const std::shared_ptr<Pool>& pool) {
  name_this_thread(kIdleThreadName);
  std::unique_lock lock(pool->mutex);
  while (true) {
    pool->work.wait_for(lock, ReadWorker::kIdleEnd,
                        [&] { return !pool->ready.empty() || pool->live_workers == 0; });
    if (pool->ready.empty()) break;  // idle for kIdleEnd, or no worker left to serve
    auto state = std::move(pool->ready.front());
    pool->ready.pop_front();
    --pool->free_threads;
    lock.unlock();
    name_this_thread(state->name.c_str());  // what a thread stuck in a read reads for
    run_jobs(state, pool.get());
    name_this_thread(kIdleThreadName);
    state.reset();
    lock.lock();
  }
  --pool->free_threads;
}

// Queues a worker for a pool thread, and starts one when none is free for it. False when no
// thread could be had (out of threads or memory): the caller runs the jobs.
bool schedule(const std::shared_ptr<State>& state) {
  const auto& pool = the_pool();
  const std::lock_guard lock(pool->mutex);
  try {
    pool->ready.push_back(state);
  } catch (...) {
    return false;
  }
  if (pool->ready.size() <= pool->free_threads) {
    pool->work.notify_one();
    return true;
  }
  try {
    // Detached: a thread stuck in a read cannot be joined; it holds the pool and its worker.
    std::thread(pool_thread, pool).detach();
    ++pool->free_threads;
    ++pool->started;
    return true;
  } catch (...) {
    pool->ready.pop_back();
    return false;
  }
}

}  // namespace

ReadWorker::ReadWorker(std::string name) : state_(std::make_shared<State>()) {
  state_->name = std::move(name);
  {
    const auto& pool = the_pool();
    const std::lock_guard lock(pool->mutex);
    ++pool->live_workers;
  }
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
    // Queued or running (scheduled), and not in a marked read.
    state->done.wait_until(lock, deadline,
                           [&] { return !state->scheduled || !state->reading.empty(); });
  }
}

std::uint64_t ReadWorker::threads_started() {
  const auto& pool = the_pool();
  const std::lock_guard lock(pool->mutex);
  return pool->started;
}

ReadWorker::~ReadWorker() {
  const std::lock_guard lock(state_->mutex);
  state_->ending = true;
  const auto& pool = the_pool();
  const std::lock_guard pool_lock(pool->mutex);
  if (--pool->live_workers == 0) pool->work.notify_all();
}

void ReadWorker::post(std::function<void()> job) {
  bool queued = false;
  {
    const std::lock_guard lock(state_->mutex);
    ++state_->posted;
    try {
      state_->jobs.push_back(std::move(job));  // on failure `job` is left as it was
      queued = true;
    } catch (...) {  // NOLINT(bugprone-empty-catch): no memory; the job runs here, below
    }
    if (queued) {
      const bool on_a_thread = state_->scheduled || schedule(state_);
      state_->scheduled = true;  // on a pool thread, or on this one just below
      if (on_a_thread) return;
    }
  }
  if (queued) {
    // No thread to be had: the jobs run here, as they would have without a worker. (A copy:
    // a job may drop the last owner of this worker.)
    const auto state = state_;
    run_jobs(state, nullptr);
    return;
  }
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
