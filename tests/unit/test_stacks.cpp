#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/stacks/pure.hpp"
#include "kwd/stacks/stacks_json.hpp"

using namespace kwd::stacks;

namespace {

// Printed by CPython 3.11's faulthandler.register(SIGRTMIN+10, all_threads=True) for a
// two-thread lock deadlock, on the signal.
const char* kAllThreads = R"(Thread 0x00007fb8566286c0 (most recent call first):
  File "/tmp/dumpdemo.py", line 9 in worker
  File "/usr/lib/python3.11/threading.py", line 982 in run
  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007fb857466b80 (most recent call first):
  File "/tmp/ipykernel_41/2391203.py", line 15 in <module>
)";

NativeFrame frame(const char* function, const char* module) {
  NativeFrame f;
  f.pc = 0x7f0000001000;
  f.function = function;
  f.module = module;
  return f;
}

}  // namespace

TEST_CASE("C++ names are demangled, C names and junk are left alone") {
  CHECK(demangle("_ZN5mylib6detail5crashEi") == "mylib::detail::crash(int)");
  CHECK(demangle("_ZNSt6vectorIiSaIiEE9push_backERKi") ==
        "std::vector<int, std::allocator<int> >::push_back(int const&)");
  CHECK(demangle("pause") == "pause");
  CHECK(demangle("f") == "f");  // __cxa_demangle would read a type name here
  CHECK(demangle("_Znot-a-name") == "_Znot-a-name");
  CHECK(demangle("") == "");
}

TEST_CASE("a thread's system call is named from /proc/PID/task/TID/syscall") {
#if defined(__x86_64__)
  CHECK(blocked_syscall("202 0x7f12 0x80 0x0 0x0 0x0 0x0 0x7ffd 0x7f34\n") == "futex");
  CHECK(blocked_syscall("34 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f34\n") == "pause");
  CHECK(blocked_syscall("9999 0x0\n") == "syscall 9999");
#endif
  CHECK(blocked_syscall("running\n").empty());
  CHECK(blocked_syscall("-1 0x7ffd 0x7f34\n").empty());
  CHECK(blocked_syscall("").empty());
}

TEST_CASE("TracerPid and SigCgt are read from /proc/PID/status") {
  const char* status =
      "Name:\tpython3\nState:\tS (sleeping)\nTracerPid:\t4242\nSigCgt:\t0000080100000000\n";
  CHECK(tracer_pid(status) == 4242);
  CHECK(tracer_pid("Name:\tx\nTracerPid:\t0\n") == 0);
  CHECK_FALSE(tracer_pid("Name:\tx\n").has_value());
  CHECK(catches_signal(status, 44));  // SIGRTMIN+10 with glibc's SIGRTMIN of 34
  CHECK(catches_signal(status, 33));
  CHECK_FALSE(catches_signal(status, 45));
  CHECK_FALSE(catches_signal(status, 2));
  CHECK_FALSE(catches_signal("SigCgt:\tzz\n", 44));
  CHECK_FALSE(catches_signal(status, 0));
  const char* thread = "SigPnd:\t0000000000000000\nSigBlk:\t0000080000000000\n";
  CHECK(signal_in_mask(thread, "SigBlk", 44));
  CHECK_FALSE(signal_in_mask(thread, "SigPnd", 44));
  CHECK_FALSE(signal_in_mask(thread, "ShdPnd", 44));  // absent
}

TEST_CASE("a stack pointer finds the top of its mapping") {
  const char* maps =
      "55d0c0000000-55d0c0021000 r--p 00000000 08:01 1 /usr/bin/python3.11\n"
      "7fb855e28000-7fb856628000 rw-p 00000000 00:00 0 \n"
      "7ffd1c3a0000-7ffd1c3c1000 rw-p 00000000 00:00 0                          [stack]\n";
  CHECK(mapping_end(maps, 0x7fb8566275f0) == 0x7fb856628000ULL);
  CHECK(mapping_end(maps, 0x7ffd1c3a0000) == 0x7ffd1c3c1000ULL);
  CHECK_FALSE(mapping_end(maps, 0x7ffd1c3c1000).has_value());  // the end is outside
  CHECK_FALSE(mapping_end("garbage\n", 0x10).has_value());
}

TEST_CASE("faulthandler's all-threads dump is parsed and joined by thread pointer") {
  const auto threads = parse_python_threads(kAllThreads);
  REQUIRE(threads.size() == 2);
  CHECK(threads[0].ident == 0x7fb8566286c0ULL);
  CHECK_FALSE(threads[0].current);
  REQUIRE(threads[0].frames.size() == 4);
  CHECK(threads[0].frames[0].function == "worker");
  CHECK(threads[0].frames[0].line == 9);
  CHECK(threads[1].current);
  CHECK(threads[1].frames.at(0).function == "<module>");

  ProcessStacks stacks;
  stacks.pid = 100;
  stacks.found = true;
  ThreadStacks main_thread;
  main_thread.tid = 100;
  main_thread.thread_pointer = 0x7fb857466b80ULL;
  ThreadStacks other;
  other.tid = 101;
  other.thread_pointer = 0x1234;  // matches no block
  stacks.threads = {main_thread, other};
  join_python(stacks, threads);
  CHECK(stacks.threads[0].python_ident == 0x7fb857466b80ULL);
  CHECK(stacks.threads[0].python_current);
  CHECK(stacks.threads[0].python.size() == 1);
  CHECK(stacks.threads[1].python.empty());
  REQUIRE(stacks.python_unjoined.size() == 1);
  CHECK(stacks.python_unjoined[0].ident == 0x7fb8566286c0ULL);
}

TEST_CASE("the joined view puts Python frames where the interpreter's loop begins") {
  ThreadStacks t;
  t.tid = 7;
  t.native = {frame("pause", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
              frame("stuck_forever", "/tmp/libstuck.so"),
              frame("_ctypes_callproc", "/usr/lib/python3.11/lib-dynload/_ctypes.so"),
              frame("_PyEval_EvalFrameDefault", "/usr/bin/python3.11"),
              frame("main", "/usr/bin/python3.11")};
  t.native[1].file = "stuck.c";
  t.native[1].line = 5;
  t.python = {{"/tmp/ipykernel_1/1.py", 3, "<module>"}};
  const auto view = joined_view(t);
  REQUIRE(view.size() == 4);
  CHECK(view[0].text == "pause (libc.so.6)");
  CHECK(view[1].text == "stuck_forever (libstuck.so) at stuck.c:5");
  CHECK_FALSE(view[2].python);
  CHECK(view[3].python);
  CHECK(view[3].text == "<module> (/tmp/ipykernel_1/1.py:3)");

  // Without Python frames, the whole native stack; an unnamed frame by module and offset.
  t.python.clear();
  t.native[0].function.clear();
  t.native[0].offset = 0x1f;
  const auto native_only = joined_view(t);
  CHECK(native_only.size() == 5);
  CHECK(native_only[0].text == "0x7f0000001000 (libc.so.6+0x1f)");
  CHECK(joined_view(t, 2).size() == 3);  // two, then "..."
}

TEST_CASE("the text and JSON say what is missing and why") {
  ProcessStacks s;
  s.pid = 100;
  s.found = true;
  s.command = "python3 -m ipykernel_launcher";
  s.threads_total = 1;
  s.native_missing = "cannot load libdw.so.1";
  s.python_missing = "the kernel was not started by `kernel-watchdog run`";
  ThreadStacks t;
  t.tid = 100;
  t.name = "python3";
  t.state = "S (sleeping)";
  t.syscall = "futex";
  t.wchan = "futex_wait_queue";
  s.threads = {t};
  const auto text = render_text(s);
  CHECK_THAT(text, Catch::Contains("Process 100: python3 -m ipykernel_launcher"));
  CHECK_THAT(text, Catch::Contains("Native frames not available: cannot load libdw.so.1"));
  CHECK_THAT(text, Catch::Contains("Python frames not available: the kernel was not started"));
  CHECK_THAT(text, Catch::Contains("Thread 100 \"python3\" (main): S (sleeping), in futex (kernel: "
                                   "futex_wait_queue)"));
  const auto doc = to_json(s);
  CHECK(doc["native_missing"] == "cannot load libdw.so.1");
  CHECK(doc["frozen_us"].is_null());
  CHECK(doc["threads"][0]["main"] == true);
  CHECK(doc["threads"][0]["syscall"] == "futex");

  ProcessStacks gone;
  gone.pid = 5;
  CHECK(render_text(gone) == "No process 5.\n");
}

TEST_CASE("native frames cross the unwinder's pipe unchanged") {
  NativeFrame f = frame("mylib::crash(int)", "/tmp/libcrash.so");
  f.offset = 0x2a;
  f.file = "crash.cpp";
  f.line = 12;
  NativeFrame bare;
  bare.pc = 0x1000;
  const auto back = frames_from_json(frames_to_json({f, bare}));
  REQUIRE(back.size() == 2);
  CHECK(back[0].pc == f.pc);
  CHECK(back[0].function == f.function);
  CHECK(back[0].module == f.module);
  CHECK(back[0].offset == 0x2a);
  CHECK(back[0].file == "crash.cpp");
  CHECK(back[0].line == 12);
  CHECK(back[1].function.empty());
  CHECK(back[1].pc == 0x1000);
  CHECK(frames_from_json(nlohmann::json("junk")).empty());
}

#if defined(__linux__)
#include "kwd/data/embedded_files.hpp"
#include "kwd/stacks/linux/python_dump.hpp"

TEST_CASE("the shim registers the dump on the signal and file the watchdog asks through") {
  const std::string shim(kwd::data::sitecustomize_py());
  CHECK_THAT(
      shim, Catch::Contains("signal.SIGRTMIN + " + std::to_string(kPythonDumpSignalOffset) + "\n"));
  CHECK_THAT(shim, Catch::Contains(std::string("os.memfd_create(\"") +
                                   kwd::stacks::linux_stacks::kPythonDumpMemfd + "\""));
  CHECK_THAT(shim, Catch::Contains("all_threads=True, chain=False"));
}
#endif

TEST_CASE("the main thread's summary names the caller of libc and the Python frame") {
  ProcessStacks s;
  s.pid = 7;
  ThreadStacks t;
  t.tid = 7;
  t.state = "S (sleeping)";
  t.syscall = "read";
  t.native = {frame("read", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
              frame("kwd_stuck_in_c", "/tmp/libkwdstuck.so"),
              frame("_PyEval_EvalFrameDefault", "/usr/bin/python3.11")};
  t.python = {{"/tmp/ipykernel_1/2.py", 4, "kwd_waits_for_c"}};
  s.threads = {t};
  CHECK(main_thread_summary(s) ==
        "in read, at kwd_stuck_in_c (libkwdstuck.so), from kwd_waits_for_c "
        "(/tmp/ipykernel_1/2.py:4)");
  // Only libc and the interpreter: libc's frame is what there is.
  s.threads[0].native.erase(s.threads[0].native.begin() + 1);
  s.threads[0].python.clear();
  CHECK(main_thread_summary(s) == "in read, at read (libc.so.6)");
  s.threads[0].tid = 8;
  CHECK(main_thread_summary(s).empty());
}

TEST_CASE("a command line in a report: credentials and secret options redacted") {
  CHECK(redact_command("python3 -m ipykernel_launcher -f /run/kernel-1.json") ==
        "python3 -m ipykernel_launcher -f /run/kernel-1.json");
  CHECK(redact_command("psql postgres://ann:hunter2@db:5432/x --quiet") ==
        "psql postgres://<redacted>@db:5432/x --quiet");
  CHECK(redact_command("fetch https://host/a@b") == "fetch https://host/a@b");
  CHECK(redact_command("tool --token=abc --Password=x API_KEY=y --level=3") ==
        "tool --token=<redacted> --Password=<redacted> API_KEY=<redacted> --level=3");
  CHECK(redact_command("") == "");
  CHECK(redact_command("a  b") == "a  b");
}
