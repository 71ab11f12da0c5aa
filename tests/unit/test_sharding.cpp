#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "kwd/smoke/junit_merge.hpp"
#include "kwd/smoke/result_writers.hpp"
#include "kwd/smoke/sharding.hpp"

using namespace kwd::smoke;

namespace {

std::vector<std::string> suite(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.push_back("nb/" + std::string(1, static_cast<char>('a' + (i * 7) % 26)) +
                  std::to_string(i) + ".ipynb");
  return out;
}

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("kwd-sharding-" + std::to_string(::getpid()) + "-" +
              std::to_string(reinterpret_cast<std::uintptr_t>(&temp_dir) & 0xffff));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("a shard given as K/N is parsed strictly") {
  CHECK(parse_shard("2/4")->index == 2);
  CHECK(parse_shard("2/4")->count == 4);
  CHECK(parse_shard("1/1"));
  for (const char* bad : {"0/4", "5/4", "4", "/4", "2/", "a/b", "2/4/1", "-1/4", " 1/4", "1/0"})
    CHECK_FALSE(parse_shard(bad));
}

TEST_CASE("Every notebook is in exactly one shard, by path or by durations") {
  const auto notebooks = suite(23);
  Durations durations;
  for (std::size_t i = 0; i < notebooks.size(); i += 2)
    durations[notebook_key(notebooks[i])] = static_cast<double>(i % 5) * 10 + 1;
  for (const Durations& d : {Durations{}, durations}) {
    for (unsigned n : {1u, 2u, 3u, 4u, 30u}) {
      std::multiset<std::string> seen;
      for (unsigned k = 1; k <= n; ++k)
        for (const auto& nb : select_shard(notebooks, {k, n}, d))
          seen.insert(nb);
      CHECK(seen == std::multiset<std::string>(notebooks.begin(), notebooks.end()));
    }
  }
}

TEST_CASE("By path, shards do not depend on the order the notebooks are given in") {
  auto notebooks = suite(10);
  const auto first = select_shard(notebooks, {2, 3}, {});
  std::reverse(notebooks.begin(), notebooks.end());
  auto second = select_shard(notebooks, {2, 3}, {});
  std::reverse(second.begin(), second.end());
  CHECK(first == second);
  // "./nb/x" and "nb/x" are the same notebook.
  CHECK(notebook_key("./nb//x.ipynb") == "nb/x.ipynb");
}

TEST_CASE("Durations balance the shards: the long notebooks are spread out") {
  const std::vector<std::string> notebooks = {"a", "b", "c", "d", "e", "f"};
  const Durations durations = {{"a", 100}, {"b", 90}, {"c", 10}, {"d", 10}, {"e", 5}, {"f", 5}};
  const auto one = select_shard(notebooks, {1, 2}, durations);
  const auto two = select_shard(notebooks, {2, 2}, durations);
  const auto total = [&](const std::vector<std::string>& part) {
    double sum = 0;
    for (const auto& nb : part)
      sum += durations.at(nb);
    return sum;
  };
  CHECK(total(one) == 110);  // a + d
  CHECK(total(two) == 110);  // b + c + e + f
  // By path the same six would be a, c, e (115) against b, d, f (105).
  CHECK(select_shard(notebooks, {1, 2}, {}) == std::vector<std::string>{"a", "c", "e"});
}

TEST_CASE("The shards' JUnit files merge into one with the totals summed") {
  const auto dir = temp_dir();
  NotebookResult one;
  one.path = "nb/one.ipynb";
  one.seconds = 1.25;
  CellResult passed;
  passed.number = 1;
  passed.first_line = "x = 1";
  passed.status = CellStatus::passed;
  passed.seconds = 0.5;
  one.cells = {passed};
  NotebookResult two = one;
  two.path = "nb/two.ipynb";
  two.outcome = Outcome::failed;
  two.seconds = 2;
  CellResult failed = passed;
  failed.number = 2;
  failed.status = CellStatus::failed;
  failed.failure_type = "ZeroDivisionError";
  two.cells.push_back(failed);
  std::ofstream(dir / "shard-1.xml") << junit_xml({one});
  std::ofstream(dir / "shard-2.xml") << junit_xml({two});
  const std::string merged = merge_junit({dir / "shard-1.xml", dir / "shard-2.xml"});
  // As if one run had both.
  CHECK(merged == junit_xml({one, two}));

  std::ofstream(dir / "other.xml") << "<?xml version=\"1.0\"?>\n<testsuites name=\"pytest\">\n";
  CHECK_THROWS_WITH(merge_junit({dir / "other.xml"}), Catch::Contains("not a JUnit file"));
  const std::string whole = junit_xml({one});
  std::ofstream(dir / "cut.xml") << whole.substr(0, whole.size() - 20);
  CHECK_THROWS_WITH(merge_junit({dir / "cut.xml"}), Catch::Contains("cut short"));
  std::filesystem::remove_all(dir);
}
