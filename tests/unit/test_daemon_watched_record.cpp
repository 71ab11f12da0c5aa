#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/daemon/unwatched_end.hpp"
#include "kwd/daemon/watched_record.hpp"
#include "kwd/report/fallback_reports.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_store.hpp"
#include "temp_dir.hpp"

using namespace kwd;
using kwd::test::TempDir;
using nlohmann::json;

namespace {

daemon::WatchedEntry entry() {
  daemon::WatchedEntry e;
  e.pid = 4242;
  e.start_time = 123456;
  e.started_at_ms = 1'700'000'000'000;
  e.watched_since_ms = 1'700'000'001'000;
  e.kernel_id = "4f6c1a2b-9999-aaaa";
  e.connection_file = "/run/user/1000/jupyter/runtime/kernel-4f6c1a2b-9999-aaaa.json";
  e.notebook = "work/train.ipynb";
  e.kernel_name = "python3";
  e.report_dir = "";
  e.in_container = true;
  e.argv = {"python3", "-m", "ipykernel_launcher", "-f", e.connection_file};
  return e;
}

}  // namespace

TEST_CASE("the daemon's record of what it watches reads back as written") {
  daemon::WatchedRecord record;
  record.written_ms = 1'700'000'002'000;
  record.daemon_pid = 77;
  record.boot_id = "0b8e0b7c-0000-4000-8000-000000000000";
  record.kernels = {entry()};
  const auto back = daemon::parse_watched_record(daemon::to_text(record));
  REQUIRE(back);
  CHECK(back->written_ms == record.written_ms);
  CHECK(back->daemon_pid == 77);
  CHECK(back->boot_id == record.boot_id);
  REQUIRE(back->kernels.size() == 1);
  const auto& k = back->kernels[0];
  CHECK(k.pid == 4242);
  CHECK(k.start_time == 123456);
  CHECK(k.kernel_id == entry().kernel_id);
  CHECK(k.notebook == "work/train.ipynb");
  CHECK(k.in_container);
  CHECK(k.argv == entry().argv);
}

TEST_CASE("a damaged record of the daemon's is read as none, not half") {
  CHECK_FALSE(daemon::parse_watched_record(""));
  CHECK_FALSE(daemon::parse_watched_record("{not json"));
  CHECK_FALSE(daemon::parse_watched_record(R"({"kernels": 3})"));
  CHECK_FALSE(daemon::parse_watched_record(R"({"kernels": [{"pid": "x", "start_time": 1}]})"));
  const auto none = daemon::parse_watched_record(R"({"kernels": []})");
  REQUIRE(none);
  CHECK(none->kernels.empty());
}

TEST_CASE("a death reported already needs no record; a hang report is no death") {
  TempDir dir("kwd-unwatched");
  const report::ReportStore store(dir.path / "store");
  const auto k = entry();
  CHECK_FALSE(report::holds_death_report(store, k.kernel_id, k.pid));
  // Another process of the same kernel id (a restart), and another kernel with this pid.
  store.write(report::make_report_id(1, k.kernel_id, 4243), json{{"kind", "crash"}}.dump());
  store.write(report::make_report_id(2, "ffff0000-1", k.pid), json{{"kind", "crash"}}.dump());
  CHECK_FALSE(report::holds_death_report(store, k.kernel_id, k.pid));
  store.write(report::make_report_id(3, k.kernel_id, k.pid), json{{"kind", "hang"}}.dump());
  CHECK_FALSE(report::holds_death_report(store, k.kernel_id, k.pid));
  store.write(report::make_report_id(4, k.kernel_id, k.pid), json{{"kind", "crash"}}.dump());
  CHECK(report::holds_death_report(store, k.kernel_id, k.pid));
}

TEST_CASE("an unwatched end's record says when, guesses no cause, and fits the report's shape") {
  daemon::UnwatchedEnd end{entry(), 1'700'000'002'000, 1'700'000'062'000, false};
  const auto r = daemon::unwatched_end_report(end, "an-id");
  CHECK(r["kind"] == "crash");
  CHECK(r["termination"]["kind"] == "unknown");
  CHECK(r["termination"]["signal"].is_null());
  CHECK(r["diagnosis"]["cause"] == "unknown");
  CHECK(r["diagnosis"]["confidence"] == "low");
  const std::string headline = r["diagnosis"]["headline"];
  CHECK(headline ==
        "Kernel ended while kernel-watchdog's daemon was not running (between 22:13:22 UTC and "
        "22:14:22 UTC); how it ended is not known");
  CHECK(r["watchdog"]["unwatched_end"]["connection_file_present"] == false);
  CHECK(r["kernel"]["died_at_ms"].is_null());
  CHECK(r["kernel"]["notebook"] == "work/train.ipynb");
  // Not looked at (a pod's kernel): said as not known, and no evidence line about it.
  end.connection_file_present.reset();
  const auto pod = daemon::unwatched_end_report(end, "an-id");
  CHECK(pod["watchdog"]["unwatched_end"]["connection_file_present"].is_null());
  CHECK(pod["diagnosis"]["evidence"].size() == 1);
}
