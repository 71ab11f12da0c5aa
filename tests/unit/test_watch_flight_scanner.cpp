#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "kwd/platform/host.hpp"
#include "kwd/probes/process_record.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/util/unique_fd.hpp"
#include "kwd/watch/flight_end.hpp"
#include "kwd/watch/flight_evidence.hpp"
#include "kwd/watch/flight_record.hpp"
#include "temp_dir.hpp"

using namespace kwd;
using kwd::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A pid that was ours and is gone: a child, reaped.
pid_t gone_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// A record as a watchdog that died would have left it: the record and its lock, unheld.
watch::FlightRecord left_behind(const fs::path& store, const std::string& token,
                                const std::function<void(watch::FlightRecord&)>& adjust = {}) {
  watch::FlightRecord r;
  r.token = token;
  r.host = watch::this_host();
  r.boot_id = platform::boot_id();
  r.pid_namespace = watch::own_pid_namespace();
  r.watchdog_pid = gone_pid();
  r.watchdog_start_time = 1;
  r.kernel_pid = gone_pid();
  r.kernel_start_time = 2;
  r.kernel_id = "kernel-" + token;
  r.kernel_started_at_ms = 1'700'000'000'000;
  r.written_at_ms = 1'700'000'060'000;
  r.cell_execution_count = 4;
  r.cell_started_at_ms = 1'700'000'050'000;
  if (adjust) adjust(r);
  const std::string name = watch::flight_record_name(r);
  std::ofstream(store / name) << watch::to_text(r);
  std::ofstream(store / (name + std::string(watch::kFlightLockSuffix)));
  fs::permissions(store / name, fs::perms::owner_read | fs::perms::owner_write);
  return r;
}

int reports_in(const fs::path& store) {
  return static_cast<int>(report::ReportStore(store).list().size());
}

}  // namespace

TEST_CASE("a record whose watchdog is gone is reported once, and then forgotten") {
  TempDir tmp;
  const auto store = tmp.path / "reports";
  fs::create_directories(store);
  fs::permissions(store, fs::perms::owner_all);
  const auto r = left_behind(store, "gone0001");
  watch::FlightScanner scanner{report::ReportStore(store)};
  CHECK(scanner.scan() == 1);
  REQUIRE(reports_in(store) == 1);
  const auto report = report::ReportStore(store).list().front();
  CHECK(report.id.find(std::to_string(r.kernel_pid)) != std::string::npos);
  CHECK_FALSE(fs::exists(store / watch::flight_record_name(r)));
  CHECK_FALSE(fs::exists(store / (watch::flight_record_name(r) + ".lock")));
  CHECK(scanner.scan() == 0);  // nothing left, nothing twice
  CHECK(reports_in(store) == 1);
}

TEST_CASE("a record whose lock is held is a living watchdog's: left alone") {
  TempDir tmp;
  const auto store = tmp.path / "reports";
  fs::create_directories(store);
  fs::permissions(store, fs::perms::owner_all);
  const auto r = left_behind(store, "alive001");
  const auto lock_path = store / (watch::flight_record_name(r) + ".lock");
  const util::UniqueFd held(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(held);
  REQUIRE(::flock(held.get(), LOCK_EX | LOCK_NB) == 0);
  CHECK(watch::report_orphaned_flights(report::ReportStore(store)) == 0);
  CHECK(reports_in(store) == 0);
  CHECK(fs::exists(store / watch::flight_record_name(r)));
}

TEST_CASE("records of an end asked for, or of an earlier boot, go without a report") {
  TempDir tmp;
  const auto store = tmp.path / "reports";
  fs::create_directories(store);
  fs::permissions(store, fs::perms::owner_all);
  const auto asked =
      left_behind(store, "asked001", [](watch::FlightRecord& r) { r.end_requested = true; });
  const auto rebooted = left_behind(store, "boot0001", [](watch::FlightRecord& r) {
    r.boot_id = "00000000-0000-4000-8000-000000000000";
  });
  CHECK(watch::report_orphaned_flights(report::ReportStore(store)) == 0);
  CHECK(reports_in(store) == 0);
  CHECK_FALSE(fs::exists(store / watch::flight_record_name(asked)));
  CHECK_FALSE(fs::exists(store / watch::flight_record_name(rebooted)));
}

TEST_CASE("another machine's record in a shared store is not judged here") {
  TempDir tmp;
  const auto store = tmp.path / "reports";
  fs::create_directories(store);
  fs::permissions(store, fs::perms::owner_all);
  // Stale after 30 days: forgotten, still unreported.
  const auto other = left_behind(store, "host0001", [](watch::FlightRecord& r) {
    r.host = "another-node";
    r.written_at_ms = 0;
  });
  const auto fresh = left_behind(store, "host0002", [](watch::FlightRecord& r) {
    r.host = "another-node";
    r.written_at_ms = 4'000'000'000'000;  // in the future: never stale
  });
  CHECK(watch::report_orphaned_flights(report::ReportStore(store)) == 0);
  CHECK(reports_in(store) == 0);
  CHECK_FALSE(fs::exists(store / watch::flight_record_name(other)));
  CHECK(fs::exists(store / watch::flight_record_name(fresh)));
}

TEST_CASE("a kernel that outlived its watchdog is not reported while it runs") {
  TempDir tmp;
  const auto store = tmp.path / "reports";
  fs::create_directories(store);
  fs::permissions(store, fs::perms::owner_all);
  // This process stands for the kernel: it runs, with its own start.
  const auto self = probes::ProcessRecord::open(::getpid());
  REQUIRE(self);
  const auto lineage = self->lineage();
  REQUIRE(lineage);
  const auto r = left_behind(store, "kern0001", [&](watch::FlightRecord& k) {
    k.kernel_pid = ::getpid();
    k.kernel_start_time = lineage->start_time;
  });
  CHECK(watch::report_orphaned_flights(report::ReportStore(store)) == 0);
  CHECK(reports_in(store) == 0);
  CHECK(fs::exists(store / watch::flight_record_name(r)));
}
