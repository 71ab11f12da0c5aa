// A remedy's one-click step (remedies[].action, docs/report-format.md): given where the first
// step really is one click (an option to copy, a setting to set in the notebook's first cell),
// absent where the remedy asks for judgement, and absent when the setting is already applied.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "diagnosis_fixtures.hpp"
#include "kwd/diagnosis/diagnose.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

using kwd::test::kDiagnosisFixtures;
using kwd::test::remedy;

namespace {

json diagnose_fixture(const std::string& name) {
  std::ifstream in(kDiagnosisFixtures / name);
  json report = json::parse(in)["report"];
  kwd::diagnosis::complete_report(report);
  return report["diagnosis"];
}

int actions(const json& diagnosis) {
  int n = 0;
  for (const auto& r : diagnosis["remedies"])
    n += r.contains("action") ? 1 : 0;
  return n;
}

// The setting's name and value, assigned in os.environ by the cell the action inserts.
void check_setting_cell(const json& diagnosis, const std::string& id, const std::string& name,
                        const std::string& value) {
  INFO(diagnosis.dump(1));
  const json* r = remedy(diagnosis, id);
  REQUIRE(r != nullptr);
  REQUIRE(r->contains("action"));
  const json& a = (*r)["action"];
  CHECK(a["kind"] == "insert_cell");
  CHECK(a["label"] == "Insert " + name + "=" + value + " as the first cell");
  const std::string code = a["text"];
  CHECK(code.starts_with("import os\n"));
  CHECK_THAT(code, Catch::Contains("os.environ[\"" + name + "\"] = \"" + value + "\"\n"));
  CHECK_THAT(code, Catch::Contains("before it is imported"));
  // The remedy's own words name the same setting.
  CHECK_THAT((*r)["text"].get<std::string>(), Catch::Contains(name));
}

}  // namespace

TEST_CASE("the watchdog's own limit: the first remedy copies the doubled option",
          "[diagnosis][remedy-action]") {
  const json d = diagnose_fixture("oom_cgroup_watchdog_limit.json");
  INFO(d.dump(1));
  REQUIRE_FALSE(d["remedies"].empty());
  const json& first = d["remedies"][0];
  CHECK(first["id"] == "oom.raise_watchdog_limit");
  // The fixture's limit is 512 MiB.
  CHECK(
      first["action"] ==
      json({{"kind", "copy"}, {"label", "Copy --memory-limit=1G"}, {"text", "--memory-limit=1G"}}));
  CHECK_THAT(first["text"].get<std::string>(), Catch::Contains("--memory-limit=1G"));
  CHECK(actions(d) == 1);
}

TEST_CASE("framework settings read at start-up become a first cell, unless already set",
          "[diagnosis][remedy-action]") {
  check_setting_cell(diagnose_fixture("gpu_oom_tensorflow.json"), "tensorflow.memory_growth",
                     "TF_FORCE_GPU_ALLOW_GROWTH", "true");
  check_setting_cell(diagnose_fixture("gpu_oom_pytorch.json"), "torch.expandable_segments",
                     "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");
  check_setting_cell(diagnose_fixture("gpu_oom_jax_exit.json"), "jax.preallocate",
                     "XLA_PYTHON_CLIENT_PREALLOCATE", "false");
  check_setting_cell(diagnose_fixture("gpu_fault_illegal_address.json"), "cuda.launch_blocking",
                     "CUDA_LAUNCH_BLOCKING", "1");
  // The kernel ran with the setting: no remedy, so no cell that sets it again.
  for (const char* name :
       {"gpu_oom_tensorflow_growth_on.json", "gpu_fault_launch_blocking_set.json",
        "gpu_oom_pytorch_allocator_configured.json", "gpu_oom_jax_preallocation_off.json"}) {
    const json d = diagnose_fixture(name);
    INFO(name << ": " << d.dump(1));
    for (const auto& r : d["remedies"])
      if (r.contains("action")) CHECK(r["action"]["kind"] != "insert_cell");
  }
}

TEST_CASE("remedies that ask for judgement get no action", "[diagnosis][remedy-action]") {
  // Another's limit (the container's), a segfault, a system OOM: nothing one click does.
  for (const char* name :
       {"oom_cgroup.json", "recorded_segfault.json", "oom_system_tensorflow.json",
        "recorded_sigkill.json", "hang_blocked_io.json"}) {
    const json d = diagnose_fixture(name);
    INFO(name << ": " << d.dump(1));
    CHECK(actions(d) == 0);
  }
}
