// The classifier over recorded fact sets: every file in tests/fixtures/diagnosis (and each
// report of tests/fixtures/frameworks) is a report
// (real ones recorded from ipykernel under the watchdog, and fact sets written with the field
// names of docs/CONTRACT.md) with what the diagnosis must and must not say about it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "diagnosis_fixtures.hpp"
#include "kwd/diagnosis/diagnose.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

using kwd::test::kDiagnosisFixtures;
using kwd::test::remedy;

namespace {

// Reports of real frameworks dying (tests/integration/framework_corpus.py), one folder per
// framework and the version that printed them: tensorflow-2.21.0/, torch-1.13.0/...
const fs::path kFrameworkFixtures = fs::path(KWD_SOURCE_DIR) / "tests" / "fixtures" / "frameworks";

std::vector<fs::path> fixture_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kDiagnosisFixtures))
    if (e.path().extension() == ".json") files.push_back(e.path());
  for (const auto& e : fs::recursive_directory_iterator(kFrameworkFixtures))
    if (e.path().extension() == ".json" && !e.path().stem().string().ends_with(".cell"))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

bool any_contains(const json& items, const char* field, const std::string& needle) {
  return std::any_of(items.begin(), items.end(), [&](const json& item) {
    const std::string text = field ? item.value(field, "") : item.get<std::string>();
    return text.find(needle) != std::string::npos;
  });
}

void check_fixture(const json& fixture) {
  // As the supervisor does it: the traceback section first, then the diagnosis.
  json report = fixture["report"];
  kwd::diagnosis::complete_report(report);
  const json& d = report["diagnosis"];
  CHECK(d == kwd::diagnosis::diagnose(report));
  const json& expect = fixture["expect"];
  INFO("diagnosis: " << d.dump(1));

  CHECK(d["cause"] == expect["cause"]);
  if (expect.contains("confidence")) CHECK(d["confidence"] == expect["confidence"]);
  // Shape every diagnosis has, whatever the facts.
  CHECK_FALSE(d["headline"].get<std::string>().empty());
  CHECK(d["evidence"].is_array());
  CHECK(d["remedies"].is_array());
  CHECK_FALSE(d["remedies"].empty());
  CHECK(d["missing"].is_array());
  for (const auto& e : d["evidence"]) {
    // Every evidence item points at a fact that is really in the report.
    const std::string pointer = e["pointer"];
    INFO("evidence pointer " << pointer);
    CHECK(report.contains(json::json_pointer(pointer)));
  }
  for (const auto& s : expect.value("headline_contains", json::array()))
    CHECK_THAT(d["headline"].get<std::string>(), Catch::Contains(s.get<std::string>()));
  for (const auto& s : expect.value("headline_excludes", json::array()))
    CHECK_THAT(d["headline"].get<std::string>(), !Catch::Contains(s.get<std::string>()));
  for (const auto& s : expect.value("evidence_contains", json::array())) {
    INFO("evidence containing: " << s);
    CHECK(any_contains(d["evidence"], "fact", s));
  }
  for (const auto& p : expect.value("evidence_pointers", json::array())) {
    INFO("evidence pointing at: " << p);
    CHECK(std::any_of(d["evidence"].begin(), d["evidence"].end(),
                      [&](const json& e) { return e["pointer"] == p; }));
  }
  for (const auto& id : expect.value("remedies", json::array())) {
    INFO("remedy expected: " << id);
    CHECK(remedy(d, id) != nullptr);
  }
  for (const auto& id : expect.value("remedies_absent", json::array())) {
    INFO("remedy not expected: " << id);
    CHECK(remedy(d, id) == nullptr);
  }
  const json why_contains = expect.value("remedy_why_contains", json::object());
  for (const auto& [id, needle] : why_contains.items()) {
    const auto* r = remedy(d, id);
    REQUIRE(r != nullptr);
    CHECK_THAT((*r)["why"].get<std::string>(), Catch::Contains(needle.get<std::string>()));
  }
  const json text_contains = expect.value("remedy_text_contains", json::object());
  for (const auto& [id, needle] : text_contains.items()) {
    const auto* r = remedy(d, id);
    REQUIRE(r != nullptr);
    CHECK_THAT((*r)["text"].get<std::string>(), Catch::Contains(needle.get<std::string>()));
  }
  for (const auto& s : expect.value("missing_contains", json::array())) {
    INFO("missing containing: " << s);
    CHECK(any_contains(d["missing"], nullptr, s));
  }
  if (expect.value("missing_empty", false)) CHECK(d["missing"].empty());
}

}  // namespace

TEST_CASE("diagnosis of recorded fact sets", "[diagnosis]") {
  const auto files = fixture_files();
  REQUIRE(files.size() >= 30);
  for (const auto& file : files) {
    DYNAMIC_SECTION(file.stem().string()) {
      std::ifstream in(file);
      const json fixture = json::parse(in);
      INFO(fixture.value("description", ""));
      check_fixture(fixture);
    }
  }
}

TEST_CASE("every cause is reached by some fixture", "[diagnosis]") {
  std::set<std::string> reached;
  for (const auto& file : fixture_files()) {
    std::ifstream in(file);
    reached.insert(json::parse(in)["expect"]["cause"].get<std::string>());
  }
  for (const auto& cause : kwd::diagnosis::causes()) {
    INFO(cause.id);
    CHECK(reached.contains(std::string(cause.id)));
  }
}

TEST_CASE("the diagnosis is a pure function of the report", "[diagnosis]") {
  for (const auto& file : fixture_files()) {
    std::ifstream in(file);
    const json report = json::parse(in)["report"];
    CHECK(kwd::diagnosis::diagnose(report) == kwd::diagnosis::diagnose(report));
  }
}

TEST_CASE("complete_report adds the traceback and the diagnosis, and survives garbage",
          "[diagnosis]") {
  json report = {{"termination", {{"kind", "signal"}, {"signal", 11}, {"signal_name", "SIGSEGV"}}},
                 {"stderr_tail",
                  {{"text",
                    "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent "
                    "call first):\n  File \"/x/lib.py\", line 9 in boom\n"}}}};
  kwd::diagnosis::complete_report(report);
  CHECK(report["python_traceback"]["frames"][0]["function"] == "boom");
  CHECK(report["diagnosis"]["cause"] == "native_crash");

  json garbage = {{"termination", "not an object"}, {"stderr_tail", 42}, {"execution", {1, 2}}};
  kwd::diagnosis::complete_report(garbage);
  CHECK(garbage["diagnosis"]["cause"] == "unknown");
}

// Reports recorded on an NVIDIA H100 (tests/fixtures/gpu, copied from the GPU kit's
// fixtures), judged again the way `reports diagnose` does: the stored diagnosis set aside.
TEST_CASE("recorded H100 reports re-diagnose right", "[diagnosis]") {
  struct Expected {
    const char* file;
    const char* cause;
    const char* headline_contains;
  };
  const Expected expected[] = {
      {"cgroup_pinned.json", "oom_killed_system", "OOM killer"},
      {"device_assert.json", "gpu_driver_fault", "Xid 43"},
      {"hold20g_abort.json", "abort", "Aborted"},
      {"illegal_address.json", "gpu_driver_fault", "Xid 31"},
      // Real ipykernels under `run` on an H200 (tests/gpu/scenarios.py, 2026-11-26).
      // The daemon watching an unwrapped ipykernel on an H200 (tests/gpu/daemon_check.py,
      // 2026-11-28): its last cell segfaulted before IOPub told of it.
      {"daemon_segv_unannounced_cell.json", "native_crash", "with no cell seen running"},
      {"ipykernel_contention_jax_holder.json", "gpu_out_of_memory", "other processes held"},
      // A bad host pointer handed to cuMemcpyHtoD_v2 through ctypes (2026-11-30): the fault is
      // nine frames deep in the stripped driver, named by the function it came through.
      {"ipykernel_crash_in_libcuda.json", "native_crash",
       "SIGSEGV (segmentation fault) in libcuda.so.580.159.04 (under cuMemcpyHtoD_v2), called "
       "from upload(), line 2 of cell [2]"},
      {"ipykernel_illegal_address_then_exit.json", "gpu_driver_fault", "Xid 31"},
      {"ipykernel_jax_oom_last_words.json", "gpu_out_of_memory", "GPU_0_bfc"},
      {"ipykernel_run_all_short_cells.json", "native_crash", "SIGSEGV"},
      {"ipykernel_run_all_survived_device_assert_then_abort.json", "abort", "Aborted"},
      {"ipykernel_segv_holding_gpu.json", "native_crash", "SIGSEGV"},
      {"ipykernel_survived_cuda_oom_then_segv.json", "native_crash", "load_batch()"},
      {"ipykernel_survived_device_assert_then_abort.json", "abort", "Aborted"},
      {"jax_oom.json", "gpu_out_of_memory", "RESOURCE_EXHAUSTED"},
      {"segv_holding_gpu.json", "native_crash", "SIGSEGV"},
      {"torch_oom_grow.json", "gpu_out_of_memory", "Tried to allocate 8.00 GiB"},
  };
  const fs::path dir = fs::path(KWD_SOURCE_DIR) / "tests" / "fixtures" / "gpu";
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir))
    files += e.path().extension() == ".json";
  CHECK(files == std::size(expected));  // a new recording gets an expectation here
  for (const auto& x : expected) {
    INFO(x.file);
    std::ifstream in(dir / x.file);
    const json stored = json::parse(in);
    const json report = kwd::diagnosis::rediagnose(stored);
    const json& d = report["diagnosis"];
    INFO(d.dump(1));
    CHECK(d["cause"] == x.cause);
    CHECK_THAT(d["headline"].get<std::string>(), Catch::Contains(x.headline_contains));
    // No over-claim: every piece of evidence points at a fact in the report.
    for (const auto& ev : d["evidence"])
      CHECK(report.contains(json::json_pointer(ev["pointer"].get<std::string>())));
  }
}

namespace {

json rediagnosed_gpu_fixture(const char* name) {
  std::ifstream in(fs::path(KWD_SOURCE_DIR) / "tests" / "fixtures" / "gpu" / name);
  return kwd::diagnosis::rediagnose(json::parse(in));
}

bool evidence_says(const json& diagnosis, const std::string& words) {
  for (const auto& e : diagnosis["evidence"])
    if (e["fact"].get<std::string>().find(words) != std::string::npos) return true;
  return false;
}

}  // namespace

// What the kernel survived on a real GPU is told as context, and the advice fits the death.
TEST_CASE("H200 recordings: survived GPU errors are context, holders and requests shape the advice",
          "[diagnosis]") {
  SECTION("a device-side assert survived (Xid 43 in cell 2), then an abort in cell 4") {
    const json d =
        rediagnosed_gpu_fixture("ipykernel_survived_device_assert_then_abort.json")["diagnosis"];
    INFO(d.dump(1));
    CHECK(evidence_says(d,
                        "earlier, in cell [2] (survived: cell [3] ran to its end after it), "
                        "NVIDIA Xid 43 on GPU 0"));
    for (const auto& r : d["remedies"])
      CHECK(r["id"] != "gpu.xid");  // a fault the kernel went on from advises nothing
  }
  SECTION("the same with every cell queued at once (\"run all\")") {
    const json d = rediagnosed_gpu_fixture(
        "ipykernel_run_all_survived_device_assert_then_abort.json")["diagnosis"];
    INFO(d.dump(1));
    CHECK(evidence_says(d,
                        "earlier, in cell [2] (survived: cell [3] ran to its end after it), "
                        "NVIDIA Xid 43 on GPU 0"));
  }
  SECTION("a CUDA OOM survived in cell 2, a segfault in cell 4") {
    const json d =
        rediagnosed_gpu_fixture("ipykernel_survived_cuda_oom_then_segv.json")["diagnosis"];
    INFO(d.dump(1));
    CHECK(evidence_says(d, "earlier, in cell [2] (survived: cell [3] ran to its end after it)"));
    CHECK(evidence_says(d, "CUDA out of memory"));
  }
  SECTION("the daemon's kernel died as a cell started: IOPub's idle is not taken as proof") {
    json report = rediagnosed_gpu_fixture("daemon_segv_unannounced_cell.json");
    const json& d = report["diagnosis"];
    INFO(d.dump(1));
    CHECK_THAT(d["headline"].get<std::string>(), !Catch::Contains("idle"));
    bool said = false;
    for (const auto& m : d["missing"])
      said = said || m.get<std::string>().find("did not announce its cells") != std::string::npos;
    CHECK(said);
    REQUIRE(!d["remedies"].empty());
    CHECK(d["remedies"][0]["id"] == "native.traceback");
    CHECK_THAT(d["remedies"][0]["text"].get<std::string>(), Catch::Contains("kernelspec wrap"));
    // The same facts from a kernel that announced its cells: then idle was idle.
    report["watchdog"]["cell_announcements"] = true;
    report["watchdog"]["mode"] = "launcher";
    const json announced = kwd::diagnosis::rediagnose(report)["diagnosis"];
    CHECK_THAT(announced["headline"].get<std::string>(),
               Catch::EndsWith("while the kernel was idle"));
    CHECK(announced["remedies"][0]["text"].get<std::string>().find("kernelspec wrap") ==
          std::string::npos);
  }
  SECTION("another process (JAX, preallocated) held the device when PyTorch ran out") {
    const json d = rediagnosed_gpu_fixture("ipykernel_contention_jax_holder.json")["diagnosis"];
    INFO(d.dump(1));
    REQUIRE(!d["remedies"].empty());
    CHECK(d["remedies"][0]["id"] == "gpu.other_processes");
    CHECK_THAT(d["remedies"][0]["text"].get<std::string>(),
               Catch::Contains("XLA_PYTHON_CLIENT_PREALLOCATE"));
    CHECK(evidence_says(d, "it has loaded jax"));
  }
  SECTION("XLA asked for more than the whole device: split the work, nothing else") {
    const json d = rediagnosed_gpu_fixture("ipykernel_jax_oom_last_words.json")["diagnosis"];
    INFO(d.dump(1));
    REQUIRE(d["remedies"].size() == 1);
    CHECK(d["remedies"][0]["id"] == "gpu.request_exceeds_device");
    CHECK_THAT(d["remedies"][0]["text"].get<std::string>(), Catch::Contains("256.0 GiB"));
    CHECK_THAT(d["remedies"][0]["why"].get<std::string>(),
               Catch::Contains("xla.bfc_allocator_out_of_memory"));
  }
}

// Advice is said once: when a framework's own remedy already gives a fix, a signature that
// matched the same message adds its public source to that remedy's reasons, not a second item
// that says it again in other words. A knob named by two remedies is the sign of a repeat.
TEST_CASE("no two remedies give the same advice", "[diagnosis]") {
  const char* const knobs[] = {
      "PYTORCH_CUDA_ALLOC_CONF",
      "CUDA_LAUNCH_BLOCKING",
      "XLA_PYTHON_CLIENT_PREALLOCATE",
      "set_memory_growth",
      "PYTORCH_MPS_HIGH_WATERMARK_RATIO",
      "set_cache_limit",
      "batch size",
      "nvidia-smi",
      "faulthandler",
      "Xid",
  };
  auto files = fixture_files();
  const fs::path gpu = fs::path(KWD_SOURCE_DIR) / "tests" / "fixtures" / "gpu";
  for (const auto& e : fs::directory_iterator(gpu))
    files.push_back(e.path());
  for (const auto& file : files) {
    std::ifstream in(file);
    const json doc = json::parse(in);
    json report = doc.contains("report") ? doc["report"] : doc;
    report.erase("diagnosis");
    kwd::diagnosis::complete_report(report);
    const json& remedies = report["diagnosis"]["remedies"];
    for (const char* knob : knobs) {
      std::vector<std::string> saying;
      for (const auto& r : remedies)
        if (r["text"].get<std::string>().find(knob) != std::string::npos)
          saying.push_back(r["id"].get<std::string>());
      INFO(file.filename().string() << ": '" << knob << "' in " << json(saying).dump());
      CHECK(saying.size() <= 1);
    }
  }
}

TEST_CASE("NVML failing during the run is named in missing, whatever the cause", "[diagnosis]") {
  json report = kwd::test::recorded_segfault_report();
  const auto died = report["kernel"]["died_at_ms"].get<std::int64_t>();
  const json before = kwd::diagnosis::diagnose(report);
  report["gpu"] = {{"available", true},
                   {"problems", {"device 0: memory info: GPU is lost"}},
                   {"failing_since_ms", died - 3000}};
  const json after = kwd::diagnosis::diagnose(report);
  CHECK(after["cause"] == before["cause"]);
  CHECK(after["headline"] == before["headline"]);
  REQUIRE(after["missing"].size() == before["missing"].size() + 1);
  CHECK(after["missing"].back() ==
        "gpu: NVML stopped answering during the run 3 s before the death (device 0: memory "
        "info: GPU is lost); the GPU readings after that are missing, those before it stand");
  // A device that never answered (NOT_SUPPORTED from the start) is no failure.
  report["gpu"]["failing_since_ms"] = nullptr;
  CHECK(kwd::diagnosis::diagnose(report)["missing"] == before["missing"]);
}

TEST_CASE("xeus-python's fatal-signal line is the death's, even heard before the cells' ends",
          "[diagnosis]") {
  // A fresh run's test_other_kernels[xpython] under load: the kernel's IOPub messages (cell
  // [1]'s end, cell [2]'s start), flushed at its exit, reached the watchdog after the
  // handler's "Error: signal 11:" on stderr; by arrival, cell [1] "ran to its end after" the
  // line, which was then taken for a crash the kernel survived.
  std::ifstream in(kwd::test::kDiagnosisFixtures / "recorded_xeus_python_segfault.json");
  json report = json::parse(in)["report"];
  const auto died = report["kernel"]["died_at_ms"].get<std::int64_t>();
  for (auto& pair : report["stderr_tail"]["arrivals"])
    pair[1] = died - 40;  // every line heard first
  auto& cell = report["execution"]["last_cells"][0];
  cell["started_at_ms"] = died - 30;
  cell["ended_at_ms"] = died - 20;
  report["execution"]["cell_in_flight"]["started_at_ms"] = died - 10;
  const json d = kwd::diagnosis::rediagnose(report)["diagnosis"];
  INFO(d.dump(1));
  CHECK(d["cause"] == "native_crash");
  CHECK_THAT(d["headline"].get<std::string>(),
             Catch::Contains("caught by the kernel's own handler, which exited with code 1"));
}
