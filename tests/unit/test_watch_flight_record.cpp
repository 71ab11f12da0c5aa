#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/watch/flight_end.hpp"
#include "kwd/watch/flight_record.hpp"

using namespace kwd;
using nlohmann::json;

namespace {

constexpr std::int64_t kFlightMiB = 1 << 20;

watch::FlightRecord record() {
  watch::FlightRecord r;
  r.token = "Ab3dEf7h";
  r.host = watch::this_host();
  r.watchdog_pid = 310;
  r.watchdog_start_time = 9000;
  r.kernel_pid = 311;
  r.kernel_start_time = 9001;
  r.boot_id = "0b8e0b7c-0000-4000-8000-000000000000";
  r.kernel_started_at_ms = 1'700'000'000'000;
  r.written_at_ms = 1'700'000'060'000;
  r.kernel_id = "4f6c1a2b-9999-aaaa";
  r.connection_file = "/home/jovyan/.local/share/jupyter/runtime/kernel-4f6c1a2b-9999-aaaa.json";
  r.argv = {"python3", "-m", "ipykernel_launcher", "-f", r.connection_file};
  r.state = "busy";
  r.cell_execution_count = 7;
  r.cell_code = "features = load_everything()";
  r.cell_started_at_ms = 1'700'000'050'000;
  r.sampled_at_ms = 1'700'000'059'900;
  r.rss = 1900 * kFlightMiB;
  r.cgroup_usage = 1946 * kFlightMiB;
  r.cgroup_limit = 2048 * kFlightMiB;
  r.mem_total = 64 * 1024 * kFlightMiB;
  r.memory_cgroup_dir = "/sys/fs/cgroup/kubepods.slice/pod1/cri-abc";
  r.memory_cgroup_version = 2;
  r.cgroup_oom_kills = 0;
  return r;
}

std::string facts(const json& report) {
  std::string all;
  for (const auto& e : report["diagnosis"]["evidence"])
    all += e["fact"].get<std::string>() + "\n";
  return all;
}

}  // namespace

TEST_CASE("a flight record reads back as written") {
  const auto r = record();
  const auto back = watch::parse_flight_record(watch::to_text(r));
  REQUIRE(back);
  CHECK(back->watchdog_pid == 310);
  CHECK(back->kernel_start_time == 9001);
  CHECK(back->cell_execution_count == 7);
  CHECK(back->cell_code == r.cell_code);
  CHECK(back->cgroup_limit == 2048 * kFlightMiB);
  CHECK(back->memory_cgroup_version == 2);
  REQUIRE(back->cgroup_oom_kills);
  CHECK(*back->cgroup_oom_kills == 0);
  CHECK(back->argv == r.argv);
  CHECK(back->token == "Ab3dEf7h");
  CHECK(watch::flight_record_name(r) == ".flight-311-310-Ab3dEf7h");
}

TEST_CASE("a damaged or foreign flight record is read as none") {
  CHECK_FALSE(watch::parse_flight_record(""));
  CHECK_FALSE(watch::parse_flight_record("{\"watchdog_pid\": 3"));
  CHECK_FALSE(watch::parse_flight_record("[1, 2]"));
  CHECK_FALSE(watch::parse_flight_record(R"({"watchdog_pid": "x", "kernel_pid": 2})"));
  // No processes named: nothing to look for.
  CHECK_FALSE(watch::parse_flight_record(
      R"({"watchdog_pid": 0, "watchdog_start_time": 1, "kernel_pid": 2, "kernel_start_time": 1})"));
}

TEST_CASE("the memory step moves by tenths, then by hundredths near the limit") {
  auto r = record();
  r.cgroup_usage = 900 * kFlightMiB;  // 43 %
  CHECK(watch::memory_step(r) == 0);
  r.cgroup_usage = 1100 * kFlightMiB;  // 53 %
  CHECK(watch::memory_step(r) == 50);
  r.cgroup_usage = 1200 * kFlightMiB;  // 58 %: the same tenth, no rewrite due
  CHECK(watch::memory_step(r) == 50);
  r.cgroup_usage = 1900 * kFlightMiB;  // 92 %
  CHECK(watch::memory_step(r) == 92);
  r.cgroup_usage = 2048 * kFlightMiB;
  CHECK(watch::memory_step(r) == 100);
  // Without a cgroup limit the machine's memory is the limit, against the tree's RSS.
  r.cgroup_limit = timeline::kUnknown;
  r.rss = 60 * 1024 * kFlightMiB;
  CHECK(watch::memory_step(r) == 93);
  r.mem_total = timeline::kUnknown;
  CHECK(watch::memory_step(r) == -1);
}

TEST_CASE("a flight record is rewritten for a new cell or memory step, not per sample") {
  const auto written = record();
  auto now = written;
  now.rss += kFlightMiB;
  now.sampled_at_ms += 100;
  now.state = "idle";  // busy and idle flip with every request: no news alone
  CHECK_FALSE(watch::flight_cell_changed(written, now));
  CHECK_FALSE(watch::flight_memory_changed(written, now));
  now = written;
  now.cell_execution_count = 8;
  CHECK(watch::flight_cell_changed(written, now));
  now = written;
  now.end_requested = true;
  CHECK(watch::flight_cell_changed(written, now));
  now = written;
  now.cgroup_usage = 2000 * kFlightMiB;  // 95 % -> 97 %
  CHECK_FALSE(watch::flight_cell_changed(written, now));
  CHECK(watch::flight_memory_changed(written, now));
  // Far from the limit: the tree's memory moving by a quarter is news, a little is not.
  auto far = written;
  far.cgroup_limit = timeline::kUnknown;
  far.rss = 300 * kFlightMiB;
  now = far;
  now.rss = 350 * kFlightMiB;
  CHECK_FALSE(watch::flight_memory_changed(far, now));
  now.rss = 380 * kFlightMiB;
  CHECK(watch::flight_memory_changed(far, now));
}

TEST_CASE("a kernel the OOM killer took with its watchdog is reported as such, from its record") {
  watch::FlightEnd end;
  end.record = record();
  end.found_ms = end.record.written_at_ms + 30'000;
  end.cgroup_oom_kills_now = 2;
  end.kernel_log.readable = true;
  end.kernel_log.kills = {{310, end.record.written_at_ms + 400, 20 * kFlightMiB},
                          {311, end.record.written_at_ms + 900, 2040 * kFlightMiB}};
  const auto r = watch::flight_end_report(end, "id-1");
  CHECK(r["diagnosis"]["cause"] == "oom_killed_cgroup");
  CHECK(r["diagnosis"]["confidence"] == "high");
  const std::string headline = r["diagnosis"]["headline"];
  CHECK(headline ==
        "Killed by the OOM killer together with its watchdog (their whole cgroup) at 1.9 GiB "
        "of its cgroup's 2.0 GiB, while cell [7] ran");
  CHECK(r["termination"]["signal"] == 9);
  CHECK(r["kernel"]["died_at_ms"] == end.record.written_at_ms + 900);
  CHECK(r["execution"]["cell_in_flight"]["execution_count"] == 7);
  CHECK(r["execution"]["cell_in_flight"]["running_for_s"] == 10.0);
  CHECK(r["memory"]["samples"]["cgroup_usage"][0] == 1946 * kFlightMiB);
  const auto f = facts(r);
  CHECK_THAT(f, Catch::Contains("killed the kernel (pid 311)"));
  CHECK_THAT(f, Catch::Contains("killed its watchdog (pid 310)"));
  CHECK_THAT(f, Catch::Contains("went from 0 to 2"));
}

TEST_CASE("only the cgroup's counter says OOM: the cause stands, with less confidence") {
  watch::FlightEnd end;
  end.record = record();
  end.cgroup_oom_kills_now = 1;
  end.kernel_log.why_not = "/dev/kmsg: Permission denied";
  const auto r = watch::flight_end_report(end, "id-2");
  CHECK(r["diagnosis"]["cause"] == "oom_killed_cgroup");
  CHECK(r["diagnosis"]["confidence"] == "medium");
  CHECK(r["termination"]["kind"] == "unknown");
  const std::string missing = r["diagnosis"]["missing"].dump();
  CHECK_THAT(missing, Catch::Contains("kernel log: /dev/kmsg: Permission denied"));
}

TEST_CASE("a kernel ended together with its watchdog with no sign of OOM is not guessed at") {
  watch::FlightEnd end;
  end.record = record();
  end.record.cgroup_usage = 700 * kFlightMiB;
  end.record.rss = 650 * kFlightMiB;
  end.cgroup_oom_kills_now = std::nullopt;  // the container's cgroup went with it
  end.kernel_log.readable = true;
  const auto r = watch::flight_end_report(end, "id-3");
  CHECK(r["diagnosis"]["cause"] == "unknown");
  CHECK(r["diagnosis"]["headline"] ==
        "Kernel ended together with its watchdog; how is not known (last seen at 700.0 MiB of "
        "its cgroup's 2.0 GiB, while cell [7] ran)");
  const std::string missing = r["diagnosis"]["missing"].dump();
  CHECK_THAT(missing, Catch::Contains("gone, or its OOM-kill counter not readable"));
  CHECK_THAT(missing, Catch::Contains("how the kernel ended"));
  // Nothing of the record is lost: the kernel, the cell, the memory.
  CHECK(r["kernel"]["pid"] == 311);
  CHECK(r["kernel"]["kernel_id"] == "4f6c1a2b-9999-aaaa");
  CHECK(r["execution"]["cell_in_flight"]["code"] == "features = load_everything()");
}

TEST_CASE("a kernel that was idle with no cell is reported without one") {
  watch::FlightEnd end;
  end.record = record();
  end.record.state = "idle";
  end.record.cell_execution_count = -1;
  end.record.cell_started_at_ms = -1;
  const auto r = watch::flight_end_report(end, "id-4");
  CHECK(r["execution"]["cell_in_flight"].is_null());
  const std::string headline = r["diagnosis"]["headline"];
  CHECK(headline.find("cell") == std::string::npos);
}

TEST_CASE("both ended at the brink of the cgroup's limit with no record of the kill: likely OOM") {
  watch::FlightEnd end;
  end.record = record();
  end.record.cgroup_usage = 2000 * kFlightMiB;  // 97 %
  end.kernel_log.why_not =
      "its pids are a container's (another pid namespace), not the kernel log's";
  const auto r = watch::flight_end_report(end, "id-5");
  CHECK(r["diagnosis"]["cause"] == "oom_killed_cgroup");
  CHECK(r["diagnosis"]["confidence"] == "low");
  const std::string headline = r["diagnosis"]["headline"];
  CHECK_THAT(headline, Catch::StartsWith("Most likely killed by the OOM killer together with its "
                                         "watchdog (their whole cgroup) at 2.0 GiB"));
  CHECK_THAT(facts(r), Catch::Contains("at 97 % of its limit"));
  CHECK_THAT(r["diagnosis"]["missing"].dump(), Catch::Contains("inferred from the last reading"));
  CHECK(r["watchdog"]["pid"] == 310);  // the watchdog its manager knew, not the one reporting
}
