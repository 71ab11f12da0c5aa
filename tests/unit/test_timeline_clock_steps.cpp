#include <catch2/catch.hpp>

#include "kwd/timeline/clock_steps.hpp"

using kwd::timeline::ClockSteps;

TEST_CASE("the wall clock moving with the monotonic one is no step, however late the look") {
  ClockSteps steps;
  CHECK_FALSE(steps.look(1'000'000, 50));
  CHECK_FALSE(steps.look(1'000'100, 150));
  CHECK_FALSE(steps.look(1'030'100, 30'150));  // a loop busy for 30 s: both clocks moved
  CHECK_FALSE(steps.look(1'030'700, 30'150));  // NTP's slewing stays within the tolerance
  CHECK(steps.count() == 0);
}

TEST_CASE("steps back and forward are found with their size, and the first ones kept") {
  ClockSteps steps;
  (void)steps.look(5'000'000, 0);
  const auto back = steps.look(5'000'100 - 3'600'000, 100);
  REQUIRE(back);
  CHECK(back->by_ms == -3'600'000);
  CHECK(back->at_ms == 5'000'100 - 3'600'000);
  CHECK_FALSE(steps.look(5'000'200 - 3'600'000, 200));  // measured from the new time on
  const auto forward = steps.look(5'000'300, 300);
  REQUIRE(forward);
  CHECK(forward->by_ms == 3'600'000);
  CHECK(steps.count() == 2);
  REQUIRE(steps.steps().size() == 2);
  std::int64_t wall = 5'000'300;
  for (int i = 0; i < 40; ++i) {
    wall += 10'000;
    (void)steps.look(wall, 300 + i + 1);
  }
  CHECK(steps.count() == 42);
  CHECK(steps.steps().size() == ClockSteps::kKept);
}
