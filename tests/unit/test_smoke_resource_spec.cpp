// smoke --resource-spec-file: CTest's resource specification read, its GPUs placed on by
// slots as CTest places tests, and each kernel told its GPU as CTest tells a test.
#include <algorithm>
#include <catch2/catch.hpp>

#include "kwd/smoke/admission.hpp"
#include "kwd/smoke/resource_spec.hpp"

using namespace kwd::smoke;

namespace {

std::vector<SmokeGpu> spec(const std::string& text) {
  return gpus_of_resource_spec(text, "spec.json");
}

Job job(std::size_t index) {
  Job out;
  out.index = index;
  out.name = "nb" + std::to_string(index);
  return out;
}

}  // namespace

TEST_CASE("a resource spec's GPUs: ids and slots, other resources left aside") {
  const auto gpus = spec(R"({"version": {"major": 1, "minor": 0}, "local": [{
      "gpus": [{"id": "0", "slots": 2}, {"id": "1"}, {"id": "spare", "slots": 0}],
      "crypto_chips": [{"id": "card0", "slots": 4}]}]})");
  REQUIRE(gpus.size() == 2);  // no slot, no place: "spare" is left out
  CHECK((gpus[0].ctest_id == "0" && gpus[0].slots == 2));
  CHECK((gpus[1].ctest_id == "1" && gpus[1].slots == 1));  // slots default to 1
}

TEST_CASE("a resource spec that is wrong is refused, naming the file and the fault") {
  const auto refused = [](const std::string& text, const std::string& says) {
    INFO(text);
    CHECK_THROWS_WITH(spec(text), Catch::StartsWith("spec.json: " + says));
  };
  refused("[1]", "not a JSON object");
  refused("{", "not a JSON object");
  refused(R"({"version": {"major": 2}, "local": [{"gpus": []}]})", "no \"version\" of major 1");
  refused(R"({"version": {"major": 1}, "local": [{}, {}]})", "\"local\" must be an array of one");
  refused(R"({"version": {"major": 1}, "local": [{"cpus": []}]})", "\"local\" names no \"gpus\"");
  refused(R"({"version": {"major": 1}, "local": [{"gpus": [{"id": "GPU-A"}]}]})",
          "GPU id \"GPU-A\": lowercase letters");
  refused(R"({"version": {"major": 1}, "local": [{"gpus": [{"id": "0x"}]}]})", "GPU id \"0x\"");
  refused(R"({"version": {"major": 1}, "local": [{"gpus": [{"id": "0"}, {"id": "0"}]}]})",
          "GPU id \"0\" twice");
  refused(R"({"version": {"major": 1}, "local": [{"gpus": [{"id": "0", "slots": -1}]}]})",
          "GPU \"0\": slots is not a whole number");
  refused(R"({"version": {"major": 1}, "local": [{"gpus": [{"id": "0", "slots": 0}]}]})",
          "no GPU with a slot");
  refused(R"({"version": {"major": 1}, "local": [{"gpus": [{"slots": 1}]}]})",
          "a GPU without a string \"id\"");
}

TEST_CASE("notebooks take one slot each, the GPU with the most free first, and wait for one") {
  const auto gpus = spec(R"({"version": {"major": 1, "minor": 0},
                             "local": [{"gpus": [{"id": "0", "slots": 1}, {"id": "1", "slots": 2}]}]})");
  // A plain -j 8: memory is not looked at, the slots are.
  Admission admission(std::nullopt, 8, gpus);
  for (std::size_t i = 0; i < 4; ++i)
    admission.enqueue(job(i));
  std::vector<RunningJob> running;
  std::vector<std::size_t> placed;
  for (;;) {
    auto decision = admission.next(running, 0);
    if (!decision.start) {
      CHECK(decision.waits == "nb3 waits: every GPU slot of the resource spec is taken");
      break;
    }
    REQUIRE(decision.gpu);
    RunningJob r;
    r.job = *decision.start;
    r.gpu = decision.gpu;
    running.push_back(r);
    placed.push_back(*decision.gpu);
  }
  CHECK(placed == std::vector<std::size_t>{1, 0, 1});  // the most slots free first
  // One on GPU "0" ends: the next goes there.
  running.erase(running.begin() + 1);
  const auto decision = admission.next(running, 0);
  REQUIRE(decision.start);
  CHECK(decision.start->index == 3);
  CHECK(decision.gpu == std::optional<std::size_t>(0));
}

TEST_CASE("a kernel on a resource spec's GPU is told its id as CTest tells a test") {
  SmokeGpu gpu;
  gpu.ctest_id = "1";
  gpu.slots = 2;
  const auto env = gpu_environment(gpu);
  CHECK(std::find(env.begin(), env.end(), "CTEST_RESOURCE_GROUP_COUNT=1") != env.end());
  CHECK(std::find(env.begin(), env.end(), "CTEST_RESOURCE_GROUP_0=gpus") != env.end());
  CHECK(std::find(env.begin(), env.end(), "CTEST_RESOURCE_GROUP_0_GPUS=id:1,slots:1") != env.end());
  // The id is the suite's own name for the device: no mask is put over what it sees.
  CHECK(std::none_of(env.begin(), env.end(),
                     [](const std::string& e) { return e.starts_with("CUDA_VISIBLE_DEVICES"); }));
}
