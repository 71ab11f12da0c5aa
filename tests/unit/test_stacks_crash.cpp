// The crash handler's handshake (kernel-watchdog-crash.so): its message read strictly, the
// handler's frames cut at the faulting instruction, and the diagnosis naming the native culprit.
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>

#include "diagnosis_fixtures.hpp"
#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/stacks/crash.hpp"
#include "kwd/stacks/stacks_json.hpp"

using namespace kwd::stacks;
using nlohmann::json;

namespace {

NativeFrame frame(std::uint64_t pc, const char* function, const char* module, const char* file = "",
                  int line = 0) {
  NativeFrame f;
  f.pc = pc;
  f.function = function;
  f.module = module;
  f.file = file;
  f.line = line;
  return f;
}

// The diagnosis of `report` with `crash` as its crash_stack.
json diagnosis_with(json report, const CrashStack& crash) {
  report["crash_stack"] = to_json(crash);
  return kwd::diagnosis::rediagnose(report)["diagnosis"];
}

// The recorded segfault's report as if the kernel had died of SIGILL.
json recorded_sigill() {
  json report = kwd::test::recorded_segfault_report();
  report["termination"]["signal"] = SIGILL;
  report["termination"]["signal_name"] = "SIGILL";
  return report;
}

}  // namespace

TEST_CASE("the crash handler's message is read field by field") {
  const auto f = parse_fatal_signal(
      "kwd-crash 1 pid=4242 tid=4250 sig=11 code=1 addr=0x0 pc=0x7f12deadbeef\n");
  REQUIRE(f);
  CHECK(f->pid == 4242);
  CHECK(f->tid == 4250);
  CHECK(f->signal == SIGSEGV);
  CHECK(f->code == 1);
  CHECK(f->address == 0);
  CHECK(f->pc == 0x7f12deadbeefULL);
  // abort(): a sent signal, si_code SI_TKILL (-6).
  const auto a = parse_fatal_signal("kwd-crash 1 pid=7 tid=7 sig=6 code=-6 addr=0x1c8 pc=0x1\n");
  REQUIRE(a);
  CHECK(a->code == -6);
}

TEST_CASE("anything else on the crash socket is not a crash") {
  // The kernel's own code can write to the socket: a forged or damaged message is ignored.
  for (const char* forged : {
           "",
           "kwd-crash 2 pid=1 tid=1 sig=11 code=1 addr=0x0 pc=0x0\n",      // another version
           "kwd-crash 1 tid=1 pid=1 sig=11 code=1 addr=0x0 pc=0x0\n",      // fields out of order
           "kwd-crash 1 pid=1 tid=1 sig=11 code=1 addr=0 pc=0x0\n",        // not hexadecimal
           "kwd-crash 1 pid=1 tid=1 sig=11 code=1 addr=0x0\n",             // pc missing
           "kwd-crash 1 pid=1 tid=1 sig=11 code=1 addr=0x0 pc=0x0 x=1\n",  // more than it says
           "kwd-crash 1 pid=0 tid=1 sig=11 code=1 addr=0x0 pc=0x0\n",      // no such process
           "kwd-crash 1 pid=1 tid=1 sig=99 code=1 addr=0x0 pc=0x0\n",      // no such signal
           "kwd-crash 1 pid=1 tid=-3 sig=11 code=1 addr=0x0 pc=0x0\n",
           "kwd-crash 1 pid=99999999999999999999 tid=1 sig=11 code=1 addr=0x0 pc=0x0\n",
           "kwd-crash 1 pid=1 tid=1 sig=11 code=1 addr=0x0 pc=0xfffffffffffffffff\n",
       })
    CHECK_FALSE(parse_fatal_signal(forged));
}

TEST_CASE("the handler's frames are cut at the faulting instruction") {
  std::vector<NativeFrame> frames{frame(0x1000, "poll", "/lib/libc.so.6"),
                                  frame(0x2000, "report_and_wait", "/x/kernel-watchdog-crash.so"),
                                  frame(0x3000, "__restore_rt", "/lib/libc.so.6"),
                                  frame(0x4000, "crashy::poke(int volatile*)", "/t/libcrashy.so"),
                                  frame(0x5000, "crashy_segfault", "/t/libcrashy.so")};
  auto kept = frames;
  CHECK(cut_at_fault(kept, 0x4000));
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].function == "crashy::poke(int volatile*)");
  kept = frames;
  CHECK_FALSE(cut_at_fault(kept, 0x4001));  // not a frame's pc: nothing is dropped
  CHECK(kept.size() == frames.size());
  CHECK_FALSE(cut_at_fault(kept, 0));
  CHECK(is_crash_signal(SIGSEGV));
  CHECK(is_crash_signal(SIGABRT));
  CHECK_FALSE(is_crash_signal(SIGKILL));
}

TEST_CASE("a crash stack in the report's JSON") {
  CrashStack c;
  c.fault = {100, 101, SIGSEGV, 1, 0x10, 0x4000};
  c.frames = {frame(0x4000, "crashy::poke(int volatile*)", "/t/libcrashy.so", "/t/crashy.cpp", 5)};
  c.frozen_us = 250;
  c.capture_ms = 12;
  const json j = to_json(c);
  CHECK(j["tid"] == 101);
  CHECK(j["fault_address"] == "0x10");
  CHECK(j["pc"] == "0x4000");
  CHECK(j["frames"][0]["line"] == 5);
  CHECK(j["missing"].is_null());
  CrashStack none;
  none.fault.signal = SIGSEGV;
  none.missing = "kernel-watchdog-crash.so is not beside the program";
  const json n = to_json(none);
  CHECK(n["tid"].is_null());
  CHECK(n["frames"].empty());
  CHECK(n["missing"] == none.missing);
}

TEST_CASE("the diagnosis names the first native frame outside the runtimes and the interpreter") {
  json report = kwd::test::recorded_segfault_report();
  CrashStack c;
  c.fault = {1, 1, SIGSEGV, 1, 0, 0x4000};
  c.frames = {frame(0x4000, "__memmove_avx_unaligned_erms", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
              frame(0x4100, "crashy::poke(int volatile*)", "/t/libcrashy.so", "/src/crashy.cpp", 5),
              frame(0x5000, "_PyEval_EvalFrameDefault", "/usr/bin/python3.11")};
  const json d = diagnosis_with(report, c);
  CHECK(d["cause"] == "native_crash");
  const std::string headline = d["headline"];
  CHECK_THAT(headline, Catch::Contains("SIGSEGV (segmentation fault) in crashy::poke(int "
                                       "volatile*) in libcrashy.so, called from "));
  bool named = false;
  for (const auto& e : d["evidence"])
    named = named || (e["pointer"] == "/crash_stack/frames/1" &&
                      e["fact"].get<std::string>().find("crashy.cpp:5") != std::string::npos);
  CHECK(named);

  // Every frame in the runtimes: nothing is blamed, the top frame is told as it is.
  c.frames = {frame(0x4000, "__memmove_avx_unaligned_erms", "/usr/lib/x86_64-linux-gnu/libc.so.6")};
  const json runtime_only = diagnosis_with(report, c);
  CHECK_THAT(runtime_only["headline"].get<std::string>(),
             !Catch::Contains("libc.so.6") && !Catch::Contains("__memmove"));
}

TEST_CASE("a stripped library's unnamed frame is named by the nearest exported one above it") {
  json report = kwd::test::recorded_segfault_report();
  CrashStack c;
  c.fault = {1, 1, SIGSEGV, 1, 0, 0x4000};
  const char* torch = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13";
  c.frames = {frame(0x4000, "", torch), frame(0x4100, "", torch),
              frame(0x4200, "at::TensorIteratorBase::serial_for_each(at::Range) const", torch),
              frame(0x5000, "_PyEval_EvalFrameDefault", "/usr/bin/python3.11")};
  CHECK_THAT(diagnosis_with(report, c)["headline"].get<std::string>(),
             Catch::Contains("in libtorch_cpu.so.1.13 (under "
                             "at::TensorIteratorBase::serial_for_each(at::Range) const)"));
  // Only the same library's frames: a name in the caller's library is not the culprit's.
  c.frames = {frame(0x4000, "", torch), frame(0x4100, "PyObject_Call", "/usr/bin/python3.11")};
  const std::string alone = diagnosis_with(report, c)["headline"];
  CHECK_THAT(alone, Catch::Contains("in libtorch_cpu.so.1.13") && !Catch::Contains("(under"));
}

TEST_CASE("a CHECK's logging frames are passed over for the code whose check failed") {
  json report = kwd::test::recorded_segfault_report();
  CrashStack c;
  c.fault = {1, 1, SIGABRT, -6, 0, 0x4000};
  const char* tf = "/venv/tensorflow/libtensorflow_framework.so.2";
  c.frames = {
      frame(0x4000, "abort", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      frame(0x4100, "absl::lts_20250814::log_internal::LogMessage::FailWithoutStackTrace()", tf),
      frame(0x4200, "absl::lts_20250814::log_internal::LogMessage::Flush()", tf),
      frame(0x4300, "tensorflow::TensorShapeBase<tensorflow::TensorShape>::dim_size(int) const",
            tf),
      frame(0x5000, "_PyEval_EvalFrameDefault", "/usr/bin/python3.11")};
  const std::string headline = diagnosis_with(report, c)["headline"];
  CHECK_THAT(headline, Catch::Contains("tensorflow::TensorShapeBase<tensorflow::TensorShape>::"
                                       "dim_size(int) const in libtensorflow_framework.so.2"));
  CHECK_THAT(headline, !Catch::Contains("LogMessage"));
}

TEST_CASE("no native frames: the reason is in the diagnosis's missing") {
  json report = kwd::test::recorded_segfault_report();
  CrashStack c;
  c.fault.signal = SIGSEGV;
  c.missing = "cannot load libdw.so.1 (install elfutils' libdw1)";
  const json d = diagnosis_with(report, c);
  bool said = false;
  for (const auto& m : d["missing"])
    said = said || m == "crash_stack: " + c.missing;
  CHECK(said);
}

TEST_CASE("SIGILL is blamed on a CPU only when the faulting library is an installed package's") {
  json report = recorded_sigill();
  // ipykernel's frames are on every kernel's Python stack: without native frames the rule
  // takes the innermost installed package there (IPython, here) for the culprit.
  CrashStack c;
  c.fault = {1, 1, SIGILL, 2, 0x4000, 0x4000};
  c.frames = {frame(0x4000, "crashy::trap()", "/tmp/t/libcrashy.so"),
              frame(0x5000, "ffi_call_unix64", "/usr/lib/x86_64-linux-gnu/libffi.so.8")};
  const json trap = diagnosis_with(report, c);
  CHECK(trap["cause"] == "native_crash");
  CHECK_THAT(trap["headline"].get<std::string>(),
             Catch::Contains("crashy::trap() in libcrashy.so"));

  c.frames = {frame(0x4000, "at::native::cpu_kernel_avx512",
                    "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so")};
  const json avx = diagnosis_with(report, c);
  CHECK(avx["cause"] == "cpu_unsupported");
  CHECK(avx["confidence"] == "medium");
  bool named = false;
  for (const auto& e : avx["evidence"])
    named = named || (e["pointer"] == "/crash_stack/frames/0" &&
                      e["fact"].get<std::string>().find("torch's library") != std::string::npos);
  CHECK(named);
}

TEST_CASE("a stack that does not start at the faulting instruction blames nobody") {
  // Under qemu-user the thread the watchdog reads is the emulator's: its frames are qemu's own,
  // none at the guest's faulting pc, and the cut finds nothing to cut at.
  json report = recorded_sigill();
  CrashStack c;
  c.fault = {1, 1, SIGILL, 2, 0x7f0000004000, 0x7f0000004000};
  c.frames = {frame(0x55000001000, "cpu_exec", "/usr/bin/qemu-x86_64"),
              frame(0x55000002000, "cpu_loop", "/usr/bin/qemu-x86_64")};
  c.missing = "no frame at the faulting instruction: the handler's own frames are shown too";
  const json d = diagnosis_with(report, c);
  // The Python stack decides, as without native frames (IPython's frames here).
  CHECK(d["cause"] == "cpu_unsupported");
  CHECK_THAT(d["headline"].get<std::string>(), !Catch::Contains("qemu"));
}
