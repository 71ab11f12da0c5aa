// What a stuck kernel waits on, from the stacks object of a report (hang.stacks, smoke's cell
// stacks), one case each, and the threads that must not be read as a case.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/stuck_reason.hpp"

using kwd::diagnosis::stuck_reason;
using nlohmann::json;

namespace {

json native(std::initializer_list<std::pair<const char*, const char*>> frames) {
  json out = json::array();
  for (const auto& [function, module] : frames)
    out.push_back({{"pc", "0x1"},
                   {"function", function},
                   {"module", module},
                   {"offset", 0},
                   {"file", nullptr},
                   {"line", nullptr}});
  return out;
}

json python(std::initializer_list<std::tuple<const char*, const char*, int>> frames,
            bool in_cell = false) {
  json out = json::array();
  for (const auto& [function, file, line] : frames)
    out.push_back({{"function", function}, {"file", file}, {"line", line}, {"in_cell", in_cell}});
  return out;
}

json thread(int tid, bool main, const char* state, json native_frames, json python_frames) {
  return {{"tid", tid},
          {"main", main},
          {"state", state},
          {"native", native_frames},
          {"python", python_frames},
          {"joined", json::array()}};
}

// An ipykernel's helper threads, idle as they always are: waiting on events and queues.
json idle_helpers() {
  return json::array({thread(11, false, "S (sleeping)",
                             native({{"__futex_abstimed_wait_common", "/lib/libc.so.6"},
                                     {"PyThread_acquire_lock_timed", "/usr/bin/python3.11"}}),
                             python({{"wait", "/usr/lib/python3.11/threading.py", 320},
                                     {"wait", "/usr/lib/python3.11/threading.py", 622}})),
                      thread(12, false, "S (sleeping)", native({{"epoll_wait", "/lib/libc.so.6"}}),
                             python({{"select", "/usr/lib/python3.11/selectors.py", 468}}))});
}

json stacks_with(json main_thread, json more = json::array()) {
  json threads = json::array({main_thread});
  for (auto& t : idle_helpers())
    threads.push_back(t);
  for (auto& t : more)
    threads.push_back(t);
  return {{"pid", 10}, {"threads", threads}};
}

}  // namespace

TEST_CASE("input() that no front end answers") {
  const auto why = stuck_reason(stacks_with(thread(
      10, true, "S (sleeping)", native({{"poll", "/lib/libc.so.6"}}),
      python({{"_input_request", "/usr/lib/python3/dist-packages/ipykernel/kernelbase.py", 1193},
              {"raw_input", "/usr/lib/python3/dist-packages/ipykernel/kernelbase.py", 1150},
              {"<module>", "/tmp/ipykernel_10/1.py", 1}}))));
  REQUIRE(why);
  CHECK(why->id == "input");
  CHECK(why->pointer == "/threads/0");
  CHECK(why->text.starts_with("waiting for input(): "));
}

TEST_CASE("two threads each waiting for a lock the other holds") {
  const auto lock_wait = native({{"__futex_abstimed_wait_common", "/lib/libc.so.6"},
                                 {"PyThread_acquire_lock_timed", "/usr/bin/python3.11"},
                                 {"lock_PyThread_acquire_lock", "/usr/bin/python3.11"}});
  const auto why = stuck_reason(stacks_with(
      thread(10, true, "S (sleeping)", lock_wait,
             python({{"take_a_then_b", "/tmp/ipykernel_10/2.py", 9}}, true)),
      json::array({thread(13, false, "S (sleeping)", lock_wait,
                          python({{"take_b_then_a", "/tmp/ipykernel_10/2.py", 4}}, true))})));
  REQUIRE(why);
  CHECK(why->id == "lock_deadlock");
  CHECK_THAT(why->text, Catch::StartsWith("in a deadlock: 2 threads") &&
                            Catch::Contains("thread 10 in take_a_then_b() at 2.py:9") &&
                            Catch::Contains("thread 13 in take_b_then_a() at 2.py:4"));
  // One thread on a lock it took itself.
  const auto alone =
      stuck_reason(stacks_with(thread(10, true, "S (sleeping)", lock_wait,
                                      python({{"twice", "/tmp/ipykernel_10/3.py", 2}}, true))));
  REQUIRE(alone);
  CHECK(alone->id == "lock_wait");
  // IPython's history thread caught writing the cell's input (seen under CI's load, IPython
  // 9): a lock wait of the kernel's machinery, not a second party to a deadlock.
  const auto with_history = stuck_reason(stacks_with(
      thread(10, true, "S (sleeping)", lock_wait,
             python({{"twice", "/tmp/ipykernel_10/3.py", 2}}, true)),
      json::array({thread(
          13, false, "S (sleeping)", lock_wait,
          python({{"_writeout_input_cache",
                   "/venv/lib/python3.11/site-packages/IPython/core/history.py", 1174},
                  {"writeout_cache", "/venv/lib/python3.11/site-packages/IPython/core/history.py",
                   1197}}))})));
  REQUIRE(with_history);
  CHECK(with_history->id == "lock_wait");
  CHECK_THAT(with_history->text, Catch::Contains("thread 10 in twice() at 3.py:2") &&
                                     !Catch::Contains("_writeout_input_cache"));
}

TEST_CASE("idle helper threads and a main thread blocked in C are no deadlock") {
  // The stuck-in-read case: main blocked in read(2), helpers on Events (threading.py) and epoll.
  const auto why = stuck_reason(stacks_with(
      thread(10, true, "S (sleeping)",
             native({{"read", "/lib/libc.so.6"}, {"kwd_stuck_in_c", "/tmp/libkwdstuck.so"}}),
             python({{"<module>", "/tmp/ipykernel_10/1.py", 3}}, true))));
  CHECK_FALSE(why);
  // A lock wait while another thread runs: it may yet let go.
  const auto lock_wait = native({{"PyThread_acquire_lock_timed", "/usr/bin/python3.11"}});
  const auto running = stuck_reason(stacks_with(
      thread(10, true, "S (sleeping)", lock_wait,
             python({{"f", "/tmp/ipykernel_10/1.py", 3}}, true)),
      json::array({thread(14, false, "R (running)", native({{"compute", "/tmp/libx.so"}}),
                          python({{"g", "/tmp/ipykernel_10/1.py", 7}}, true))})));
  CHECK_FALSE(running);
  CHECK_FALSE(stuck_reason(json::object()));
  CHECK_FALSE(stuck_reason(json{{"threads", json::array({1, "x", nullptr})}}));
}

TEST_CASE("the DataLoader's workers, a collective, the GPU, OpenMP, the cell's own loop") {
  const auto loader = stuck_reason(stacks_with(thread(
      10, true, "S (sleeping)", native({{"poll", "/lib/libc.so.6"}}),
      python({{"_try_get_data", "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py",
               1133}}))));
  REQUIRE(loader);
  CHECK(loader->id == "dataloader");
  CHECK_THAT(loader->text, Catch::Contains("one stopped, deadlocked or died"));

  // With its workers captured: the one that is not waiting for work is named, with where it is;
  // a stopped one wins over a busy one.
  json waiting = stacks_with(thread(
      10, true, "S (sleeping)", native({{"poll", "/lib/libc.so.6"}}),
      python({{"_try_get_data", "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py",
               1133}})));
  waiting["command"] = "python3 -m ipykernel_launcher -f k.json";
  const auto worker = [](int pid, const char* state, json python_frames) {
    return json{{"pid", pid},
                {"command", "python3 -m ipykernel_launcher -f k.json"},
                {"process_state", state},
                {"threads", json::array({thread(pid, true, state, json::array(), python_frames)})}};
  };
  const json idle_worker = worker(
      21, "S (sleeping)",
      python({{"select", "/usr/lib/python3.11/selectors.py", 415},
              {"get", "/usr/lib/python3.11/multiprocessing/queues.py", 113},
              {"_worker_loop",
               "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", 308}}));
  const json busy_worker = worker(22, "S (sleeping)", python({{"__getitem__", "/tmp/cell.py", 8}}));
  waiting["children"] = json::array({idle_worker, busy_worker});
  const auto named = stuck_reason(waiting);
  REQUIRE(named);
  CHECK(named->text ==
        "waiting for the DataLoader's worker processes: worker pid 22 is in __getitem__() at "
        "cell.py:8");
  waiting["children"].push_back(worker(23, "T (stopped)", json::array()));
  CHECK(stuck_reason(waiting).value().text ==
        "waiting for the DataLoader's worker processes: worker pid 23 is stopped (T (stopped))");
  waiting["children"] = json::array({idle_worker});
  CHECK_THAT(stuck_reason(waiting).value().text,
             Catch::Contains("one stopped, deadlocked or died"));
  // A child that is no worker (a subprocess with a command of its own) is never the one named.
  json other = worker(24, "T (stopped)", python({{"main", "/tmp/tool.py", 3}}));
  other["command"] = "python3 /tmp/tool.py";
  waiting["children"].push_back(other);
  CHECK_THAT(stuck_reason(waiting).value().text,
             Catch::Contains("one stopped, deadlocked or died"));

  const auto nccl = stuck_reason(stacks_with(
      thread(10, true, "S (sleeping)",
             native({{"sched_yield", "/lib/libc.so.6"},
                     {"ncclCommWaitStream",
                      "/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"}}),
             json::array())));
  REQUIRE(nccl);
  CHECK(nccl->id == "collective");
  CHECK_THAT(nccl->text, Catch::Contains("ncclCommWaitStream"));

  const auto gpu = stuck_reason(stacks_with(
      thread(10, true, "S (sleeping)",
             native({{"ioctl", "/lib/libc.so.6"},
                     {"cuStreamSynchronize", "/usr/lib/libcuda.so.1"},
                     {"cudaStreamSynchronize", "/venv/nvidia/cuda_runtime/lib/libcudart.so.12"}}),
             json::array())));
  REQUIRE(gpu);
  CHECK(gpu->id == "gpu_sync");
  CHECK_THAT(gpu->text, Catch::StartsWith("waiting for the GPU: cuStreamSynchronize"));

  const auto spin = stuck_reason(stacks_with(
      thread(10, true, "S (sleeping)", native({{"futex_wait", "/lib/libc.so.6"}}), json::array()),
      json::array({thread(
          15, false, "R (running)",
          native({{"", "/venv/lib/python3.11/site-packages/numpy.libs/libgomp-a34b3233.so.1.0.0"}}),
          json::array())})));
  REQUIRE(spin);
  CHECK(spin->id == "openmp_spin");

  const auto loop = stuck_reason(stacks_with(
      thread(10, true, "R (running)", native({{"_PyEval_EvalFrameDefault", "/usr/bin/python3.11"}}),
             python({{"<module>", "/tmp/ipykernel_10/4.py", 2}}, true))));
  REQUIRE(loop);
  CHECK(loop->id == "busy_loop");
  CHECK_THAT(loop->text, Catch::Contains("<module>() at 4.py:2"));
}

TEST_CASE("a kernel stuck in torch.cuda.synchronize() on an H200 waits for the GPU") {
  // `kernel-watchdog stacks --json` of a real ipykernel (tests/gpu/stacks_check.py,
  // 2026-11-30): a two-minute GPU kernel queued, then torch.cuda.synchronize(). The driver's
  // own frames, unnamed, sit under cuCtxSynchronize_v2.
  std::ifstream in(std::filesystem::path(KWD_SOURCE_DIR) /
                   "tests/fixtures/stacks/torch_cuda_synchronize_h200.json");
  const auto why = stuck_reason(json::parse(in));
  REQUIRE(why);
  CHECK(why->id == "gpu_sync");
  CHECK(why->text ==
        "waiting for the GPU: cuCtxSynchronize_v2, the work queued on the device has not "
        "finished");
}
