#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace kwd::platform {

// Reads that can block without end, taken off the thread that must never wait. A file system
// that stops answering (a hard NFS mount whose server is gone, a FUSE daemon stopped or hung)
// holds a read until it answers, and nothing short of SIGKILL ends that wait. So what the
// event loop of `run` and of the daemon reads through a kernel's own files (its site-packages,
// its container's root, its connection file) runs on that kernel's ReadWorker, and the loop
// takes the answer when it is there: a stalled mount holds up one kernel's worker, never the
// loop and the other kernels on it.
//
// The workers share a pool of threads: a worker with jobs takes a free thread, runs its jobs
// in order and gives the thread back, and a thread is started only when none is free, which
// is when one is held by a blocked read or several workers have jobs at once. So a daemon
// watching hundreds of quiet kernels holds a thread or two, not one for each, and a kernel's
// life (four workers: two reads of its connection file, its fingerprint, its file's presence)
// starts no thread of its own. A job that never returns is left behind with its thread when the
// worker goes (the thread owns what the job holds), and both end if the read ever returns.
class ReadWorker {
 public:
  // `name` names the thread while it runs this worker's jobs (15 characters at most on Linux).
  explicit ReadWorker(std::string name);
  ~ReadWorker();
  ReadWorker(const ReadWorker&) = delete;
  ReadWorker& operator=(const ReadWorker&) = delete;

  // Runs `job` on the worker's thread after the jobs before it. Jobs must own what they use
  // (shared pointers, copies): one stuck in a read outlives the worker. A job's exception is
  // caught and dropped. Where no thread can be started (out of threads), the job runs here.
  void post(std::function<void()> job);
  // Waits up to `timeout` for every job posted so far to have run; true when they have.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  [[nodiscard]] bool idle() const;

  // The file the running job has been reading for at least `for_at_least`, and since when
  // (steady ms): a stalled file system, named.
  struct Blocked {
    std::string path;
    std::int64_t since_ms = 0;
  };
  [[nodiscard]] std::optional<Blocked> blocked(std::chrono::milliseconds for_at_least) const;

  // How long a pool thread waits for another job before it ends; it ends at once when no
  // ReadWorker is left, as a worker's own thread did. (A process that forks while threads of
  // its own live trips qemu-user 7.2: the aarch64 stage's unit tests hung when the forked
  // child of 'children born after the first scan' started a thread.)
  static constexpr std::chrono::milliseconds kIdleEnd{3000};
  // Threads the pool has started since the process began. An idle one is named
  // "kwd-read-pool"; a busy one takes the name of the worker whose jobs it runs.
  static std::uint64_t threads_started();

  // Before the process ends by returning from main (the daemon stopped): waits up to `timeout`
  // until no worker's job is queued or running other than in a marked read (ReadingFile). A job
  // left running would use what the process's exit destroys (function-local statics); one blocked
  // in a read of a stalled mount stays there, in the kernel, until the process is gone.
  static void settle(std::chrono::milliseconds timeout);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Marks, on the thread it runs on, the file being read until it goes out of scope: a
// ReadWorker names it when that read blocks. Every RootView operation marks its path. Costs
// nothing on a thread that is not a ReadWorker's.
class ReadingFile {
 public:
  explicit ReadingFile(const std::string& path);
  ~ReadingFile();
  ReadingFile(const ReadingFile&) = delete;
  ReadingFile& operator=(const ReadingFile&) = delete;

 private:
  bool marked_ = false;
};

}  // namespace kwd::platform
