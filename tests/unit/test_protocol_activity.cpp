#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "kwd/protocol/kernel_activity.hpp"

using kwd::protocol::KernelActivity;
using kwd::protocol::Message;
using nlohmann::json;

namespace {

Message msg(const std::string& type, const std::string& parent, json content) {
  Message m;
  m.msg_type = type;
  m.msg_id = type + "-" + parent;
  m.parent_msg_id = parent;
  m.parent_msg_type = "execute_request";
  m.content = std::move(content);
  m.content_bytes = m.content.dump().size();
  return m;
}

kwd::timeline::MemorySample rss(std::int64_t t_ms, std::int64_t bytes) {
  kwd::timeline::MemorySample s;
  s.t_ms = t_ms;
  s.rss = bytes;
  return s;
}

constexpr std::int64_t MB = 1 << 20;

// An RSS sample carrying a GPU reading taken at `gpu_at_ms` (the NVML thread's own time).
kwd::timeline::MemorySample sample(std::int64_t t_ms, std::int64_t gpu_bytes,
                                   std::int64_t gpu_at_ms) {
  auto s = rss(t_ms, 700 * MB);
  s.gpu_used = gpu_bytes;
  s.gpu_sampled_at_ms = gpu_at_ms;
  return s;
}

// One cell: busy, execute_input, outputs..., idle.
void run_cell(KernelActivity& a, const std::string& req, int count, const std::string& code,
              std::int64_t t0, std::int64_t t1) {
  a.on_message(msg("status", req, {{"execution_state", "busy"}}), t0);
  a.on_message(msg("execute_input", req, {{"code", code}, {"execution_count", count}}), t0);
  a.on_message(msg("status", req, {{"execution_state", "idle"}}), t1);
}

}  // namespace

TEST_CASE("cells get their code, count, duration and memory delta") {
  KernelActivity a(10);
  a.on_memory_sample(rss(900, 100 * MB));
  run_cell(a, "r1", 1, "x = 1", 1000, 1500);
  a.on_memory_sample(rss(1550, 101 * MB));  // the first sample after cell 1 ended

  a.on_message(msg("status", "r2", {{"execution_state", "busy"}}), 2000);
  a.on_message(msg("execute_input", "r2", {{"code", "big = alloc()"}, {"execution_count", 2}}),
               2000);
  a.on_memory_sample(rss(2100, 600 * MB));
  a.on_memory_sample(rss(2200, 1200 * MB));
  a.on_message(msg("status", "r2", {{"execution_state", "idle"}}), 2250);
  a.on_memory_sample(rss(2300, 1150 * MB));

  a.on_message(msg("status", "r3", {{"execution_state", "busy"}}), 3000);
  a.on_message(msg("execute_input", "r3", {{"code", "crash()"}, {"execution_count", 3}}), 3000);

  const json e = a.to_json(7000);
  CHECK(e["state_at_death"] == "busy");
  CHECK(e["shutdown_requested"] == false);
  const auto& flight = e["cell_in_flight"];
  REQUIRE(flight.is_object());
  CHECK(flight["execution_count"] == 3);
  CHECK(flight["code"] == "crash()");
  CHECK(flight["started_at_ms"] == 3000);
  CHECK(flight["running_for_s"] == Approx(4.0));
  CHECK(flight["rss_at_start"] == 1150 * MB);

  const auto& last = e["last_cells"];
  REQUIRE(last.size() == 2);
  CHECK(last[0]["execution_count"] == 1);
  CHECK(last[0]["duration_s"] == Approx(0.5));
  CHECK(last[0]["rss_delta"] == 1 * MB);
  CHECK(last[0]["status"] == "ok");
  CHECK(last[1]["execution_count"] == 2);
  CHECK(last[1]["code"] == "big = alloc()");
  CHECK(last[1]["rss_start"] == 101 * MB);
  CHECK(last[1]["rss_end"] == 1150 * MB);
  CHECK(last[1]["rss_peak"] == 1200 * MB);
  CHECK(last[1]["rss_delta"] == 1049 * MB);
  CHECK(last[1]["ended_at_ms"] == 2250);
}

TEST_CASE("cells get their GPU memory like their RSS: start, end, peak and delta") {
  const auto sample = [](std::int64_t t_ms, std::int64_t rss_bytes, std::int64_t gpu_bytes) {
    auto s = rss(t_ms, rss_bytes);
    s.gpu_used = gpu_bytes;
    return s;
  };
  KernelActivity a(10);
  a.on_memory_sample(sample(900, 100 * MB, 0));
  run_cell(a, "r1", 1, "import torch", 1000, 1500);
  a.on_memory_sample(sample(1550, 300 * MB, 500 * MB));  // the CUDA context

  a.on_message(msg("status", "r2", {{"execution_state", "busy"}}), 2000);
  a.on_message(msg("execute_input", "r2", {{"code", "x = torch.ones(n)"}, {"execution_count", 2}}),
               2000);
  a.on_memory_sample(sample(2100, 310 * MB, 4500 * MB));
  a.on_memory_sample(sample(2200, 310 * MB, 2500 * MB));  // a temporary freed again
  a.on_message(msg("status", "r2", {{"execution_state", "idle"}}), 2250);
  a.on_memory_sample(sample(2300, 310 * MB, 2500 * MB));

  a.on_message(msg("status", "r3", {{"execution_state", "busy"}}), 3000);
  a.on_message(msg("execute_input", "r3", {{"code", "y = x @ x"}, {"execution_count", 3}}), 3000);
  a.on_memory_sample(sample(3100, 310 * MB, 7000 * MB));

  const json e = a.to_json(4000);
  const auto& last = e["last_cells"];
  REQUIRE(last.size() == 2);
  CHECK(last[0]["gpu_start"] == 0);
  CHECK(last[0]["gpu_end"] == 500 * MB);
  CHECK(last[0]["gpu_delta"] == 500 * MB);
  CHECK(last[1]["gpu_start"] == 500 * MB);
  CHECK(last[1]["gpu_peak"] == 4500 * MB);
  CHECK(last[1]["gpu_end"] == 2500 * MB);
  CHECK(last[1]["gpu_delta"] == 2000 * MB);
  CHECK(last[1]["rss_delta"] == 10 * MB);
  const auto& flight = e["cell_in_flight"];
  CHECK(flight["gpu_at_start"] == 2500 * MB);
  CHECK(flight["gpu_peak"] == 7000 * MB);
}

// As recorded on an H200: the GPU is sampled at 2 Hz on its own thread, so the RSS samples
// around a short cell carry a GPU reading taken before it. Cell 1 allocated 30 GiB and ended
// before the GPU was sampled again; cell 2 started at once. The 30 GiB are cell 1's.
TEST_CASE("a cell's GPU memory is the GPU sample taken after its end, at the GPU's own rate") {
  constexpr std::int64_t GB = 1024 * MB;
  KernelActivity a(10);
  a.on_memory_sample(sample(900, 0, 800));
  a.on_message(msg("status", "r1", {{"execution_state", "busy"}}), 1000);
  a.on_message(
      msg("execute_input", "r1", {{"code", "x = torch.empty(30 << 30)"}, {"execution_count", 1}}),
      1000);
  a.on_memory_sample(sample(1100, 0, 800));  // RSS samples with the old GPU reading
  a.on_memory_sample(sample(1200, 0, 800));
  a.on_message(msg("status", "r1", {{"execution_state", "idle"}}), 1250);
  a.on_memory_sample(sample(1260, 0, 800));
  run_cell(a, "r2", 2, "time.sleep(1.2)", 1270, 2500);  // no GPU sample before it started
  a.on_memory_sample(sample(1300, 30 * GB, 1290));      // the first one after cell 1's end
  a.on_memory_sample(sample(2600, 30 * GB, 2550));
  a.on_message(msg("status", "r3", {{"execution_state", "busy"}}), 2700);
  a.on_message(msg("execute_input", "r3", {{"code", "y = 1"}, {"execution_count", 3}}), 2700);

  const json e = a.to_json(3000);
  const auto& last = e["last_cells"];
  REQUIRE(last.size() == 2);
  CHECK(last[0]["gpu_start"] == 0);
  CHECK(last[0]["gpu_end"] == 30 * GB);
  CHECK(last[0]["gpu_delta"] == 30 * GB);
  CHECK(last[0]["gpu_peak"] == 30 * GB);
  CHECK(last[1]["gpu_start"] == 30 * GB);  // cell 1's end, not the stale reading before it
  CHECK(last[1]["gpu_delta"] == 0);
  CHECK(e["cell_in_flight"]["gpu_at_start"] == 30 * GB);

  // While cell 2 runs, before that GPU sample came, the newest reading stands for the
  // boundary (provisional); the sample, when it comes, settles it.
  KernelActivity b(10);
  b.on_memory_sample(sample(900, 0, 800));
  run_cell(b, "r1", 1, "x = alloc()", 1000, 1250);
  b.on_message(msg("status", "r2", {{"execution_state", "busy"}}), 1270);
  b.on_message(msg("execute_input", "r2", {{"code", "time.sleep(1.2)"}, {"execution_count", 2}}),
               1270);
  const json early = b.to_json(1280);
  CHECK(early["last_cells"][0]["gpu_delta"] == 0);
  CHECK(early["cell_in_flight"]["gpu_at_start"] == 0);
  b.on_memory_sample(sample(1300, 30 * GB, 1290));
  const json later = b.to_json(1400);
  CHECK(later["last_cells"][0]["gpu_delta"] == 30 * GB);
  CHECK(later["cell_in_flight"]["gpu_at_start"] == 30 * GB);
}

// The link between a cell's end and the next one's start does not depend on the finished
// cells kept (--last-cells 0 keeps none; 1 pushes the previous one out), and a boundary with
// no GPU reading before the next cell also ended cannot be told (null), not guessed.
TEST_CASE("GPU boundaries: kept cells do not matter, and an unreadable boundary is null") {
  for (const std::size_t kept : {0, 1}) {
    INFO("last cells kept: " << kept);
    KernelActivity a(kept);
    a.on_memory_sample(sample(900, 0, 900));
    run_cell(a, "r1", 1, "x = alloc(3 GiB)", 1000, 1010);
    run_cell(a, "r2", 2, "y = 1", 1011, 1020);  // no GPU reading since cell 1 started
    a.on_message(msg("status", "r3", {{"execution_state", "busy"}}), 1021);
    a.on_message(msg("execute_input", "r3", {{"code", "z = 2"}, {"execution_count", 3}}), 1021);
    a.on_memory_sample(sample(1100, 3072 * MB, 1090));  // cell 2 ended before it was taken
    const json e = a.to_json(1200);
    CHECK(e["cell_in_flight"]["gpu_at_start"] == 3072 * MB);
    if (kept == 1) {
      REQUIRE(e["last_cells"].size() == 1);
      CHECK(e["last_cells"][0]["execution_count"] == 2);
      CHECK(e["last_cells"][0]["gpu_start"].is_null());  // cell 1's 3 GiB or cell 2's: unknown
      CHECK(e["last_cells"][0]["gpu_delta"].is_null());
    }
  }
  KernelActivity a(10);
  a.on_memory_sample(sample(900, 0, 900));
  run_cell(a, "r1", 1, "x = alloc(3 GiB)", 1000, 1010);
  run_cell(a, "r2", 2, "y = 1", 1011, 1020);
  a.on_memory_sample(sample(1100, 3072 * MB, 1090));
  const json e = a.to_json(1200);
  REQUIRE(e["last_cells"].size() == 2);
  CHECK(e["last_cells"][0]["gpu_end"].is_null());  // taken after cell 2 had ended too
  CHECK(e["last_cells"][0]["gpu_delta"].is_null());
  CHECK(e["last_cells"][1]["gpu_start"].is_null());
  CHECK(e["last_cells"][1]["gpu_end"] == 3072 * MB);
}

TEST_CASE("without a GPU, a cell's GPU fields are null, not zero") {
  KernelActivity a(10);
  a.on_memory_sample(rss(900, 100 * MB));
  run_cell(a, "r1", 1, "x = 1", 1000, 1500);
  a.on_memory_sample(rss(1550, 101 * MB));
  const json e = a.to_json(2000);
  REQUIRE(e["last_cells"].size() == 1);
  const auto& cell = e["last_cells"][0];
  CHECK(cell["rss_delta"] == 1 * MB);
  CHECK(cell["gpu_start"].is_null());
  CHECK(cell["gpu_end"].is_null());
  CHECK(cell["gpu_peak"].is_null());
  CHECK(cell["gpu_delta"].is_null());
}

TEST_CASE("errors mark the cell and become the last error shown") {
  KernelActivity a(10);
  a.on_message(msg("status", "r1", {{"execution_state", "busy"}}), 0);
  a.on_message(msg("execute_input", "r1", {{"code", "1/0"}, {"execution_count", 7}}), 0);
  a.on_message(msg("stream", "r1", {{"name", "stderr"}, {"text", "warning: careful\n"}}), 1);
  a.on_message(msg("error", "r1",
                   {{"ename", "ZeroDivisionError"},
                    {"evalue", "division by zero"},
                    {"traceback", {"line 1", "ZeroDivisionError: division by zero"}}}),
               2);
  a.on_message(msg("status", "r1", {{"execution_state", "idle"}}), 3);
  const json e = a.to_json(10);
  CHECK(e["state_at_death"] == "idle");
  CHECK(e["cell_in_flight"].is_null());
  REQUIRE(e["last_cells"].size() == 1);
  CHECK(e["last_cells"][0]["status"] == "error");
  CHECK(e["last_cells"][0]["outputs"]["errors"] == 1);
  CHECK(e["last_cells"][0]["outputs"]["stderr_bytes"] == 17);
  CHECK(e["last_error"]["execution_count"] == 7);
  CHECK(e["last_error"]["ename"] == "ZeroDivisionError");
  CHECK(e["last_error"]["evalue"] == "division by zero");
  CHECK(e["last_error"]["traceback"].size() == 2);
  CHECK(e["stream_stderr_tail"] == "warning: careful\n");
}

TEST_CASE("rich outputs are kept as sizes and MIME types only") {
  KernelActivity a(10);
  a.on_message(msg("execute_input", "r1", {{"code", "plot()"}, {"execution_count", 1}}), 0);
  const std::string png(5000, 'A');
  a.on_message(msg("display_data", "r1",
                   {{"data", {{"image/png", png}, {"text/plain", "<Figure>"}}},
                    {"metadata", json::object()}}),
               1);
  a.on_message(
      msg("execute_result", "r1", {{"data", {{"text/plain", "42"}}}, {"execution_count", 1}}), 2);
  a.on_message(msg("stream", "r1", {{"name", "stdout"}, {"text", "hello\n"}}), 3);
  const json e = a.to_json(5);
  const auto& out = e["cell_in_flight"]["outputs"];
  CHECK(out["displays"] == 2);
  CHECK(out["stdout_bytes"] == 6);
  REQUIRE(out["last_displays"].size() == 2);
  CHECK(out["last_displays"][0]["msg_type"] == "display_data");
  CHECK(out["last_displays"][0]["bytes"].get<std::size_t>() > 5000);
  CHECK(out["last_displays"][0]["mime_types"] == json({"image/png", "text/plain"}));
  CHECK(e.dump().find(png) == std::string::npos);  // the data itself is never kept
}

TEST_CASE("memory stays bounded: last N cells, capped code, outputs, stderr tail") {
  KernelActivity a(3);
  for (int i = 1; i <= 50; ++i)
    run_cell(a, "r" + std::to_string(i), i, "pass", i * 10, i * 10 + 5);
  a.on_message(
      msg("execute_input", "big", {{"code", std::string(200'000, 'x')}, {"execution_count", 51}}),
      1000);
  for (int i = 0; i < 100; ++i)
    a.on_message(msg("display_data", "big", {{"data", {{"text/plain", "x"}}}}), 1001);
  for (int i = 0; i < 1000; ++i)
    a.on_message(msg("stream", "big", {{"name", "stderr"}, {"text", std::string(100, 'e')}}), 1002);
  const json e = a.to_json(2000);
  REQUIRE(e["last_cells"].size() == 3);
  CHECK(e["last_cells"][0]["execution_count"] == 48);
  CHECK(e["last_cells"][2]["execution_count"] == 50);
  CHECK(e["cell_in_flight"]["code"].get<std::string>().size() == 64 * 1024);
  CHECK(e["cell_in_flight"]["code_truncated"] == true);
  CHECK(e["cell_in_flight"]["outputs"]["displays"] == 100);
  CHECK(e["cell_in_flight"]["outputs"]["last_displays"].size() == 5);
  CHECK(e["cell_in_flight"]["outputs"]["stderr_bytes"] == 100'000);
  CHECK(e["stream_stderr_tail"].get<std::string>().size() == 8 * 1024);
}

TEST_CASE("shutdown_reply marks a requested shutdown") {
  KernelActivity a(10);
  CHECK_FALSE(a.shutdown_requested());
  a.on_message(msg("shutdown_reply", "s1", {{"status", "ok"}, {"restart", false}}), 0);
  CHECK(a.shutdown_requested());
  CHECK(a.to_json(1)["shutdown_requested"] == true);
}

TEST_CASE("an execute_input while a cell is in flight closes that one as unknown") {
  KernelActivity a(10);
  a.on_message(msg("execute_input", "r1", {{"code", "a"}, {"execution_count", 1}}), 0);
  a.on_message(msg("execute_input", "r2", {{"code", "b"}, {"execution_count", 2}}), 10);
  // An idle for some other request ends nothing.
  a.on_message(msg("status", "kernel-info", {{"execution_state", "idle"}}), 11);
  const json e = a.to_json(20);
  REQUIRE(e["last_cells"].size() == 1);
  CHECK(e["last_cells"][0]["status"] == "unknown");
  CHECK(e["cell_in_flight"]["execution_count"] == 2);
}

TEST_CASE("a cell that dies before its execute_input got out is still the cell in flight") {
  KernelActivity a(10);
  run_cell(a, "r1", 1, "a = 1", 0, 5);
  run_cell(a, "r2", 2, "b = 2", 10, 15);
  // Busy for the third request, then nothing: the kernel crashed before publishing its input.
  a.on_message(msg("status", "r3", {{"execution_state", "busy"}}), 20);
  const json e = a.to_json(100);
  const auto& flight = e["cell_in_flight"];
  REQUIRE(flight.is_object());
  CHECK(flight["execution_count"] == 3);
  CHECK(flight["execution_count_inferred"] == true);
  CHECK(flight["code"].is_null());
  CHECK(flight["started_at_ms"] == 20);
  CHECK(e["last_cells"].size() == 2);
}

TEST_CASE("silent executions (busy and idle, no execute_input) leave no cell behind") {
  KernelActivity a(10);
  run_cell(a, "r1", 1, "a = 1", 0, 5);
  a.on_message(msg("status", "silent", {{"execution_state", "busy"}}), 10);
  a.on_message(msg("status", "silent", {{"execution_state", "idle"}}), 12);
  a.on_message(msg("status", "r2", {{"execution_state", "busy"}}), 20);
  a.on_message(msg("execute_input", "r2", {{"code", "b = 2"}, {"execution_count", 2}}), 21);
  const json e = a.to_json(30);
  REQUIRE(e["last_cells"].size() == 1);
  CHECK(e["cell_in_flight"]["execution_count"] == 2);
  CHECK(e["cell_in_flight"]["execution_count_inferred"] == false);
  CHECK(e["cell_in_flight"]["code"] == "b = 2");
  CHECK(e["cell_in_flight"]["started_at_ms"] == 20);  // from its busy, not its input
}

TEST_CASE("a cell's end is settled when the next one starts, before its memory comes in") {
  KernelActivity a(10);
  a.on_memory_sample(rss(0, 100 * MB));
  run_cell(a, "r1", 1, "a = 1", 10, 20);  // no sample between its end and the next start
  a.on_message(msg("status", "r2", {{"execution_state", "busy"}}), 21);
  a.on_message(msg("execute_input", "r2", {{"code", "big = alloc()"}, {"execution_count", 2}}), 21);
  a.on_memory_sample(rss(100, 900 * MB));  // during cell 2
  a.on_message(msg("status", "r2", {{"execution_state", "idle"}}), 150);
  a.on_memory_sample(rss(200, 1000 * MB));
  const json e = a.to_json(300);
  REQUIRE(e["last_cells"].size() == 2);
  CHECK(e["last_cells"][0]["rss_delta"] == 0);
  CHECK(e["last_cells"][0]["rss_peak"] == 100 * MB);
  CHECK(e["last_cells"][1]["rss_start"] == 100 * MB);
  CHECK(e["last_cells"][1]["rss_delta"] == 900 * MB);
}

TEST_CASE("a busy delivered late still starts the cell when the kernel made it") {
  // A cell that holds the GIL keeps ipykernel's IOPub thread from sending its busy until it
  // is done: the watchdog hears of the start after the memory has already grown.
  KernelActivity a(10);
  a.on_memory_sample(rss(1000, 100 * MB));
  run_cell(a, "r1", 1, "a = 1", 1010, 1020);
  a.on_memory_sample(rss(1100, 100 * MB));
  a.on_memory_sample(rss(1200, 700 * MB));  // cell 2 at work, unseen yet
  a.on_memory_sample(rss(1300, 1100 * MB));
  Message busy = msg("status", "r2", {{"execution_state", "busy"}});
  busy.date_us = 1150'000;   // made when the cell started...
  a.on_message(busy, 1350);  // ...received after it was done
  Message input = msg("execute_input", "r2", {{"code", "big = alloc()"}, {"execution_count", 2}});
  input.date_us = 1151'000;
  a.on_message(input, 1350);
  Message idle = msg("status", "r2", {{"execution_state", "idle"}});
  idle.date_us = 1320'000;
  a.on_message(idle, 1351);
  a.on_memory_sample(rss(1400, 1000 * MB));
  const json e = a.to_json(2000);
  REQUIRE(e["last_cells"].size() == 2);
  const auto& big = e["last_cells"][1];
  CHECK(big["started_at_ms"] == 1150);
  CHECK(big["ended_at_ms"] == 1320);
  CHECK(big["duration_s"] == Approx(0.17));
  CHECK(big["rss_start"] == 100 * MB);
  CHECK(big["rss_peak"] == 1100 * MB);
  CHECK(big["rss_end"] == 1000 * MB);
  CHECK(big["rss_delta"] == 900 * MB);
  CHECK(e["last_cells"][0]["rss_delta"] == 0);
}

TEST_CASE("a sample taken after the next cell started is not the previous cell's end") {
  // Cell 1 ends; the next sample comes only after cell 2 has started and grown, and cell 2's
  // busy arrives later still. That sample is cell 2's work, not cell 1's.
  KernelActivity a(10);
  a.on_memory_sample(rss(1000, 100 * MB));
  run_cell(a, "r1", 1, "a = 1", 1010, 1020);
  a.on_memory_sample(rss(1100, 600 * MB));  // cell 2 (from 1030) at work, unseen yet
  a.on_memory_sample(rss(1200, 1100 * MB));
  Message busy = msg("status", "r2", {{"execution_state", "busy"}});
  busy.date_us = 1030'000;
  a.on_message(busy, 1250);
  Message input = msg("execute_input", "r2", {{"code", "big = alloc()"}, {"execution_count", 2}});
  input.date_us = 1031'000;
  a.on_message(input, 1250);
  const json e = a.to_json(1300);
  REQUIRE(e["last_cells"].size() == 1);
  const auto& small = e["last_cells"][0];
  CHECK(small["rss_end"] == 100 * MB);
  CHECK(small["rss_peak"] == 100 * MB);
  CHECK(small["rss_delta"] == 0);
  CHECK(e["cell_in_flight"]["rss_at_start"] == 100 * MB);
}

TEST_CASE("a date far from the watchdog's clock is not trusted") {
  KernelActivity a(10);
  Message input = msg("execute_input", "r1", {{"code", "x"}, {"execution_count", 1}});
  input.date_us = 5'000;  // 1970: a kernel with a broken clock
  a.on_message(input, 1'700'000'000'000);
  CHECK(a.to_json(1'700'000'001'000)["cell_in_flight"]["started_at_ms"] == 1'700'000'000'000);
}

TEST_CASE("fields of the wrong type are read as not given, never thrown on") {
  // Each of these threw per message (nlohmann's value() on a wrong type): a log line and a
  // lost message for every one a buggy or forged kernel sends.
  KernelActivity a(10);
  CHECK_NOTHROW(a.on_message(msg("stream", "r1", {{"name", 5}, {"text", "x"}}), 1000));
  CHECK_NOTHROW(a.on_message(msg("stream", "r1", {{"name", "stderr"}, {"text", 7}}), 1000));
  CHECK_NOTHROW(a.on_message(msg("status", "r1", {{"execution_state", nullptr}}), 1000));
  CHECK_NOTHROW(a.on_message(msg("error", "r1", {{"ename", 1}, {"evalue", json::array()}}), 1000));
  CHECK_NOTHROW(a.on_message(msg("stream", "r1", json::array({1, 2})), 1000));
  a.on_message(msg("stream", "r1", {{"name", "stderr"}, {"text", "kept\n"}}), 1000);
  CHECK(a.stderr_tail() == "kept\n");
  REQUIRE(a.last_error());
  CHECK(a.last_error()->ename.empty());
}

// "Run all": the kernel announces cell 3 (through the shim's pipe) before IOPub's idle of
// cell 2 reaches the watchdog. Cell 2 did run to its end: that idle, late, says so (a cell
// left "unknown" does not count as one the kernel went on from).
TEST_CASE("a cell closed by the next one's announcement is ok when its late idle comes") {
  KernelActivity a(10);
  run_cell(a, "r1", 1, "x = 1", 1000, 1100);
  a.on_message(msg("status", "r2", {{"execution_state", "busy"}}), 1200);
  a.on_message(msg("execute_input", "r2", {{"code", "y = 2"}, {"execution_count", 2}}), 1200);
  a.on_cell_announced(3, "boom()", false, 1301);
  a.on_message(msg("status", "r2", {{"execution_state", "idle"}}), 1300);
  const json j = a.to_json(1400);
  REQUIRE(j["last_cells"].size() == 2);
  CHECK(j["last_cells"][1]["execution_count"] == 2);
  CHECK(j["last_cells"][1]["status"] == "ok");
  CHECK(j["cell_in_flight"]["execution_count"] == 3);
}

// The same with a quick cell: the kernel announced cells 3 and 4 before IOPub's busy of cell
// 3 came through. Cell 3 was closed by the second announcement with no request id yet; its
// late input ties it, so its output and idle still land on it.
TEST_CASE("a quick cell closed before IOPub spoke of it gets its late input, output and idle") {
  KernelActivity a(10);
  run_cell(a, "r1", 1, "x = 1", 1000, 1100);
  a.on_cell_announced(2, "y = 2", false, 1200);
  a.on_cell_announced(3, "boom()", false, 1201);
  a.on_message(msg("status", "r2", {{"execution_state", "busy"}}), 1199);
  a.on_message(msg("execute_input", "r2", {{"code", "y = 2"}, {"execution_count", 2}}), 1199);
  a.on_message(msg("error", "r2", {{"ename", "E"}, {"evalue", "v"}, {"traceback", json::array()}}),
               1200);
  a.on_message(msg("status", "r2", {{"execution_state", "idle"}}), 1200);
  json j = a.to_json(1400);
  REQUIRE(j["last_cells"].size() == 2);
  CHECK(j["last_cells"][1]["execution_count"] == 2);
  CHECK(j["last_cells"][1]["status"] == "error");
  CHECK(j["cell_in_flight"]["execution_count"] == 3);
  CHECK(j["cell_in_flight"]["code"] == "boom()");

  // Without an error, the idle alone says it ran to its end.
  a.on_cell_announced(4, "z = 3", false, 1500);
  a.on_cell_announced(5, "crash()", false, 1501);
  a.on_message(msg("status", "r4", {{"execution_state", "busy"}}), 1499);
  a.on_message(msg("execute_input", "r4", {{"code", "z = 3"}, {"execution_count", 4}}), 1499);
  a.on_message(msg("status", "r4", {{"execution_state", "idle"}}), 1500);
  j = a.to_json(1600);
  REQUIRE(j["last_cells"].back()["execution_count"] == 4);
  CHECK(j["last_cells"].back()["status"] == "ok");
  CHECK(j["cell_in_flight"]["execution_count"] == 5);
}

// The cell pipe is read in passing: a hang report (a SIGSTOP'ed kernel) read the record of
// cell 4 after IOPub had told of cell 4 from its busy to its idle. Seen in CI as last_cells
// [4, 4] (the PyPI stack); nor may a stale record close a later cell in flight.
TEST_CASE("an announcement read after IOPub told of its cell is no new cell") {
  KernelActivity a(10);
  run_cell(a, "r3", 3, "c3 = 3", 1000, 1100);
  run_cell(a, "r4", 4, "c4 = 4", 1200, 1300);
  a.on_cell_announced(3, "c3 = 3", false, 999);
  a.on_cell_announced(4, "c4 = 4", false, 1199);
  json j = a.to_json(1500);
  CHECK(j["cell_in_flight"].is_null());
  REQUIRE(j["last_cells"].size() == 2);
  CHECK(j["last_cells"][0]["execution_count"] == 3);
  CHECK(j["last_cells"][1]["execution_count"] == 4);
  CHECK(a.cells().cells_started() == 2);

  run_cell(a, "r5", 5, "c5 = 5", 1400, 1450);
  a.on_message(msg("status", "r6", {{"execution_state", "busy"}}), 1600);
  a.on_message(msg("execute_input", "r6", {{"code", "train()"}, {"execution_count", 6}}), 1600);
  a.on_cell_announced(5, "c5 = 5", false, 1399);
  j = a.to_json(1700);
  REQUIRE(j["cell_in_flight"].is_object());
  CHECK(j["cell_in_flight"]["execution_count"] == 6);
  CHECK(j["last_cells"].size() == 3);
}

// Cells run outside the history (nbval's) keep one count: a record is matched to a cell IOPub
// told of by its code too, and a new cell with the same count is a new cell.
TEST_CASE("cells outside the history share a count: records are matched by their code") {
  KernelActivity a(10);
  run_cell(a, "r1", 1, "x = 1", 1000, 1100);
  a.on_cell_announced(1, "x = 1", false, 999);  // late: IOPub told of it
  CHECK(a.to_json(1150)["cell_in_flight"].is_null());
  a.on_cell_announced(1, "os.abort()", false, 1200);  // the next cell, dying at once
  const json j = a.to_json(1250);
  REQUIRE(j["cell_in_flight"].is_object());
  CHECK(j["cell_in_flight"]["code"] == "os.abort()");
  CHECK(j["cell_in_flight"]["execution_count"] == 1);
}

TEST_CASE("a cell the kernel announced is the cell in flight, and IOPub's messages join it") {
  KernelActivity a(10);
  run_cell(a, "r1", 1, "x = 1", 1000, 1100);
  // The kernel dies within milliseconds of starting cell 2: only its announcement arrived.
  a.on_cell_announced(2, "crash()", false, 2000);
  json j = a.to_json(2050);
  REQUIRE(j["cell_in_flight"].is_object());
  CHECK(j["cell_in_flight"]["execution_count"] == 2);
  CHECK(j["cell_in_flight"]["code"] == "crash()");
  CHECK(j["cell_in_flight"]["execution_count_inferred"] == false);
  CHECK(j["cell_in_flight"]["announced_by_kernel"] == true);

  // When IOPub does speak (late), its busy, input and idle are the same cell, not a second.
  a.on_message(msg("status", "r2", {{"execution_state", "busy"}}), 1990);
  a.on_message(msg("execute_input", "r2", {{"code", "crash()"}, {"execution_count", 2}}), 1995);
  CHECK(a.cells().cells_started() == 2);
  a.on_message(msg("status", "r2", {{"execution_state", "idle"}}), 2300);
  j = a.to_json(2400);
  CHECK(j["cell_in_flight"].is_null());
  REQUIRE(j["last_cells"].size() == 2);
  CHECK(j["last_cells"][1]["execution_count"] == 2);
  CHECK(j["last_cells"][1]["status"] == "ok");

  // A late busy and input of an execution before the announced cell do not displace it.
  a.on_cell_announced(3, "train()", false, 3000);
  a.on_message(msg("status", "silent", {{"execution_state", "busy"}}), 2900);
  a.on_message(msg("execute_input", "silent", {{"code", "old()"}, {"execution_count", 2}}), 2900);
  a.on_message(msg("status", "silent", {{"execution_state", "idle"}}), 2950);
  j = a.to_json(3100);
  REQUIRE(j["cell_in_flight"].is_object());
  CHECK(j["cell_in_flight"]["execution_count"] == 3);
  CHECK(j["cell_in_flight"]["code"] == "train()");
}

TEST_CASE("the kernel is ready at its first status other than starting, by the watchdog's clock") {
  KernelActivity a(5);
  CHECK_FALSE(a.ready_at_ms());
  a.on_message(msg("status", "", {{"execution_state", "starting"}}), 1000);
  CHECK(a.execution_state() == "starting");
  CHECK_FALSE(a.ready_at_ms());
  auto kernel_info = msg("status", "k1", {{"execution_state", "busy"}});
  kernel_info.parent_msg_type = "kernel_info_request";
  // Made 400 ms before it was read (a trusted date: cells are placed by it): readiness is
  // compared with memory samples, which are the watchdog's, so it takes the reading time.
  kernel_info.date_us = 1'100'000;
  a.on_message(kernel_info, 1500);
  REQUIRE(a.ready_at_ms());
  CHECK(*a.ready_at_ms() == 1500);
  run_cell(a, "r1", 1, "x = 1", 2000, 2100);
  CHECK(*a.ready_at_ms() == 1500);  // the first, not the last
}
