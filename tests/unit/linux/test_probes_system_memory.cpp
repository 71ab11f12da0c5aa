#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/probes/linux/pressure.hpp"
#include "kwd/probes/linux/system_memory_probe.hpp"

using namespace kwd::probes;
using namespace kwd::probes::linux_proc;

TEST_CASE("PSI text is parsed, with and without the full line") {
  const auto p = parse_pressure(
      "some avg10=12.50 avg60=3.25 avg300=0.50 total=123456\n"
      "full avg10=7.00 avg60=1.00 avg300=0.10 total=65432\n");
  REQUIRE(p);
  CHECK(p->some_avg10 == Approx(12.5));
  CHECK(p->some_avg60 == Approx(3.25));
  CHECK(p->some_total_us == 123456);
  CHECK(p->has_full);
  CHECK(p->full_avg10 == Approx(7.0));
  const auto old = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  REQUIRE(old);
  CHECK_FALSE(old->has_full);
  CHECK_FALSE(parse_pressure("nonsense"));
  CHECK_FALSE(parse_pressure("some avg10=x"));
  // Found by tests/fuzz/fuzz_pressure.cpp: a total no int64 holds was converted anyway (UB).
  CHECK_FALSE(parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=1.596e88\n"));
  CHECK_FALSE(parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=nan\n"));
}

TEST_CASE("the system probe reads this machine's meminfo and pressure") {
  ProbeOptions options;
  SystemMemoryProbe probe(options);
  REQUIRE(probe.status().available);
  kwd::timeline::MemorySample s;
  probe.sample(s);
  CHECK(s.mem_total > 0);
  CHECK(s.mem_available > 0);
  CHECK(s.mem_available <= s.mem_total);
  nlohmann::json report;
  probe.contribute(report);
  const auto& sm = report["system_memory"];
  CHECK(sm["mem_total"] == s.mem_total);
  CHECK(sm["swap_total"].is_number_integer());
  CHECK(sm["swap_free"].get<std::int64_t>() <= sm["swap_total"].get<std::int64_t>());
  // This machine has PSI (/proc/pressure/memory); elsewhere psi is null.
  CHECK(sm.contains("psi"));
}
