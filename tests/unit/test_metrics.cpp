#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kwd/daemon/kernel_name.hpp"
#include "kwd/metrics/exposition.hpp"
#include "kwd/metrics/http_server.hpp"
#include "kwd/metrics/textfile.hpp"

namespace fs = std::filesystem;
using namespace kwd;

namespace {

metrics::DaemonFigures two_kernels() {
  metrics::DaemonFigures f;
  f.version = "1.2.3";
  metrics::KernelFigures busy;
  busy.kernel_id = "0f1e";
  busy.notebook = "work/a \"quoted\"\\path\nnext.ipynb";
  busy.kernel_name = "python3";
  busy.state = "busy";
  busy.rss_bytes = 123456789;
  busy.gpu_bytes = 2048;
  metrics::KernelFigures idle;
  idle.kernel_id = "aa11";
  idle.state = "idle";
  idle.rss_bytes = 1000;
  idle.pid = 4343;
  f.kernels = {busy, idle};
  f.kernels_under_launcher = 2;
  f.deaths_by_cause = {{{"oom_killed", ""}, 2}, {{"native_crash", ""}, 1}};
  f.reports_written = 4;
  f.cpu_seconds = 1.5;
  f.resident_bytes = 9000000;
  f.start_time_seconds = 1700000000.25;
  return f;
}

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l == line) return true;
  return false;
}

}  // namespace

TEST_CASE("Metrics text: one HELP and TYPE per family, samples in base units") {
  const std::string text = metrics::render(two_kernels());
  CHECK(has_line(text, "# TYPE kernel_watchdog_kernels gauge"));
  CHECK(has_line(text, "kernel_watchdog_kernels{state=\"busy\"} 1"));
  CHECK(has_line(text, "kernel_watchdog_kernels{state=\"idle\"} 1"));
  CHECK(has_line(text, "kernel_watchdog_kernels{state=\"hung\"} 0"));
  CHECK(has_line(text,
                 "kernel_watchdog_kernel_resident_memory_bytes{kernel_id=\"aa11\","
                 "notebook=\"\",kernel_name=\"\",pid=\"4343\"} 1000"));
  CHECK(has_line(text, "# TYPE kernel_watchdog_kernel_deaths_total counter"));
  CHECK(has_line(text, "kernel_watchdog_kernel_deaths_total{cause=\"oom_killed\"} 2"));
  CHECK(has_line(text, "kernel_watchdog_reports_written_total 4"));
  CHECK(has_line(text, "kernel_watchdog_kernels_under_launcher 2"));
  CHECK(has_line(text, "kernel_watchdog_build_info{version=\"1.2.3\"} 1"));
  CHECK(has_line(text, "process_cpu_seconds_total 1.500"));
  CHECK(has_line(text, "process_resident_memory_bytes 9000000"));
  CHECK(has_line(text, "process_start_time_seconds 1700000000.250"));
  // Only the kernel with a GPU reading has a GPU sample.
  CHECK(text.find("kernel_watchdog_kernel_gpu_memory_bytes{kernel_id=\"0f1e\"") !=
        std::string::npos);
  CHECK(text.find("kernel_watchdog_kernel_gpu_memory_bytes{kernel_id=\"aa11\"") ==
        std::string::npos);
}

TEST_CASE("Metrics text: a label value cannot break out of its quotes or its line") {
  const std::string text = metrics::render(two_kernels());
  CHECK(text.find(R"(notebook="work/a \"quoted\"\\path\nnext.ipynb")") != std::string::npos);
  // Every line is a comment or a sample: the newline in the path did not start a new one.
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    CHECK((line.starts_with("# HELP ") || line.starts_with("# TYPE ") ||
           line.starts_with("kernel_watchdog_") || line.starts_with("process_")));
  }
}

TEST_CASE("Metrics text: label values that are not UTF-8 are repaired, not passed on") {
  metrics::DaemonFigures f;
  metrics::KernelFigures k;
  k.kernel_id = "id";
  k.notebook = std::string("caf\xc3\xa9 \xff\xfe") + ".ipynb";  // é is kept; \xff\xfe are not
  k.state = "idle";
  k.rss_bytes = 1;
  f.kernels = {k};
  const std::string text = metrics::render(f);
  CHECK(text.find(std::string("notebook=\"caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd") + ".ipynb\"") !=
        std::string::npos);
  CHECK(text.find('\xff') == std::string::npos);
}

TEST_CASE("Metrics for a textfile leave out process_*, which node_exporter has already") {
  const std::string text = metrics::render(two_kernels(), /*process_metrics=*/false);
  CHECK(text.find("process_") == std::string::npos);
  CHECK(has_line(text, "kernel_watchdog_reports_written_total 4"));
}

TEST_CASE("Metrics text with no kernel and no death still names every family") {
  metrics::DaemonFigures empty;
  const std::string text = metrics::render(empty);
  CHECK(has_line(text, "kernel_watchdog_kernels{state=\"idle\"} 0"));
  CHECK(has_line(text, "# TYPE kernel_watchdog_kernel_deaths_total counter"));
  CHECK(text.find("process_resident_memory_bytes ") == std::string::npos);  // unknown: absent
}

TEST_CASE("Metrics address: HOST:PORT, brackets for IPv6, a clear error otherwise") {
  CHECK(metrics::split_address("127.0.0.1:9464") == std::pair<std::string, int>{"127.0.0.1", 9464});
  CHECK(metrics::split_address("[::1]:0") == std::pair<std::string, int>{"::1", 0});
  CHECK(metrics::split_address("localhost:80") == std::pair<std::string, int>{"localhost", 80});
  CHECK_THROWS_WITH(metrics::split_address("9464"), Catch::Contains("is not HOST:PORT"));
  CHECK_THROWS_WITH(metrics::split_address(":9464"), Catch::Contains("is not HOST:PORT"));
  CHECK_THROWS_WITH(metrics::split_address("127.0.0.1:http"), Catch::Contains("port must be"));
  CHECK_THROWS_WITH(metrics::split_address("127.0.0.1:70000"), Catch::Contains("port must be"));
  CHECK_THROWS_WITH(metrics::split_address("127.0.0.1:"), Catch::Contains("port must be"));
}

TEST_CASE("Metrics textfile: replaced whole, readable by the collector, no temporary left") {
  const fs::path dir = fs::temp_directory_path() / ("kwd-textfile-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "kernel-watchdog.prom";
  metrics::write_textfile(file, "first 1\n");
  metrics::write_textfile(file, "second 2\n");
  std::ifstream in(file);
  std::stringstream content;
  content << in.rdbuf();
  CHECK(content.str() == "second 2\n");
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  // A directory that does not exist: the error names the path.
  CHECK_THROWS_WITH(metrics::write_textfile(dir / "missing" / "x.prom", "x 1\n"),
                    Catch::Contains((dir / "missing" / "x.prom").string()));
  fs::remove_all(dir);
}

TEST_CASE("Kernel name: the kernelspec whose argv the process runs, templates matching any value") {
  const auto spec = [](std::string name, nlohmann::json argv) {
    return kernelspec::Kernelspec{std::move(name), "/k", nlohmann::json{{"argv", std::move(argv)}}};
  };
  const std::vector<kernelspec::Kernelspec> specs{
      spec("python3", {"python", "-m", "ipykernel_launcher", "-f", "{connection_file}"}),
      spec("ir", {"R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"}),
      spec("broken", "not an argv"),
  };
  CHECK(daemon::kernelspec_name_for(
            {"/usr/bin/python3.11", "-m", "ipykernel_launcher", "-f", "/run/kernel-1.json"},
            specs) == "python3");
  CHECK(daemon::kernelspec_name_for(
            {"/usr/lib/R/bin/exec/R", "--slave", "-e", "IRkernel::main()", "--args", "/k.json"},
            specs) == "ir");
  // Another module, an extra argument: not that spec.
  CHECK(daemon::kernelspec_name_for({"python3", "-m", "other", "-f", "/k.json"}, specs).empty());
  CHECK(daemon::kernelspec_name_for(
            {"python3", "-m", "ipykernel_launcher", "-f", "/k.json", "--debug"}, specs)
            .empty());
  // Two specs that run the same command: either could be it, so neither is named.
  auto twice = specs;
  twice.push_back(
      spec("python3-copy", {"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}));
  CHECK(daemon::kernelspec_name_for({"python3", "-m", "ipykernel_launcher", "-f", "/k.json"}, twice)
            .empty());
}

TEST_CASE("Metrics text on a Kubernetes node: namespace, pod and container labels") {
  metrics::DaemonFigures f = two_kernels();
  f.kubernetes = true;
  f.kernels[1].namespace_name = "jhub";
  f.kernels[1].pod = "jupyter-alice";
  f.kernels[1].container = "notebook";
  f.deaths_by_cause = {{{"oom_killed_cgroup", "jhub"}, 3}, {{"native_crash", ""}, 1}};
  const std::string text = metrics::render(f);
  CHECK(has_line(text,
                 "kernel_watchdog_kernel_resident_memory_bytes{kernel_id=\"aa11\","
                 "notebook=\"\",kernel_name=\"\",pid=\"4343\",namespace=\"jhub\","
                 "pod=\"jupyter-alice\",container=\"notebook\"} 1000"));
  // A kernel of the node itself: the same label set, empty values (as absent, to Prometheus).
  CHECK(text.find("pid=\"0\",namespace=\"\",pod=\"\",container=\"\"} 123456789") !=
        std::string::npos);
  CHECK(has_line(text,
                 "kernel_watchdog_kernel_deaths_total{cause=\"oom_killed_cgroup\","
                 "namespace=\"jhub\"} 3"));
  CHECK(has_line(text,
                 "kernel_watchdog_kernel_deaths_total{cause=\"native_crash\",namespace=\"\"} 1"));
  // Off Kubernetes the families keep their labels as they were.
  CHECK(metrics::render(two_kernels()).find("namespace=") == std::string::npos);
}

TEST_CASE("Metrics text: each kernel's memory limits, and the time to reach one while it grows") {
  metrics::DaemonFigures f = two_kernels();
  f.kernels[1].limits = {{"cgroup", 400 << 20, 300 << 20, 12.5},
                         {"mem_total", 8LL << 30, 3LL << 30, std::nullopt}};
  const std::string text = metrics::render(f);
  const std::string kernel = "kernel_id=\"aa11\",notebook=\"\",kernel_name=\"\",pid=\"4343\"";
  CHECK(has_line(text, "# TYPE kernel_watchdog_kernel_memory_limit_bytes gauge"));
  CHECK(has_line(text, "kernel_watchdog_kernel_memory_limit_bytes{" + kernel +
                           ",limit=\"cgroup\"} 419430400"));
  CHECK(has_line(text, "kernel_watchdog_kernel_memory_limit_used_bytes{" + kernel +
                           ",limit=\"mem_total\"} 3221225472"));
  CHECK(has_line(text, "kernel_watchdog_kernel_time_to_memory_limit_seconds{" + kernel +
                           ",limit=\"cgroup\"} 12.500"));
  // Not growing toward the machine's memory: no time to it, rather than an infinite one.
  CHECK(text.find("kernel_watchdog_kernel_time_to_memory_limit_seconds{" + kernel +
                  ",limit=\"mem_total\"}") == std::string::npos);
  // The kernel without limits has no sample in those families.
  CHECK(text.find("memory_limit_bytes{kernel_id=\"0f1e\"") == std::string::npos);
}

TEST_CASE("Metrics text: the newest death of each cause names its report; failed writes count") {
  metrics::DaemonFigures f = two_kernels();
  f.last_death_by_cause = {
      {{"oom_killed", ""}, {"20261128T011853.475Z-b97d-1-TXLL", "a.ipynb", "", 1700000100.5}}};
  f.report_write_failures = 3;
  std::string text = metrics::render(f);
  CHECK(has_line(text,
                 "kernel_watchdog_kernel_last_death_timestamp_seconds{cause=\"oom_killed\","
                 "notebook=\"a.ipynb\",report_id=\"20261128T011853.475Z-b97d-1-TXLL\"} "
                 "1700000100.500"));
  CHECK(has_line(text, "# TYPE kernel_watchdog_report_write_failures_total counter"));
  CHECK(has_line(text, "kernel_watchdog_report_write_failures_total 3"));
  // On a Kubernetes node, the namespace and the pod of that death too.
  f.kubernetes = true;
  f.last_death_by_cause = {{{"oom_killed", "jhub"}, {"r1", "", "jupyter-bob", 5}}};
  text = metrics::render(f);
  CHECK(has_line(text,
                 "kernel_watchdog_kernel_last_death_timestamp_seconds{cause=\"oom_killed\","
                 "namespace=\"jhub\",pod=\"jupyter-bob\",notebook=\"\",report_id=\"r1\"} 5.000"));
  // No failure yet: the counter is there at 0, so that increase() sees the first one.
  CHECK(has_line(metrics::render(metrics::DaemonFigures{}),
                 "kernel_watchdog_report_write_failures_total 0"));
}

TEST_CASE("Metrics text on a Kubernetes node: kernels by state and namespace") {
  metrics::DaemonFigures f = two_kernels();
  f.kubernetes = true;
  f.kernels[1].namespace_name = "jhub";
  const std::string text = metrics::render(f);
  CHECK(has_line(text, "kernel_watchdog_kernels{state=\"idle\",namespace=\"jhub\"} 1"));
  CHECK(has_line(text, "kernel_watchdog_kernels{state=\"busy\",namespace=\"jhub\"} 0"));
  CHECK(has_line(text, "kernel_watchdog_kernels{state=\"busy\",namespace=\"\"} 1"));
  CHECK(has_line(text, "kernel_watchdog_kernels{state=\"idle\",namespace=\"\"} 0"));
  // No kernel at all: the node's own namespace ("") still has every state.
  metrics::DaemonFigures empty;
  empty.kubernetes = true;
  CHECK(
      has_line(metrics::render(empty), "kernel_watchdog_kernels{state=\"hung\",namespace=\"\"} 0"));
}
