#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kwd/smoke/history.hpp"
#include "temp_dir.hpp"

using namespace kwd::smoke;

TEST_CASE("the history keeps seconds and peaks, merged field by field") {
  const kwd::test::TempDir dir("kwd-history");
  const auto file = dir.path / "history.json";
  CHECK(load_history(file).empty());  // none yet
  store_history(file, {{"a.ipynb", {1.5, 700 << 20, std::nullopt}}, {"b.ipynb", {2, 80 << 20, 5}}});
  // A later run that measured only b's time keeps b's peaks, and a's record whole.
  store_history(file, {{"b.ipynb", {3.25, std::nullopt, std::nullopt}}});
  const auto read = load_history(file);
  CHECK(read.at("a.ipynb").seconds == 1.5);
  CHECK(read.at("a.ipynb").peak_rss == 700 << 20);
  CHECK_FALSE(read.at("a.ipynb").peak_gpu);
  CHECK(read.at("b.ipynb").seconds == 3.25);
  CHECK(read.at("b.ipynb").peak_rss == 80 << 20);
  CHECK(read.at("b.ipynb").peak_gpu == 5);
  const auto durations = durations_of(read);
  CHECK(durations == Durations{{"a.ipynb", 1.5}, {"b.ipynb", 3.25}});
  // What is on disk is the documented second format.
  std::ifstream in(file);
  const auto on_disk = nlohmann::json::parse(in);
  CHECK(on_disk["kernel-watchdog-history"] == 2);
  CHECK(on_disk["notebooks"]["a.ipynb"]["peak_rss"] == 700 << 20);
}

TEST_CASE("a run cut short never lowers what the history holds") {
  // Seen on an H200: a notebook whose 40 GiB allocation was refused stopped at 0.5 GiB; kept as
  // its peak, the next run packed it beside three others as if it were light.
  const kwd::test::TempDir dir("kwd-history");
  const auto file = dir.path / "history.json";
  constexpr std::int64_t kGiB = std::int64_t{1} << 30;
  store_history(file, {{"heavy.ipynb", {12.3, kGiB, 40 * kGiB}}});
  store_history(file, {{"heavy.ipynb", {6.0, kGiB / 2, kGiB / 2, /*cut_short=*/true}},
                       {"new.ipynb", {2.0, kGiB / 4, kGiB / 8, /*cut_short=*/true}}});
  auto read = load_history(file);
  CHECK(read.at("heavy.ipynb").seconds == 12.3);
  CHECK(read.at("heavy.ipynb").peak_rss == kGiB);
  CHECK(read.at("heavy.ipynb").peak_gpu == 40 * kGiB);
  CHECK(read.at("new.ipynb").peak_gpu == kGiB / 8);  // a first record, even cut short
  // Cut short but higher: it needed at least that much.
  store_history(file, {{"heavy.ipynb", {20.0, 2 * kGiB, 30 * kGiB, /*cut_short=*/true}}});
  read = load_history(file);
  CHECK(read.at("heavy.ipynb").seconds == 20.0);
  CHECK(read.at("heavy.ipynb").peak_rss == 2 * kGiB);
  CHECK(read.at("heavy.ipynb").peak_gpu == 40 * kGiB);
  // A whole run says what it takes now, lower or not.
  store_history(file, {{"heavy.ipynb", {10.0, kGiB, 20 * kGiB}}});
  read = load_history(file);
  CHECK(read.at("heavy.ipynb").seconds == 10.0);
  CHECK(read.at("heavy.ipynb").peak_gpu == 20 * kGiB);
}

TEST_CASE("a durations file of the first format still reads, and is written in the new one") {
  const kwd::test::TempDir dir("kwd-history");
  const auto file = dir.write("old.json", R"({"nb/a.ipynb": 12.5, "nb/b.ipynb": 0})");
  const auto read = load_history(file);
  REQUIRE(read.size() == 2);
  CHECK(read.at("nb/a.ipynb").seconds == 12.5);
  CHECK_FALSE(read.at("nb/a.ipynb").peak_rss);
  store_history(file, {{"nb/b.ipynb", {1, 1 << 20, std::nullopt}}});
  const auto again = load_history(file);
  CHECK(again.at("nb/a.ipynb").seconds == 12.5);
  CHECK(again.at("nb/b.ipynb").peak_rss == 1 << 20);
}

TEST_CASE("a history file that is wrong is named with what is wrong") {
  const kwd::test::TempDir dir("kwd-history");
  CHECK_THROWS_WITH(load_history(dir.write("list.json", "[1, 2]")),
                    Catch::Contains("not a history file"));
  CHECK_THROWS_WITH(load_history(dir.write("word.json", R"({"a.ipynb": "slow"})")),
                    Catch::Contains("\"a.ipynb\" has no number of seconds"));
  CHECK_THROWS_WITH(
      load_history(dir.write(
          "neg.json", R"({"kernel-watchdog-history": 2, "notebooks": {"a": {"peak_rss": -1}}})")),
      Catch::Contains("\"a\": peak_rss is not a number of bytes"));
  CHECK_THROWS_WITH(
      load_history(dir.write("future.json", R"({"kernel-watchdog-history": 9, "notebooks": {}})")),
      Catch::Contains("this smoke reads 2"));
  CHECK_THROWS_WITH(load_history(dir.write("none.json", R"({"kernel-watchdog-history": 2})")),
                    Catch::Contains("no \"notebooks\" object"));
}
