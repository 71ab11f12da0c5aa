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

// What a run of samples shows: ten a second, the refault counter read once a second (as the
// probe reads memory.stat).
struct Spell {
  std::int64_t usage = kLimit;
  std::int64_t file_cache = 2 * kMiB;
  std::int64_t refaults_per_second = 275;
  std::int64_t wall_offset_ms = 0;  // the wall clock: the steady one shifted by this
};

Spell spell_of(std::int64_t refaults_per_second, std::int64_t file_cache = 2 * kMiB,
               std::int64_t usage = kLimit, std::int64_t wall_offset_ms = 0) {
  Spell s;
  s.usage = usage;
  s.file_cache = file_cache;
  s.refaults_per_second = refaults_per_second;
  s.wall_offset_ms = wall_offset_ms;
  return s;
}

// `seconds` of `spell` from `from_ms` (steady clock); the first spell's facts, if any.
std::optional<Thrashing> feed(ThrashGuard& guard, std::int64_t from_ms, int seconds,
                              const Spell& spell, std::int64_t& refaults) {
  std::optional<Thrashing> fired;
  for (int tick = 0; tick < seconds * 10; ++tick) {
    if (tick % 10 == 0) refaults += spell.refaults_per_second;
    const std::int64_t steady = from_ms + tick * 100;
    const auto sample = at(steady + spell.wall_offset_ms, spell.usage, spell.file_cache, refaults);
    if (auto facts = guard.observe(sample, steady); facts && !fired) fired = facts;
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
  CHECK_FALSE(feed(guard, 0, 29, {}, refaults));
  const auto spell = feed(guard, 29'000, 5, {}, refaults);
  REQUIRE(spell);
  CHECK(spell->since_ms == 0);
  CHECK(spell->at_ms >= 30'000);
  CHECK(spell->at_ms <= 31'000);
  CHECK(spell->seconds == Approx(static_cast<double>(spell->at_ms) / 1000.0));
  CHECK(spell->limit == kLimit);
  CHECK(spell->most_file_cache == 2 * kMiB);
  CHECK(spell->refaults_per_second >= 250);
  CHECK(spell->refaults_per_second <= 300);
  // Once: the kernel is being ended.
  CHECK_FALSE(feed(guard, 34'000, 40, {}, refaults));
}

TEST_CASE("what is no thrash is never ended", "[thrash]") {
  std::int64_t refaults = 0;
  ThrashGuard guard(std::chrono::seconds(30));
  SECTION("full and quiet: at the limit, nothing read back") {
    CHECK_FALSE(feed(guard, 0, 300, spell_of(0), refaults));
  }
  SECTION("streaming a file through a large page cache at the limit") {
    CHECK_FALSE(feed(guard, 0, 300, spell_of(5000, 900 * kMiB), refaults));
  }
  SECTION("re-reading a dataset, epoch after epoch, through the room it left itself") {
    // Measured at a 512M limit with 472 MiB of arrays held: 30-38 MiB of cache, 150000 pages
    // read back a second, its code safe in that cache. Busy, not stuck.
    CHECK_FALSE(feed(guard, 0, 300, spell_of(150'000, 30 * kMiB), refaults));
  }
  SECTION("reading back under the limit (memory was freed)") {
    CHECK_FALSE(feed(guard, 0, 300, spell_of(5000, 2 * kMiB, kLimit - 200 * kMiB), refaults));
  }
  SECTION("reading back too little to matter") {
    CHECK_FALSE(feed(guard, 0, 300, spell_of(10), refaults));
  }
  SECTION("no limit, or no memory.stat (a cgroup not the watchdog's)") {
    for (int tick = 0; tick < 3000; ++tick) {
      auto s = at(tick * 100, kLimit, 2 * kMiB, tick * 100);
      s.cgroup_limit = kwd::timeline::kUnknown;
      CHECK_FALSE(guard.observe(s, tick * 100));
      s = at(tick * 100, kLimit, kwd::timeline::kUnknown, kwd::timeline::kUnknown);
      CHECK_FALSE(guard.observe(s, tick * 100));
    }
  }
}

TEST_CASE("a spell is unbroken: a break or a quiet stretch starts the clock again", "[thrash]") {
  std::int64_t refaults = 0;
  ThrashGuard guard(std::chrono::seconds(30));
  SECTION("a sample under the limit") {
    CHECK_FALSE(feed(guard, 0, 20, {}, refaults));
    CHECK_FALSE(guard.observe(at(20'000, kLimit - 100 * kMiB, 2 * kMiB, refaults), 20'000));
    CHECK_FALSE(feed(guard, 20'100, 25, {}, refaults));
    const auto spell = feed(guard, 45'100, 10, {}, refaults);
    REQUIRE(spell);
    CHECK(spell->since_ms == 20'100);
  }
  SECTION("an hour squeezed and quiet, then a burst: not a spell yet") {
    CHECK_FALSE(feed(guard, 0, 3600, spell_of(0), refaults));
    CHECK_FALSE(feed(guard, 3'600'000, 2, spell_of(20'000), refaults));
    CHECK_FALSE(feed(guard, 3'602'000, 10, spell_of(0), refaults));
  }
}

TEST_CASE("the spell is timed by the steady clock: a step of the wall clock changes nothing",
          "[thrash]") {
  std::int64_t refaults = 0;
  ThrashGuard guard(std::chrono::seconds(30));
  CHECK_FALSE(feed(guard, 0, 10, {}, refaults));
  // The wall clock goes back an hour, then forward two: neither ends the spell nor fakes one.
  CHECK_FALSE(feed(guard, 10'000, 10, spell_of(275, 2 * kMiB, kLimit, -3'600'000), refaults));
  CHECK_FALSE(feed(guard, 20'000, 9, spell_of(275, 2 * kMiB, kLimit, 7'200'000), refaults));
  const auto spell = feed(guard, 29'000, 3, spell_of(275, 2 * kMiB, kLimit, 7'200'000), refaults);
  REQUIRE(spell);
  CHECK(spell->seconds == Approx(30.0).margin(0.15));
  CHECK(spell->since_ms == 0);
}
