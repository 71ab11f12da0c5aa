#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kwd/fingerprint/package_metadata.hpp"
#include "kwd/platform/read_worker.hpp"
#include "kwd/platform/root_view.hpp"
#include "temp_dir.hpp"

using kwd::platform::ReadingFile;
using kwd::platform::ReadWorker;
using namespace std::chrono_literals;

namespace {

// A read that answers only when the test says so: what a stalled mount does to a thread.
struct HeldRead {
  std::mutex mutex;
  std::condition_variable cv;
  bool entered = false;
  bool released = false;
  void block(const std::string& path) {
    const ReadingFile reading(path);
    std::unique_lock lock(mutex);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return released; });
  }
  // False when the read has not started within 10 s (its worker never got a thread).
  [[nodiscard]] bool wait_entered() {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return entered; });
  }
  void release() {
    const std::lock_guard lock(mutex);
    released = true;
    cv.notify_all();
  }
};

}  // namespace

TEST_CASE("a read worker runs jobs in order, off the calling thread", "[read_worker]") {
  ReadWorker worker("kwd-test-read");
  auto order = std::make_shared<std::vector<int>>();
  const auto caller = std::this_thread::get_id();
  auto ran_on = std::make_shared<std::thread::id>(caller);
  for (int i = 0; i < 5; ++i)
    worker.post([order, i, ran_on] {
      order->push_back(i);
      *ran_on = std::this_thread::get_id();
    });
  REQUIRE(worker.wait_idle(10s));
  CHECK(worker.idle());
  CHECK(*order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(*ran_on != caller);
  // A job's exception is its own: the worker goes on.
  worker.post([] { throw std::runtime_error("a failed read"); });
  worker.post([order] { order->push_back(5); });
  REQUIRE(worker.wait_idle(10s));
  CHECK(order->back() == 5);
}

TEST_CASE("a blocked read holds up its own worker only, and is named", "[read_worker]") {
  auto held = std::make_shared<HeldRead>();
  ReadWorker stalled("kwd-test-stall");
  stalled.post([held] { held->block("/mnt/nfs/site-packages/torch/__init__.py"); });
  REQUIRE(held->wait_entered());
  // The loop's wait ends, and says the worker is not done.
  CHECK_FALSE(stalled.wait_idle(50ms));
  CHECK_FALSE(stalled.idle());
  const auto blocked = stalled.blocked(0ms);
  REQUIRE(blocked);
  CHECK(blocked->path == "/mnt/nfs/site-packages/torch/__init__.py");
  CHECK_FALSE(stalled.blocked(1h));  // not blocked that long yet

  // Another worker answers meanwhile.
  ReadWorker other("kwd-test-other");
  auto answered = std::make_shared<bool>(false);
  other.post([answered] { *answered = true; });
  REQUIRE(other.wait_idle(10s));
  CHECK(*answered);

  // The mount answers again: the worker takes the jobs queued behind the stalled one.
  auto after = std::make_shared<bool>(false);
  stalled.post([after] { *after = true; });
  held->release();
  REQUIRE(stalled.wait_idle(10s));
  CHECK(*after);
  CHECK_FALSE(stalled.blocked(0ms));
}

TEST_CASE("a worker gone while its read is blocked leaves the read to end on its own",
          "[read_worker]") {
  auto held = std::make_shared<HeldRead>();
  auto finished = std::make_shared<std::atomic<bool>>(false);
  {
    ReadWorker worker("kwd-test-gone");
    worker.post([held, finished] {
      held->block("/stalled/file");
      *finished = true;
    });
    REQUIRE(held->wait_entered());
    // A job queued behind it is dropped with the worker.
    worker.post([finished] { *finished = false; });
  }  // the owner goes; the thread is left in its read
  held->release();
  // The job that was running completes; nothing of the worker is touched after it.
  for (int i = 0; i < 1000 && held.use_count() > 1; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(held.use_count() == 1);  // the job, and what it held, are gone
  CHECK(finished->load());
}

TEST_CASE("workers share the pool's threads: reads one after another start no thread each",
          "[read_worker]") {
  // A kernel's life posts a few reads to a few workers of its own; a daemon sees thousands of
  // kernels. Each read on a thread of its own cost a thread's stack and malloc arena.
  // A daemon watching kernels always has workers; with none left, idle threads end at once.
  const ReadWorker watching("kwd-test-keep");
  const auto before = ReadWorker::threads_started();
  for (int i = 0; i < 200; ++i) {
    ReadWorker worker("kwd-test-turn");
    auto ran = std::make_shared<bool>(false);
    worker.post([ran] { *ran = true; });
    REQUIRE(worker.wait_idle(10s));
    REQUIRE(*ran);
  }
  // One thread serves them all (none where a free one was left by the tests before): a
  // thread is counted free again before its worker is seen idle.
  CHECK(ReadWorker::threads_started() - before <= 1);
}

TEST_CASE("workers with jobs at once each get a thread while one is blocked", "[read_worker]") {
  // Eight blocked reads at once: each holds a thread, and a ninth worker still answers.
  std::vector<std::shared_ptr<HeldRead>> held;
  std::vector<std::unique_ptr<ReadWorker>> stalled;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_shared<HeldRead>());
    stalled.push_back(std::make_unique<ReadWorker>("kwd-test-stall"));
    stalled.back()->post([h = held.back(), i] { h->block("/stalled/" + std::to_string(i)); });
  }
  for (auto& h : held)
    REQUIRE(h->wait_entered());
  ReadWorker other("kwd-test-other");
  auto answered = std::make_shared<bool>(false);
  other.post([answered] { *answered = true; });
  REQUIRE(other.wait_idle(10s));
  CHECK(*answered);
  for (std::size_t i = 0; i < held.size(); ++i) {
    const auto blocked = stalled[i]->blocked(0ms);
    REQUIRE(blocked);
    CHECK(blocked->path == "/stalled/" + std::to_string(i));
    held[i]->release();
  }
  for (auto& worker : stalled)
    REQUIRE(worker->wait_idle(10s));
}

TEST_CASE("ReadingFile marks nothing on a thread that is not a worker's", "[read_worker]") {
  const ReadingFile reading("/some/file");  // no worker: nothing to mark, nothing to crash
  ReadWorker worker("kwd-test-mark");
  CHECK_FALSE(worker.blocked(0ms));
}

// That no worker waits on another's read is shown with a mount that stops answering, in
// integration/test_stalled_mount.py; here, that answers given at once are each right.
TEST_CASE("the shared package index answers four workers at once, each its own question",
          "[read_worker][fingerprint]") {
  kwd::test::TempDir dir;
  const auto site = dir.path / "lib/python3.11/site-packages";
  for (int i = 0; i < 8; ++i) {
    const std::string name = "pkg" + std::to_string(i);
    kwd::test::write_file(site / name / "__init__.py", "");
    kwd::test::write_file(
        site / (name + "-1." + std::to_string(i) + ".dist-info") / "METADATA",
        "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1." + std::to_string(i) + "\n\n");
  }
  kwd::fingerprint::PackageIndex index;
  std::vector<std::unique_ptr<ReadWorker>> workers;
  auto found = std::make_shared<std::vector<std::string>>(8 * 4);
  for (int w = 0; w < 4; ++w) {
    workers.push_back(std::make_unique<ReadWorker>("kwd-test-index"));
    for (int i = 0; i < 8; ++i)
      workers.back()->post([&index, found, site, w, i] {
        const auto owner =
            index.owner_of((site / ("pkg" + std::to_string(i)) / "__init__.py").string());
        (*found)[static_cast<std::size_t>(w * 8 + i)] =
            owner ? owner->name + " " + owner->version : "none";
      });
  }
  for (auto& worker : workers)
    REQUIRE(worker->wait_idle(30s));
  for (int w = 0; w < 4; ++w)
    for (int i = 0; i < 8; ++i)
      CHECK((*found)[static_cast<std::size_t>(w * 8 + i)] ==
            "pkg" + std::to_string(i) + " 1." + std::to_string(i));
}
