#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/timeline/timeline.hpp"

using namespace kwd::timeline;

namespace {
MemorySample at(std::int64_t t, std::int64_t rss) {
  MemorySample s;
  s.t_ms = t;
  s.rss = rss;
  return s;
}
}  // namespace

TEST_CASE("Timeline keeps the recent window at full rate") {
  Timeline tl(5, 1000, 10);
  for (int i = 0; i < 3; ++i)
    tl.add(at(i * 100, i));
  auto recent = tl.recent();
  REQUIRE(recent.size() == 3);
  CHECK(recent.front().t_ms == 0);
  CHECK(recent.back().rss == 2);
  CHECK(tl.coarse().empty());
}

TEST_CASE("Samples leaving the window fold into coarse buckets without losing peaks") {
  Timeline tl(4, 1000, 3);
  // 100 ms apart; values spike at t=300.
  for (int i = 0; i < 40; ++i)
    tl.add(at(i * 100, i == 3 ? 1000 : i));
  const auto recent = tl.recent();
  REQUIRE(recent.size() == 4);
  CHECK(recent.front().t_ms == 3600);
  const auto coarse = tl.coarse();
  // Three finished buckets retained, plus the one being filled.
  REQUIRE(coarse.size() == 4);
  CHECK(coarse.back().t_ms == 3000);
  CHECK(tl.peak().rss == 1000);  // the session peak survives even after its bucket left
  for (const auto& c : coarse)
    CHECK(c.t_ms % 1000 == 0);
}

TEST_CASE("samples_to_json is column-oriented and leaves out unmeasured series") {
  std::vector<MemorySample> v{at(10, 100), at(20, 200)};
  v[1].swap = 5;
  const auto j = samples_to_json(v);
  CHECK(j["t_ms"] == nlohmann::json::array({10, 20}));
  CHECK(j["rss"] == nlohmann::json::array({100, 200}));
  CHECK(j["swap"] == nlohmann::json::array({nullptr, 5}));
  CHECK_FALSE(j.contains("gpu_used"));
}
