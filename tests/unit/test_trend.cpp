#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/timeline/trend.hpp"

using namespace kwd::timeline;

namespace {

// 10 Hz samples from t=0 for `seconds`, rss = f(t_ms).
template <typename F>
std::vector<MemorySample> series(double seconds, F f) {
  std::vector<MemorySample> out;
  for (std::int64_t t = 0; t <= static_cast<std::int64_t>(seconds * 1000); t += 100) {
    MemorySample s;
    s.t_ms = 1'700'000'000'000 + t;
    s.rss = f(t);
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("least-squares slope of a straight line is its rate per second") {
  const auto s = series(30, [](std::int64_t t) { return 100'000'000 + t * 2'000; });  // 2 MB/s
  const auto slope = least_squares_slope(s, &MemorySample::rss, kShortWindowMs);
  REQUIRE(slope);
  CHECK(*slope == Approx(2'000'000.0).epsilon(1e-9));
}

TEST_CASE("the 10 s and 60 s windows see different trends") {
  // Flat for 50 s, then rising at 10 MB/s for the last 10 s.
  const auto s = series(60, [](std::int64_t t) {
    return t < 50'000 ? std::int64_t{200'000'000} : 200'000'000 + (t - 50'000) * 10'000;
  });
  const auto short_slope = least_squares_slope(s, &MemorySample::rss, kShortWindowMs);
  const auto long_slope = least_squares_slope(s, &MemorySample::rss, kLongWindowMs);
  REQUIRE(short_slope);
  REQUIRE(long_slope);
  CHECK(*short_slope == Approx(10'000'000.0).epsilon(1e-6));
  CHECK(*long_slope > 0);
  CHECK(*long_slope < *short_slope / 2);
}

TEST_CASE("unknown points are skipped and too little data gives no slope") {
  auto s = series(5, [](std::int64_t t) { return t % 300 == 0 ? kUnknown : 1000 + t; });
  const auto slope = least_squares_slope(s, &MemorySample::rss, kShortWindowMs);
  REQUIRE(slope);
  CHECK(*slope == Approx(1000.0).epsilon(1e-9));
  CHECK_FALSE(least_squares_slope({}, &MemorySample::rss, kShortWindowMs));
  const auto two = series(0.1, [](std::int64_t t) { return t; });
  CHECK_FALSE(least_squares_slope(two, &MemorySample::rss, kShortWindowMs));
  // Three points within half a second: no trend to speak of.
  const auto brief = series(0.2, [](std::int64_t t) { return t; });
  CHECK_FALSE(least_squares_slope(brief, &MemorySample::rss, kShortWindowMs));
}

TEST_CASE("trends cover measured series, not the ceilings, and keep the session peak") {
  Timeline tl(1000, 10'000, 10);
  for (const auto& s0 : series(20, [](std::int64_t t) { return 50'000'000 + t * 1000; })) {
    MemorySample s = s0;
    s.cgroup_usage = s.rss + 1;
    s.cgroup_limit = 300'000'000;
    tl.add(s);
  }
  const auto trends = compute_trends(tl);
  CHECK(trends.count("rss") == 1);
  CHECK(trends.count("cgroup_usage") == 1);
  CHECK(trends.count("cgroup_limit") == 0);
  CHECK(trends.count("gpu_used") == 0);  // never measured
  CHECK(trends.at("rss").peak == 50'000'000 + 20'000 * 1000);
  CHECK(*trends.at("rss").slope_10s == Approx(1'000'000.0).epsilon(1e-9));
  const auto j = trends_to_json(trends);
  CHECK(j["rss"]["slope_60s"].get<double>() == Approx(1'000'000.0).epsilon(1e-9));
  CHECK(j["rss"]["peak"] == 70'000'000);
}

TEST_CASE("limits: the one reached first at current rates is the tightest") {
  auto s = series(20, [](std::int64_t t) { return 100'000'000 + t * 10'000; });  // 10 MB/s
  for (auto& x : s) {
    x.cgroup_limit = 400'000'000;
    x.cgroup_usage = x.rss;
    x.mem_total = 24'000'000'000;
    x.mem_available = 20'000'000'000 - (x.t_ms - s.front().t_ms) * 10'000;
    x.gpu_total = 80'000'000'000;
    x.gpu_device_used = 79'000'000'000;  // nearly full but not growing
  }
  const auto limits = compute_limits(s);
  REQUIRE(limits.all.size() == 3);
  REQUIRE(limits.tightest);
  const Limit& t = limits.all[*limits.tightest];
  CHECK(t.name == "cgroup");
  CHECK(t.bytes == 400'000'000);
  CHECK(t.used == 300'000'000);
  REQUIRE(t.time_to_limit_s);
  CHECK(*t.time_to_limit_s == Approx(10.0).epsilon(1e-6));
  const auto& mem = limits.all[1];
  CHECK(mem.name == "mem_total");
  CHECK(mem.used == 24'000'000'000 - (20'000'000'000 - 200'000'000));
  CHECK(*mem.slope == Approx(10'000'000.0).epsilon(1e-6));
  CHECK_FALSE(limits.all[2].time_to_limit_s);
  const auto j = limits_to_json(limits);
  CHECK(j["tightest"]["name"] == "cgroup");
  CHECK(j["tightest"]["bytes"] == 400'000'000);
  CHECK(j["time_to_limit_s"].get<double>() == Approx(10.0).epsilon(1e-6));
  CHECK(j["all"].size() == 3);
}

TEST_CASE("limits: with nothing growing, the least headroom is the tightest") {
  auto s = series(20, [](std::int64_t) { return std::int64_t{100'000'000}; });
  for (auto& x : s) {
    x.mem_total = 24'000'000'000;
    x.mem_available = 23'000'000'000;
    x.gpu_total = 80'000'000'000;
    x.gpu_device_used = 79'000'000'000;
  }
  const auto limits = compute_limits(s);
  REQUIRE(limits.tightest);
  CHECK(limits.all[*limits.tightest].name == "gpu_total");
  CHECK(limits_to_json(limits)["time_to_limit_s"].is_null());
  CHECK(limits_to_json(compute_limits({}))["tightest"].is_null());
}

TEST_CASE("a cgroup limit without a usage reading is measured against the tree's RSS") {
  auto s = series(10, [](std::int64_t t) { return 100'000'000 + t * 1000; });
  for (auto& x : s)
    x.cgroup_limit = 200'000'000;
  const auto limits = compute_limits(s);
  REQUIRE(limits.all.size() == 1);
  CHECK(limits.all[0].series == "rss");
  CHECK(*limits.all[0].time_to_limit_s == Approx(90.0).epsilon(1e-6));
}

TEST_CASE("limits: machine memory falling while the kernel stays flat does not make it tightest") {
  // A build beside an idle kernel in a 400 MB cgroup: the machine's memory falls fast, the
  // kernel's does not move; the cgroup has far fewer bytes left.
  auto s = series(20, [](std::int64_t) { return std::int64_t{50'000'000}; });
  for (auto& x : s) {
    x.cgroup_limit = 400'000'000;
    x.cgroup_usage = x.rss;
    x.mem_total = 24'000'000'000;
    x.mem_available = 20'000'000'000 - (x.t_ms - s.front().t_ms) * 100'000;  // 100 MB/s
  }
  const auto limits = compute_limits(s);
  REQUIRE(limits.tightest);
  CHECK(limits.all[*limits.tightest].name == "cgroup");
  CHECK_FALSE(limits.all[1].time_to_limit_s);
  // With nothing growing, fewest bytes left wins, not the smallest fraction: 350 MB of a
  // 400 MB cgroup (87 % free) is tighter than 16 GB of a 24 GB machine (67 % free).
  for (auto& x : s)
    x.mem_available = 16'000'000'000;
  CHECK(compute_limits(s).all[*compute_limits(s).tightest].name == "cgroup");
}

TEST_CASE("limits: the machine's memory falling far faster than the kernel grows is not tightest") {
  // What CI's JupyterLab test saw: a browser loading beside a kernel that grows a little
  // (1 MB/s) while the machine loses 200 MB/s; the kernel's 400 MB cgroup stays the limit
  // in question, its time from the kernel's own rate.
  auto s = series(20, [](std::int64_t t) { return 50'000'000 + t * 1000; });
  for (auto& x : s) {
    x.cgroup_limit = 400'000'000;
    x.cgroup_usage = x.rss;
    x.mem_total = 24'000'000'000;
    x.mem_available = 20'000'000'000 - (x.t_ms - s.front().t_ms) * 200'000;
  }
  auto limits = compute_limits(s);
  REQUIRE(limits.tightest);
  CHECK(limits.all[*limits.tightest].name == "cgroup");
  CHECK_FALSE(limits.all[1].time_to_limit_s);
  // The same machine fall with the kernel growing at more than a quarter of it (60 MB/s, in
  // a 2 GB cgroup): the machine's memory is approaching too, 16 GB left at 200 MB/s, and the
  // cgroup (750 MB left at 60 MB/s) is still reached first.
  for (auto& x : s) {
    x.rss = x.cgroup_usage = 50'000'000 + (x.t_ms - s.front().t_ms) * 60'000;
    x.cgroup_limit = 2'000'000'000;
  }
  limits = compute_limits(s);
  REQUIRE(limits.all[1].time_to_limit_s);
  CHECK(*limits.all[1].time_to_limit_s == Approx(80.0).epsilon(1e-6));
  REQUIRE(limits.tightest);
  CHECK(limits.all[*limits.tightest].name == "cgroup");
  CHECK(*limits.all[0].time_to_limit_s == Approx(12.5).epsilon(1e-6));
}

TEST_CASE("limits: a quarter of the machine's fall is where the kernel drives it") {
  // The machine loses 100 MB/s with 18 GB left (180 s: not soon); the kernel grows 22 or
  // 28 MB/s, in no cgroup.
  const auto with_kernel_rate = [](std::int64_t bytes_per_ms) {
    auto s = series(20, [&](std::int64_t t) { return 50'000'000 + t * bytes_per_ms; });
    for (auto& x : s) {
      x.mem_total = 24'000'000'000;
      x.mem_available = 20'000'000'000 - (x.t_ms - s.front().t_ms) * 100'000;
    }
    return compute_limits(s).all.at(0);
  };
  CHECK_FALSE(with_kernel_rate(22'000).time_to_limit_s);
  const auto driven = with_kernel_rate(28'000);
  REQUIRE(driven.time_to_limit_s);
  CHECK(*driven.time_to_limit_s == Approx(180.0).epsilon(1e-6));
}

TEST_CASE("limits: the machine running out within 30 s counts whoever drives it") {
  // Five kernels growing together: each drives a fifth of the machine's 100 MB/s fall, and
  // 2.5 GB are left (25 s). A kernel that does not grow still does not see it.
  auto s = series(20, [](std::int64_t t) { return 50'000'000 + t * 20'000; });
  for (auto& x : s) {
    x.mem_total = 24'000'000'000;
    x.mem_available = 4'500'000'000 - (x.t_ms - s.front().t_ms) * 100'000;
  }
  auto limit = compute_limits(s).all.at(0);
  REQUIRE(limit.time_to_limit_s);
  CHECK(*limit.time_to_limit_s == Approx(25.0).epsilon(1e-6));
  for (auto& x : s)
    x.rss = 50'000'000;
  CHECK_FALSE(compute_limits(s).all.at(0).time_to_limit_s);
}

TEST_CASE("a live rate is drawn from the samples after the kernel's start-up") {
  // 10 Hz from t0 for 40 s; the kernel started at t0.
  const auto s = series(40, [](std::int64_t t) { return 50'000'000 + t; });
  const std::int64_t t0 = s.front().t_ms;
  // Ready 1.5 s in: from then on.
  auto kept = after_startup(s, t0 + 1'500, t0);
  REQUIRE_FALSE(kept.empty());
  CHECK(kept.front().t_ms == t0 + 1'500);
  CHECK(kept.back().t_ms == s.back().t_ms);
  // It never said so: 30 s after its start, at the latest; and a readiness said late (IOPub
  // joined a minute in) does not push that further.
  CHECK(after_startup(s, std::nullopt, t0).front().t_ms == t0 + kStartupAtMostMs);
  CHECK(after_startup(s, t0 + 60'000, t0).front().t_ms == t0 + kStartupAtMostMs);
  // Still starting at the newest sample: that one alone (its memory, no rate).
  const auto starting = after_startup(s, std::nullopt, s.back().t_ms - 5'000);
  REQUIRE(starting.size() == 1);
  CHECK(starting[0].t_ms == s.back().t_ms);
  // A kernel found by the daemon long after its start: every sample counts.
  CHECK(after_startup(s, std::nullopt, t0 - 3'600'000).size() == s.size());
  // The wall clock stepped back an hour after the kernel said it was ready: every sample.
  CHECK(after_startup(s, s.back().t_ms + 3'600'000, t0 + 3'600'000).size() == s.size());
  CHECK(after_startup({}, t0, t0).empty());
}
