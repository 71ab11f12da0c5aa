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
