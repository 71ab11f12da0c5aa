#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kwd/report/fallback_reports.hpp"
#include "kwd/report/report_listing.hpp"
#include "kwd/report/report_store.hpp"
#include "scoped_env.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace kwd;
using kwd::test::TempDir;
using nlohmann::json;

namespace {

std::string report_for(const fs::path& meant, const std::string& id) {
  return json{{"id", id}, {report::kStoredInsteadOf, meant.string()}}.dump();
}

}  // namespace

TEST_CASE("fallback reports: listed with their store, moved into it once it takes writes") {
  TempDir root("kwd-fallback");
  const report::ReportStore store(root.path / "store");
  const report::ReportStore other(root.path / "other");
  const report::ReportStore fallback(root.path / "fallback");
  fallback.write("20260101T000000.000Z-a-1-aaaa", report_for(store.dir(), "a"));
  fallback.write("20260101T000001.000Z-b-2-bbbb", report_for(other.dir(), "b"));
  fallback.write("20260101T000002.000Z-c-3-cccc", json{{"id", "c"}}.dump());  // meant for none

  const auto waiting = report::fallback_reports_for(store, fallback.dir());
  REQUIRE(waiting.size() == 1);
  CHECK(waiting[0].id == "20260101T000000.000Z-a-1-aaaa");

  // The store cannot be made (a file stands where its directory should be): nothing moves.
  fs::create_directories(root.path);
  { std::ofstream(store.dir()) << "in the way"; }
  const auto refused = report::adopt_fallback_reports(store, fallback.dir());
  CHECK(refused.moved == 0);
  CHECK_FALSE(refused.problem.empty());
  CHECK(report::fallback_reports_for(store, fallback.dir()).size() == 1);

  fs::remove(store.dir());
  const auto adopted = report::adopt_fallback_reports(store, fallback.dir());
  CHECK(adopted.moved == 1);
  CHECK(adopted.problem.empty());
  CHECK(fs::is_regular_file(store.dir() / "20260101T000000.000Z-a-1-aaaa.json"));
  CHECK_FALSE(fs::exists(fallback.dir() / "20260101T000000.000Z-a-1-aaaa.json"));
  // Another store's and an unclaimed one stay where they are.
  CHECK(fs::exists(fallback.dir() / "20260101T000001.000Z-b-2-bbbb.json"));
  CHECK(fs::exists(fallback.dir() / "20260101T000002.000Z-c-3-cccc.json"));
  CHECK(report::fallback_reports_for(store, fallback.dir()).empty());
}

TEST_CASE("fallback reports: a move cut short after its write finishes without a second copy") {
  TempDir root("kwd-fallback");
  const report::ReportStore store(root.path / "store");
  const report::ReportStore fallback(root.path / "fallback");
  const std::string text = report_for(store.dir(), "a");
  fallback.write("20260101T000000.000Z-a-1-aaaa", text);
  store.write("20260101T000000.000Z-a-1-aaaa", text);
  CHECK(report::adopt_fallback_reports(store, fallback.dir()).moved == 1);
  CHECK(store.list().size() == 1);
  CHECK(report::fallback_reports_for(store, fallback.dir()).empty());
}

TEST_CASE("fallback reports: the store itself as the fallback, or none, is nothing to do") {
  TempDir root("kwd-fallback");
  const report::ReportStore store(root.path / "store");
  store.write("20260101T000000.000Z-a-1-aaaa", report_for(store.dir(), "a"));
  CHECK(report::fallback_reports_for(store, store.dir()).empty());
  CHECK(report::adopt_fallback_reports(store, store.dir()).moved == 0);
  CHECK(report::adopt_fallback_reports(store, root.path / "missing").moved == 0);
}

TEST_CASE("fallback reports: another user's file there is never taken") {
  if (::geteuid() != 0) {
    WARN("not run: only root can make a file another user owns");
    return;
  }
  TempDir root("kwd-fallback");
  const report::ReportStore store(root.path / "store");
  const report::ReportStore fallback(root.path / "fallback");
  const auto path = fallback.write("20260101T000000.000Z-a-1-aaaa", report_for(store.dir(), "a"));
  REQUIRE(::chown(path.c_str(), 4242, 4242) == 0);
  CHECK(report::fallback_reports_for(store, fallback.dir()).empty());
  CHECK(report::adopt_fallback_reports(store, fallback.dir()).moved == 0);
  CHECK(fs::exists(path));
}

TEST_CASE("reports list: a report waiting in the fallback location is a row of its store's") {
  TempDir root("kwd-fallback");
  const kwd::test::ScopedEnv tmpdir("TMPDIR", root.path.string());
  const report::ReportStore store(root.path / "store");
  store.write("20260101T000000.000Z-a-1-aaaa",
              json{{"id", "a"}, {"kernel", {{"died_at_ms", 1'000}}}}.dump());
  const report::ReportStore fallback(report::ReportStore::fallback_dir());
  REQUIRE(fallback.dir().string().starts_with(root.path.string()));
  auto waiting = json::parse(report_for(store.dir(), "b"));
  waiting["kernel"]["died_at_ms"] = 2'000;  // the newer death
  fallback.write("20260101T000001.000Z-b-2-bbbb", waiting.dump());
  fallback.write("20260101T000002.000Z-c-3-cccc", report_for(root.path / "elsewhere", "c"));
  const auto rows = report::list_reports(store);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].stored.id == "20260101T000001.000Z-b-2-bbbb");
  CHECK(rows[0].in_fallback);
  CHECK_FALSE(rows[1].in_fallback);
  CHECK(report::find_report(store, "20260101T000001").found->path ==
        fallback.dir() / "20260101T000001.000Z-b-2-bbbb.json");
}
