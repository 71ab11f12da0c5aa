#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/python_traceback.hpp"

using namespace kwd::diagnosis;
using nlohmann::json;

namespace {

// Printed by CPython 3.11's faulthandler in a real ipykernel (Debian 12), shortened.
const char* kDump = R"(0.00s - Debugger warning: It seems that frozen modules are being used
Fatal Python error: Segmentation fault

Thread 0x00007fb8357fa6c0 (most recent call first):
  File "/usr/lib/python3/dist-packages/ipykernel/parentpoller.py", line 37 in run
  File "/usr/lib/python3.11/threading.py", line 1038 in _bootstrap_inner

Current thread 0x00007fb84a145040 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/tmp/ipykernel_10701/3635166857.py", line 3 in crasher
  File "/tmp/ipykernel_10701/3635166857.py", line 5 in <module>
  File "/usr/lib/python3/dist-packages/IPython/core/interactiveshell.py", line 3378 in run_code
  File "<frozen runpy>", line 198 in _run_module_as_main

Extension modules: zmq.backend.cython.context, tornado.speedups (total: 2)
later output from something else
)";

}  // namespace

TEST_CASE("faulthandler's dump is parsed: error, crashing thread, frames",
          "[diagnosis][traceback]") {
  const auto dump = parse_faulthandler(kDump);
  REQUIRE(dump);
  CHECK(dump->fatal_error == "Segmentation fault");
  CHECK(dump->thread == "Current thread 0x00007fb84a145040");
  REQUIRE(dump->frames.size() == 5);
  CHECK(dump->frames[0].function == "string_at");
  CHECK(dump->frames[0].line == 519);
  CHECK(dump->frames[1].function == "crasher");
  CHECK(dump->frames[1].file == "/tmp/ipykernel_10701/3635166857.py");
  CHECK(dump->frames[4].file == "<frozen runpy>");
  CHECK(dump->text.starts_with("Fatal Python error: Segmentation fault\n"));
  CHECK(dump->text.find("Extension modules:") != std::string::npos);
  CHECK(dump->text.find("later output") == std::string::npos);
  CHECK(dump->text.find("Debugger warning") == std::string::npos);
}

TEST_CASE("the single-thread form and the last of several dumps", "[diagnosis][traceback]") {
  const std::string text =
      "Fatal Python error: Aborted\n\nStack (most recent call first):\n"
      "  File \"/a.py\", line 1 in first\n\n"
      "Fatal Python error: Bus error\n\nStack (most recent call first):\n"
      "  File \"/b.py\", line ??? in second\n  <truncated rest of calls>\n";
  const auto dump = parse_faulthandler(text);
  REQUIRE(dump);
  CHECK(dump->fatal_error == "Bus error");
  REQUIRE(dump->frames.size() == 1);
  CHECK(dump->frames[0].function == "second");
  CHECK(dump->frames[0].line == 0);
  CHECK_FALSE(parse_faulthandler("Traceback (most recent call last):\nValueError: x\n"));
  CHECK_FALSE(parse_faulthandler(""));
}

TEST_CASE("a line number too large for an int is an unknown line, not a throw",
          "[diagnosis][traceback]") {
  // Found by the diagnosis fuzzer: std::stoi threw out of diagnose(), which must not throw.
  const std::string text =
      "Fatal Python error: Segmentation fault\n\nStack (most recent call first):\n"
      "  File \"/a.py\", line 99999999999999999999 in huge\n"
      "  File \"/b.py\", line 2147483647 in largest\n";
  const auto dump = parse_faulthandler(text);
  REQUIRE(dump);
  REQUIRE(dump->frames.size() == 2);
  CHECK(dump->frames[0].line == 0);
  CHECK(dump->frames[0].function == "huge");
  CHECK(dump->frames[1].line == 2147483647);
}

TEST_CASE("frames in the running cell carry their line of code", "[diagnosis][traceback]") {
  const json report = {
      {"stderr_tail", {{"text", kDump}}},
      {"execution",
       {{"cell_in_flight",
         {{"execution_count", 2},
          {"code",
           "def crasher(n):\n    import ctypes\n    return ctypes.string_at(0)\n\ncrasher(1)"}}}}}};
  const json tb = find_python_traceback(report);
  REQUIRE(tb.is_object());
  CHECK(tb["fatal_error"] == "Segmentation fault");
  CHECK(tb["frames"][0]["in_cell"] == false);
  CHECK(tb["frames"][1]["in_cell"] == true);
  CHECK(tb["frames"][1]["cell"] == "in flight");
  CHECK(tb["frames"][1]["code"] == "    return ctypes.string_at(0)");
  CHECK(tb["frames"][2]["code"] == "crasher(1)");
  CHECK_FALSE(tb["frames"][0].contains("code"));
  CHECK(find_python_traceback(json{{"stderr_tail", {{"text", "nothing"}}}}).is_null());
}

TEST_CASE("the iopub stream is the second place a dump is looked for", "[diagnosis][traceback]") {
  const json report = {{"stderr_tail", {{"text", "quiet"}}},
                       {"execution", {{"stream_stderr_tail", kDump}}}};
  const json tb = find_python_traceback(report);
  REQUIRE(tb.is_object());
  CHECK_THAT(tb["source"].get<std::string>(),
             Catch::Contains("the stderr output the notebook showed"));
}

TEST_CASE("ipykernel cell files are recognised", "[diagnosis][traceback]") {
  CHECK(is_cell_file("/tmp/ipykernel_10701/3635166857.py"));
  CHECK(is_cell_file("/var/folders/x/T/ipykernel_1/12.py"));
  CHECK_FALSE(is_cell_file("/usr/lib/python3.11/ctypes/__init__.py"));
  CHECK_FALSE(is_cell_file("/tmp/ipykernel_10701/helper_module.py"));
}

TEST_CASE("a dump interleaved with what other threads forwarded is still read",
          "[diagnosis][traceback]") {
  // As recorded from ipykernel 6.17 dying of an uncaught C++ exception: ipykernel's pipe
  // thread forwards libstdc++'s message while faulthandler writes, and the two mix.
  const std::string text =
      "terminate called after throwing an instance of 'std::runtime_errorFatal Python error: '\n"
      "  what():  boom from C++\n"
      "Aborted\n\n"
      "Thread 0x00007fc5dbfff6c0 (most recent call first):\n"
      "  File \"/usr/lib/python3/dist-packages/ipykernel/parentpoller.py\", line 37 in run\n"
      "\n"
      "Current thread 0x00007f47dd059040 (most recent call first):\n"
      "  File \"/tmp/ipykernel_1283/4070685020.py\", line 2 in <module>\n"
      "  what():  boom from C++\n"
      "xyz  File \"/usr/lib/python3/dist-packages/IPython/core/interactiveshell.py\", line 3378 "
      "in run_code\n"
      "\n"
      "Extension modules: zmq.backend.cython.context (total: 1)\n";
  const auto dump = parse_faulthandler(text);
  REQUIRE(dump);
  CHECK(dump->fatal_error == "Aborted");
  CHECK(dump->thread == "Current thread 0x00007f47dd059040");
  REQUIRE(dump->frames.size() == 2);
  CHECK(dump->frames[0].file == "/tmp/ipykernel_1283/4070685020.py");
  CHECK(dump->frames[0].line == 2);
  CHECK(dump->frames[1].function == "run_code");
}
