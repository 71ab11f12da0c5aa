#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_store.hpp"

namespace fs = std::filesystem;
using namespace kwd;

TEST_CASE("report ids sort by time, name the kernel, and never repeat") {
  const auto id = report::make_report_id(1'700'000'000'042, "4f6c1a2b-9999-aaaa", 4242);
  CHECK(id.starts_with("20231114T221320.042Z-4f6c1a2b-4242-"));
  CHECK(id.size() == std::string("20231114T221320.042Z-4f6c1a2b-4242-").size() + 4);
  CHECK(report::make_report_id(0, "", 1).starts_with("19700101T000000.000Z-kernel-1-"));
  CHECK(report::make_report_id(0, "../x/y", 1).find('/') == std::string::npos);
  // The same kernel, the same millisecond (a hang report, then the crash): two names.
  CHECK(report::make_report_id(5, "k", 2) != report::make_report_id(5, "k", 2));
}

TEST_CASE("the store never replaces a report") {
  const auto dir = fs::temp_directory_path() / ("kwd-noreplace-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  report::ReportStore store(dir);
  store.write("same", R"({"id": "first"})");
  CHECK_THROWS(store.write("same", R"({"id": "second"})"));
  std::ifstream in(dir / "same.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == R"({"id": "first"})");
  fs::remove_all(dir);
}

TEST_CASE("ReportStore lists newest first and finds by id, prefix and latest") {
  const auto dir = fs::temp_directory_path() / ("kwd-store-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  report::ReportStore store(dir);
  store.prepare();
  store.write("20260101T000000Z-aaaa-1", R"({"id": "a"})");
  store.write("20260102T000000Z-bbbb-2", R"({"id": "b"})");
  std::ofstream(dir / ".tmp-999999999-x") << "{";
  const auto all = store.list();
  REQUIRE(all.size() == 2);
  CHECK(all[0].id == "20260102T000000Z-bbbb-2");
  CHECK(store.find("latest")->id == "20260102T000000Z-bbbb-2");
  CHECK(store.find("20260101")->id == "20260101T000000Z-aaaa-1");
  CHECK_FALSE(store.find("2026"));  // ambiguous
  CHECK_FALSE(store.find("nope"));
  CHECK(store.enforce_cap(1, 0) == 1);
  CHECK(store.list().size() == 1);
  fs::remove_all(dir);
}

TEST_CASE("to_text never fails on bytes that are not UTF-8") {
  nlohmann::json j;
  j["text"] = std::string("ok \xff\xfe bytes");
  CHECK(report::to_text(j).find("ok") != std::string::npos);
}

TEST_CASE("the connection file is found in every spelling kernels accept") {
  using protocol::find_connection_file;
  CHECK(find_connection_file({"python", "-m", "ipykernel_launcher", "-f", "/r/kernel-1.json"}) ==
        "/r/kernel-1.json");
  CHECK(find_connection_file({"python", "-f=/r/k.json"}) == "/r/k.json");
  CHECK(find_connection_file({"python", "--f=/r/k.json"}) == "/r/k.json");
  CHECK(find_connection_file({"python", "--connection-file", "/r/k.json"}) == "/r/k.json");
  CHECK(find_connection_file({"python", "--connection-file=/r/k.json"}) == "/r/k.json");
  CHECK_FALSE(find_connection_file({"python", "-m", "x"}));
  CHECK_FALSE(find_connection_file({"python", "-f"}));
  // IRkernel's kernelspec, and kernels that take the file as a plain argument.
  CHECK(find_connection_file({"R", "--slave", "-e", "IRkernel::main()", "--args",
                              "/r/kernel-9.json"}) == "/r/kernel-9.json");
  CHECK(find_connection_file({"/usr/lib/R/bin/exec/R", "-e", "IRkernel::main()", "--args",
                              "conn.json"}) == "conn.json");
  CHECK(find_connection_file({"julia", "-i", "/u/IJulia/src/kernel.jl", "/r/kernel-1a.json"}) ==
        "/r/kernel-1a.json");
  CHECK(find_connection_file({"evcxr_jupyter", "--control_file", "/r/k.json"}) == "/r/k.json");
  // Another program's .json argument is no connection file, nor a kernel's file named by its
  // clients and tools; a flag still wins over a name.
  CHECK_FALSE(find_connection_file({"node", "server.js", "config.json"}));
  CHECK_FALSE(find_connection_file({"julia", "kernel-.json"}));
  CHECK_FALSE(find_connection_file({"jupyter-console", "--existing", "/r/kernel-1a.json"}));
  CHECK_FALSE(find_connection_file({"/usr/bin/vim", "/r/kernel-1a.json"}));
  CHECK_FALSE(find_connection_file({"Rscript", "fit.R", "--args", "data.json"}));
  CHECK_FALSE(find_connection_file({"python3", "x.py", "--args", "data.json"}));
  CHECK(find_connection_file({"julia", "/r/kernel-2.json", "-f", "/r/k.json"}) == "/r/k.json");
  CHECK(protocol::kernel_id_from_connection_file("/run/kernel-4f6c.json") == "4f6c");
}

TEST_CASE("a relative connection file is looked for where ipykernel looks for it") {
  using protocol::resolve_connection_file;
  const fs::path base = fs::temp_directory_path() / ("kwd-cf-" + std::to_string(::getpid()));
  const fs::path work = base / "work", runtime = base / "runtime";
  fs::create_directories(work);
  fs::create_directories(runtime);
  std::ofstream(work / "here.json") << "{}";
  std::ofstream(runtime / "kernel-r.json") << "{}";
  const fs::path cwd_before = fs::current_path();
  fs::current_path(work);
  const char* runtime_before = std::getenv("JUPYTER_RUNTIME_DIR");
  const std::string saved = runtime_before != nullptr ? runtime_before : "";
  ::setenv("JUPYTER_RUNTIME_DIR", runtime.c_str(), 1);

  CHECK(resolve_connection_file("/abs/kernel-1.json") == "/abs/kernel-1.json");
  CHECK(resolve_connection_file("here.json") == (work / "here.json").string());
  CHECK(resolve_connection_file("./here.json") == (work / "here.json").string());
  CHECK(resolve_connection_file("kernel-r.json") == (runtime / "kernel-r.json").string());
  // Found nowhere: a bare name is what the kernel will create in the runtime directory...
  CHECK(resolve_connection_file("kernel-new.json") == (runtime / "kernel-new.json").string());
  // ...and a path with a directory is the kernel's working directory's.
  CHECK(resolve_connection_file("sub/k.json") == (work / "sub" / "k.json").string());

  if (runtime_before != nullptr)
    ::setenv("JUPYTER_RUNTIME_DIR", saved.c_str(), 1);
  else
    ::unsetenv("JUPYTER_RUNTIME_DIR");
  fs::current_path(cwd_before);
  fs::remove_all(base);
}

TEST_CASE("the store holds itself to its limits on every write, oldest first") {
  const auto dir = fs::temp_directory_path() / ("kwd-cap-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string body(1000, 'x');
  {
    report::ReportStore store(dir, report::StoreLimits{5, 0, 0});
    for (int i = 0; i < 8; ++i)
      store.write("2026010" + std::to_string(i), body);
    const auto kept = store.list();
    REQUIRE(kept.size() == 5);
    CHECK(kept.front().id == "20260107");  // newest first, the oldest three gone
    CHECK(kept.back().id == "20260103");
  }
  {
    // By size: 3500 bytes hold three reports of 1000.
    report::ReportStore store(dir, report::StoreLimits{0, 3500, 0});
    store.write("20260108", body);
    CHECK(store.list().size() == 3);
  }
  {
    // By age: a report last written 100 days ago goes; the newest stays even when too old.
    report::ReportStore store(dir, report::StoreLimits{0, 0, 90});
    const auto old = dir / "20260106.json";
    const auto when = fs::file_time_type::clock::now() - std::chrono::hours(24 * 100);
    fs::last_write_time(old, when);
    fs::last_write_time(dir / "20260108.json", when);
    store.write("20260009", body);  // sorts first: the newest is 20260108, and stays
    const auto kept = store.list();
    std::vector<std::string> ids;
    for (const auto& r : kept)
      ids.push_back(r.id);
    CHECK(ids == std::vector<std::string>{"20260108", "20260107", "20260009"});
  }
  fs::remove_all(dir);
}

TEST_CASE("the store's limits come from KERNEL_WATCHDOG_REPORT_CAP, checked") {
  CHECK(report::StoreLimits::parse("1000,512M,90")->max_bytes == 512ull * 1024 * 1024);
  CHECK(report::StoreLimits::parse("10,0,0")->max_reports == 10);
  // A count alone, or a count and a size: the rest keep their defaults.
  const auto count_only = report::StoreLimits::parse("3");
  REQUIRE(count_only);
  CHECK(count_only->max_reports == 3);
  CHECK(count_only->max_bytes == report::StoreLimits{}.max_bytes);
  CHECK(count_only->max_age_days == report::StoreLimits{}.max_age_days);
  const auto count_and_size = report::StoreLimits::parse("10,5M");
  REQUIRE(count_and_size);
  CHECK(count_and_size->max_reports == 10);
  CHECK(count_and_size->max_bytes == 5ull * 1024 * 1024);
  CHECK(count_and_size->max_age_days == report::StoreLimits{}.max_age_days);
  CHECK_FALSE(report::StoreLimits::parse("ten,5M,1"));
  CHECK_FALSE(report::StoreLimits::parse("10,five"));
  CHECK_FALSE(report::StoreLimits::parse("10,5M,1,2"));
  CHECK_FALSE(report::StoreLimits::parse(""));
  ::setenv("KERNEL_WATCHDOG_REPORT_CAP", "lots", 1);
  std::string problem;
  const auto limits = report::StoreLimits::from_environment(&problem);
  CHECK(limits.max_reports == 1000);
  CHECK_THAT(problem, Catch::Contains("COUNT[,SIZE[,DAYS]]"));
  ::unsetenv("KERNEL_WATCHDOG_REPORT_CAP");
}
