#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>

#include "kwd/watch/thrash_guard.hpp"

using kwd::timeline::MemorySample;
using kwd::watch::ThrashGuard;
using kwd::watch::Thrashing;

namespace {

constexpr std::int64_t kMiB = 1 << 20;
constexpr std::int64_t kLimit = 1536 * kMiB;

// One sample of a kernel under a 1536 MiB limit.
MemorySample at(std::int64_t t_ms, std::int64_t usage, std::int64_t file_cache,
                std::int64_t refaults) {
  MemorySample s;
  s.t_ms = t_ms;
  s.cgroup_limit = kLimit;
  s.cgroup_usage = usage;
  s.cgroup_file_cache = file_cache;
  s.cgroup_refaults = refaults;
  return s;
}

// Ten samples a second from `from_ms` for `seconds`, the refault counter read once a second
// (as the probe reads memory.stat) and rising `per_second`; the first spell's facts, if any.
std::optional<Thrashing> feed(ThrashGuard& guard, std::int64_t from_ms, int seconds,
                              std::int64_t usage, std::int64_t file_cache, std::int64_t per_second,
                              std::int64_t& refaults) {
  std::optional<Thrashing> fired;
  for (int tick = 0; tick < seconds * 10; ++tick) {
    if (tick % 10 == 0) refaults += per_second;
    if (auto spell = guard.observe(at(from_ms + tick * 100, usage, file_cache, refaults));
        spell && !fired)
      fired = spell;
  }
  return fired;
}

}  // namespace

TEST_CASE("a kernel squeezed at its limit and reading its pages back is ended after the spell",
          "[thrash]") {
  // TensorFlow's cold-cache spell, as measured: usage at the limit, 1.7 MiB of page cache
  // left, 275 pages read back a second.
  ThrashGuard guard(std::chrono::seconds(30));
  std::int64_t refaults = 1000;
  CHECK_FALSE(feed(guard, 0, 29, kLimit, 2 * kMiB, 275, refaults));
  const auto spell = feed(guard, 29'000, 5, kLimit, 2 * kMiB, 275, refaults);
  REQUIRE(spell);
  CHECK(spell->since_ms == 0);
  CHECK(spell->at_ms >= 30'000);
  CHECK(spell->at_ms <= 31'000);
  CHECK(spell->limit == kLimit);
  CHECK(spell->most_file_cache == 2 * kMiB);
  CHECK(spell->refaults_per_second >= 250);
  CHECK(spell->refaults_per_second <= 300);
  // Once: the kernel is being ended.
  CHECK_FALSE(feed(guard, 34'000, 40, kLimit, 2 * kMiB, 275, refaults));
}

TEST_CASE("what is no thrash is never ended", "[thrash]") {
  std::int64_t refaults = 0;
  SECTION("full and quiet: at the limit, nothing read back") {
    ThrashGuard guard(std::chrono::seconds(30));
    CHECK_FALSE(feed(guard, 0, 300, kLimit, 2 * kMiB, 0, refaults));
  }
  SECTION("streaming a file through a large page cache at the limit") {
    ThrashGuard guard(std::chrono::seconds(30));
    CHECK_FALSE(feed(guard, 0, 300, kLimit, 900 * kMiB, 5000, refaults));
  }
  SECTION("reading back under the limit (memory was freed)") {
    ThrashGuard guard(std::chrono::seconds(30));
    CHECK_FALSE(feed(guard, 0, 300, kLimit - 200 * kMiB, 2 * kMiB, 5000, refaults));
  }
  SECTION("reading back too little to matter") {
    ThrashGuard guard(std::chrono::seconds(30));
    CHECK_FALSE(feed(guard, 0, 300, kLimit, 2 * kMiB, 20, refaults));
  }
  SECTION("no limit, or no memory.stat (a cgroup not the watchdog's)") {
    ThrashGuard guard(std::chrono::seconds(30));
    for (int tick = 0; tick < 3000; ++tick) {
      auto s = at(tick * 100, kLimit, 2 * kMiB, tick * 100);
      s.cgroup_limit = kwd::timeline::kUnknown;
      CHECK_FALSE(guard.observe(s));
      s = at(tick * 100, kLimit, kwd::timeline::kUnknown, kwd::timeline::kUnknown);
      CHECK_FALSE(guard.observe(s));
    }
  }
}

TEST_CASE("a spell is unbroken: a break or a quiet stretch starts the clock again", "[thrash]") {
  std::int64_t refaults = 0;
  SECTION("a sample under the limit") {
    ThrashGuard guard(std::chrono::seconds(30));
    CHECK_FALSE(feed(guard, 0, 20, kLimit, 2 * kMiB, 275, refaults));
    CHECK_FALSE(guard.observe(at(20'000, kLimit - 100 * kMiB, 2 * kMiB, refaults)));
    CHECK_FALSE(feed(guard, 20'100, 25, kLimit, 2 * kMiB, 275, refaults));
    const auto spell = feed(guard, 45'100, 10, kLimit, 2 * kMiB, 275, refaults);
    REQUIRE(spell);
    CHECK(spell->since_ms == 20'100);
  }
  SECTION("an hour full and quiet, then a burst: not a spell yet") {
    ThrashGuard guard(std::chrono::seconds(30));
    CHECK_FALSE(feed(guard, 0, 3600, kLimit, 2 * kMiB, 0, refaults));
    CHECK_FALSE(feed(guard, 3'600'000, 2, kLimit, 2 * kMiB, 20'000, refaults));
    CHECK_FALSE(feed(guard, 3'602'000, 10, kLimit, 2 * kMiB, 0, refaults));
  }
}
