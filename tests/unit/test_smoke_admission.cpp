#include <algorithm>
#include <catch2/catch.hpp>

#include "kwd/smoke/admission.hpp"

using namespace kwd::smoke;

namespace {

constexpr std::int64_t MiB = 1024 * 1024;
constexpr std::int64_t kSecond = 1'000'000'000;

Job job(std::size_t index, std::optional<std::int64_t> estimate, double seconds = 10) {
  Job out;
  out.index = index;
  out.name = "nb" + std::to_string(index);
  out.estimate = estimate;
  out.seconds = seconds;
  return out;
}

// A GPU that NVML lists, as smoke reads it.
SmokeGpu nvml_gpu(unsigned index, std::string uuid, std::string name, std::int64_t budget) {
  SmokeGpu gpu;
  gpu.index = index;
  gpu.uuid = std::move(uuid);
  gpu.name = std::move(name);
  gpu.budget = budget;
  return gpu;
}

RunningJob running(const Job& j, std::int64_t used, std::int64_t started_ns = 0) {
  RunningJob out;
  out.job = j;
  out.used = out.peak = used;
  out.started_ns = started_ns;
  return out;
}

}  // namespace

TEST_CASE("without a budget the notebooks start in the order given, the ceiling at a time") {
  Admission admission(std::nullopt, 2);
  for (std::size_t i : {2, 0, 1})
    admission.enqueue(job(i, std::nullopt));
  std::vector<RunningJob> now;
  auto first = admission.next(now, 0);
  REQUIRE(first.start);
  CHECK(first.start->index == 0);
  now.push_back(running(*first.start, 0));
  auto second = admission.next(now, 0);
  REQUIRE(second.start);
  CHECK(second.start->index == 1);
  now.push_back(running(*second.start, 0));
  CHECK_FALSE(admission.next(now, 0).start);  // the ceiling
}

TEST_CASE("known notebooks start as their peaks fit, the long and heavy first") {
  Admission admission(1000 * MiB, 8);
  admission.enqueue(job(0, 100 * MiB, 5));   // light, short
  admission.enqueue(job(1, 600 * MiB, 30));  // heavy, long
  admission.enqueue(job(2, 600 * MiB, 20));  // heavy
  admission.enqueue(job(3, 100 * MiB, 5));   // light
  std::vector<RunningJob> now;
  auto d = admission.next(now, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 1);
  now.push_back(running(*d.start, 600 * MiB));
  // The other heavy does not fit beside it (600 of 400 left); the lights end long before the
  // first heavy does, so they fill the gap.
  d = admission.next(now, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 0);
  now.push_back(running(*d.start, 100 * MiB));
  d = admission.next(now, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 3);
  now.push_back(running(*d.start, 100 * MiB));
  d = admission.next(now, 0);
  CHECK_FALSE(d.start);
  CHECK(d.waits == "nb2 waits: needs 600.0 MiB, 200.0 MiB free (running nb1, nb0, nb3)");
}

TEST_CASE("a light notebook that would delay the heavy one waiting does not jump the queue") {
  Admission admission(1000 * MiB, 8);
  admission.enqueue(job(0, 500 * MiB, 10));
  admission.enqueue(job(1, 600 * MiB, 9));
  admission.enqueue(job(2, 300 * MiB, 60));  // long: it would hold the room nb1 needs
  std::vector<RunningJob> now;
  auto d = admission.next(now, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 2);  // the longest first
  now.push_back(running(*d.start, 300 * MiB));
  d = admission.next(now, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 0);
  now.push_back(running(*d.start, 500 * MiB));
  // nb1 waits for nb0 (ends at 10 s); nothing else is queued.
  d = admission.next(now, 0);
  CHECK_FALSE(d.start);
  now.erase(now.begin() + 1);
  d = admission.next(now, 10 * kSecond);
  REQUIRE(d.start);
  CHECK(d.start->index == 1);
}

TEST_CASE("behind a heavy notebook that waits, only what leaves its start untouched goes") {
  Admission gaps(1000 * MiB, 8);
  gaps.enqueue(job(0, 800 * MiB, 100));
  gaps.enqueue(job(2, 150 * MiB, 10));
  gaps.enqueue(job(3, 300 * MiB, 40));
  gaps.enqueue(job(4, 150 * MiB, 40));
  // nb0 needs 800: it can start when nb9 ends at 30 s, with 200 MiB beside it then.
  std::vector<RunningJob> busy{running(job(9, 400 * MiB, 30), 400 * MiB, 0)};
  auto d = gaps.next(busy, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 4);  // outlasts nb9, but fits in the room left beside nb0
  busy.push_back(running(*d.start, 150 * MiB));
  d = gaps.next(busy, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 2);  // too big for that room now, but ends before 30 s
  busy.push_back(running(*d.start, 150 * MiB));
  d = gaps.next(busy, 0);
  CHECK_FALSE(d.start);  // nb3 fits now, but would hold nb0 back past 30 s
  CHECK_THAT(d.waits, Catch::StartsWith("nb0 waits: needs 800.0 MiB"));
}

TEST_CASE("never-seen notebooks start first, one at a time until their memory is seen") {
  Admission admission(1000 * MiB, 8);
  admission.enqueue(job(0, 100 * MiB));
  admission.enqueue(job(1, std::nullopt));
  admission.enqueue(job(2, std::nullopt));
  std::vector<RunningJob> now;
  auto d = admission.next(now, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 1);
  now.push_back(running(*d.start, 50 * MiB, 0));
  // The second unknown waits while the first settles; the known one may go beside it.
  d = admission.next(now, kSecond / 2);
  REQUIRE(d.start);
  CHECK(d.start->index == 0);
  now.push_back(running(*d.start, 100 * MiB, kSecond / 2));
  d = admission.next(now, kSecond);
  CHECK_FALSE(d.start);
  CHECK_THAT(d.waits, Catch::StartsWith("nb2 waits: its memory is unknown"));
  d = admission.next(now, 2 * kSecond);
  REQUIRE(d.start);
  CHECK(d.start->index == 2);
}

TEST_CASE("a notebook over its estimate holds the queue, and one alone holds everyone") {
  Admission admission(1000 * MiB, 8);
  admission.enqueue(job(0, 100 * MiB));
  const Job grown = job(5, 200 * MiB);
  auto d = admission.next({running(grown, 400 * MiB)}, 0);
  CHECK_FALSE(d.start);
  CHECK(d.waits == "nb0 waits: nb5 holds 400.0 MiB, past its estimate of 200.0 MiB");
  Job lone = job(6, 100 * MiB);
  lone.alone = true;
  d = admission.next({running(lone, 100 * MiB)}, 0);
  CHECK_FALSE(d.start);
  CHECK(d.waits == "nb0 waits: nb6 runs alone");
}

TEST_CASE("a notebook bigger than the budget, or run again, runs alone and first") {
  Admission admission(1000 * MiB, 8);
  admission.enqueue(job(0, 100 * MiB, 50));
  admission.enqueue(job(1, 2000 * MiB, 1));
  REQUIRE(admission.queue().front().index == 1);
  CHECK(admission.queue().front().alone);
  const std::vector<RunningJob> other{running(job(7, 10 * MiB), 10 * MiB)};
  auto d = admission.next(other, 0);
  CHECK_FALSE(d.start);  // nothing passes it: it waits for the others to end
  CHECK(d.waits == "nb1 waits to run alone (running nb7)");
  d = admission.next({}, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 1);
}

TEST_CASE("at the budget, the one most over its recorded peak is stopped, else the youngest") {
  Admission admission(1000 * MiB, 8);
  const std::vector<RunningJob> fits{running(job(0, 400 * MiB), 450 * MiB),
                                     running(job(1, std::nullopt), 500 * MiB)};
  CHECK_FALSE(admission.over_budget(fits));
  // nb0 said 100 MiB and holds 500: it misled the packing.
  const std::vector<RunningJob> misled{running(job(0, 100 * MiB), 500 * MiB, 0),
                                       running(job(1, std::nullopt), 550 * MiB, 5)};
  CHECK(admission.over_budget(misled) == 0);
  // Within a little of its peak is no one's fault: the youngest goes, never seen or not.
  const std::vector<RunningJob> none_over{running(job(0, 400 * MiB), 420 * MiB, 0),
                                          running(job(1, std::nullopt), 500 * MiB, 9),
                                          running(job(2, 600 * MiB), 100 * MiB, 4)};
  CHECK(admission.over_budget(none_over) == 1);
  // Alone, what it does is its own.
  CHECK_FALSE(admission.over_budget({running(job(0, 100 * MiB), 5000 * MiB)}));
  CHECK_FALSE(Admission(std::nullopt, 4).over_budget(misled));
}

TEST_CASE("the prediction packs like admission does, against the lower bound") {
  // Two heavy ones that cannot overlap, and lights that fit beside either.
  std::vector<Job> jobs{job(0, 600 * MiB, 20), job(1, 600 * MiB, 20), job(2, 100 * MiB, 10),
                        job(3, 100 * MiB, 10), job(4, 100 * MiB, 10), job(5, 100 * MiB, 10)};
  const auto p = predict(jobs, 1000 * MiB, 8);
  CHECK(p.seconds == Approx(40));
  // The heavy ones cannot overlap (each holds more than half): back to back, the bound.
  CHECK(p.lower_bound == Approx(40));
  const auto serial = predict(jobs, std::nullopt, 1);
  CHECK(serial.seconds == Approx(80));
  CHECK(serial.lower_bound == Approx(80));
}

TEST_CASE("the prediction places on the GPUs as admission does") {
  // As on the H200: four notebooks of 40.6 GiB of GPU memory and 12 s each, little host
  // memory; three fit on the device at once, the fourth after. smoke -j auto took 23.9 s
  // (it predicted 13 s when the prediction looked at host memory alone).
  constexpr std::int64_t kGiB = 1024 * MiB;
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < 4; ++i) {
    jobs.push_back(job(i, 700 * MiB, 12));
    jobs.back().gpu_estimate = 40 * kGiB + 600 * MiB;
  }
  const std::vector<SmokeGpu> h200{
      nvml_gpu(0, "GPU-f792be30", "NVIDIA H200", 139 * kGiB + 300 * MiB)};
  const auto p = predict(jobs, 112 * kGiB, 16, h200);
  CHECK(p.seconds == Approx(24));
  // GPU memory-seconds over the device's room: 4 x 40.6 GiB x 12 s / 139.3 GiB.
  CHECK(p.lower_bound == Approx(4 * 40.5859 * 12 / 139.293).epsilon(0.001));
  CHECK(predict(jobs, 112 * kGiB, 16).seconds == Approx(12));  // blind to the GPU
}

TEST_CASE("CUDA_VISIBLE_DEVICES is read as the CUDA runtime reads it") {
  const std::vector<std::string> uuids{"GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-abcd-3333"};
  using V = std::vector<std::size_t>;
  CHECK(visible_devices(uuids, std::nullopt) == V{0, 1, 2});
  CHECK(visible_devices(uuids, "").empty());
  CHECK(visible_devices(uuids, "2,0") == V{2, 0});
  CHECK(visible_devices(uuids, "GPU-bbbb-2222") == V{1});
  CHECK(visible_devices(uuids, "GPU-bb, 0") == V{1, 0});  // a unique prefix, spaces
  CHECK(visible_devices(uuids, "GPU-a").empty());         // a prefix of two: refused
  CHECK(visible_devices(uuids, "1,7,0") == V{1});         // ends at the first unknown entry
  CHECK(visible_devices(uuids, "1,1") == V{1});
  CHECK(visible_devices(uuids, "-1,0").empty());
}

TEST_CASE("a GPU is chosen by best fit, and none is packed past its free memory") {
  const std::vector<SmokeGpu> gpus{nvml_gpu(0, "GPU-big", "", 10 * 1024 * MiB),
                                   nvml_gpu(1, "GPU-small", "", 4 * 1024 * MiB)};
  CHECK(place_on_gpu(gpus, {0, 0}, 3 * 1024 * MiB) == 1);  // fits both: the tighter
  CHECK(place_on_gpu(gpus, {0, 0}, 6 * 1024 * MiB) == 0);  // fits only the big one
  CHECK_FALSE(place_on_gpu(gpus, {6 * 1024 * MiB, 0}, 6 * 1024 * MiB));
  CHECK(place_on_gpu(gpus, {0, 0}, std::nullopt) == 0);  // unknown: the most free
  CHECK(place_on_gpu(gpus, {8 * 1024 * MiB, 0}, std::nullopt) == 1);

  Admission admission(100 * 1024 * MiB, 8, gpus);
  Job a = job(0, 100 * MiB, 30);
  a.gpu_estimate = 7 * 1024 * MiB;
  Job b = job(1, 100 * MiB, 20);
  b.gpu_estimate = 6 * 1024 * MiB;
  Job c = job(2, 100 * MiB, 10);
  c.gpu_estimate = 3584 * MiB;
  for (const Job& j : {a, b, c})
    admission.enqueue(j);
  std::vector<RunningJob> now;
  auto d = admission.next(now, 0);
  REQUIRE(d.start);
  CHECK(d.start->index == 0);
  CHECK(d.gpu == 0);
  RunningJob on_big = running(*d.start, 100 * MiB);
  on_big.gpu = 0;
  now.push_back(on_big);
  d = admission.next(now, 0);  // b fits no GPU now (3 and 4 GiB left); c does, on the small one
  REQUIRE(d.start);
  CHECK(d.start->index == 2);
  CHECK(d.gpu == 1);
  RunningJob on_small = running(*d.start, 100 * MiB);
  on_small.gpu = 1;
  now.push_back(on_small);
  d = admission.next(now, 0);
  CHECK_FALSE(d.start);
  CHECK(d.waits == "nb1 waits: needs 6.0 GiB of GPU memory, 3.0 GiB free on the emptiest GPU");

  // Bigger than any GPU: it waits for an empty machine, then gets the GPU with the most free.
  Admission huge(100 * 1024 * MiB, 8, gpus);
  Job h = job(3, 100 * MiB, 10);
  h.gpu_estimate = 40 * 1024 * MiB;
  huge.enqueue(h);
  CHECK_FALSE(huge.next(now, 0).start);
  d = huge.next({}, 0);
  REQUIRE(d.start);
  CHECK(d.gpu == 0);
}

TEST_CASE("a kernel placed on a GPU sees only that GPU, and is told not to take all of it") {
  const auto env = gpu_environment(nvml_gpu(3, "GPU-8d6f", "NVIDIA H100", 1));
  CHECK(env[0] == "CUDA_VISIBLE_DEVICES=GPU-8d6f");
  // Under the mask the GPU is ordinal 0, whatever its NVML index: the id a CTest-written
  // suite passes to torch.cuda.set_device.
  CHECK(std::find(env.begin(), env.end(), "CTEST_RESOURCE_GROUP_0_GPUS=id:0,slots:1") != env.end());
  CHECK(std::find(env.begin(), env.end(), "XLA_PYTHON_CLIENT_PREALLOCATE=false") != env.end());
  CHECK(std::find(env.begin(), env.end(), "TF_FORCE_GPU_ALLOW_GROWTH=true") != env.end());
}
