#include "kwd/smoke/junit_merge.hpp"

#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace kwd::smoke {
namespace {

constexpr std::string_view kRoot = "<testsuites name=\"kernel-watchdog smoke\" ";
constexpr std::string_view kSuite = "  <testsuite ";

struct Totals {
  long long tests = 0, failures = 0, skipped = 0;
  double seconds = 0;
};

// The counts of a <testsuite> line junit_xml() wrote.
void add_suite(const std::string& line, Totals& totals, const std::filesystem::path& file) {
  static const std::regex attribute(R"re(\b(tests|failures|skipped|time)="([0-9.]+)")re");
  int seen = 0;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), attribute);
       it != std::sregex_iterator(); ++it, ++seen) {
    const std::string name = (*it)[1], value = (*it)[2];
    if (name == "time")
      totals.seconds += std::stod(value);
    else
      (name == "tests"      ? totals.tests
       : name == "failures" ? totals.failures
                            : totals.skipped) += std::stoll(value);
  }
  if (seen != 4) throw std::runtime_error(file.string() + ": a test suite without its counts");
}

}  // namespace

std::string merge_junit(const std::vector<std::filesystem::path>& files) {
  Totals totals;
  std::ostringstream suites;
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error(file.string() + ": cannot be read");
    std::string line;
    std::getline(in, line);  // the XML declaration
    if (!std::getline(in, line) || !line.starts_with(kRoot))
      throw std::runtime_error(file.string() + ": not a JUnit file that `smoke --junit` wrote");
    bool closed = false;
    while (std::getline(in, line)) {
      if (line == "</testsuites>") {
        closed = true;
        break;
      }
      if (line.starts_with(kSuite)) add_suite(line, totals, file);
      suites << line << "\n";
    }
    if (!closed) throw std::runtime_error(file.string() + ": cut short (no </testsuites>)");
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "{}tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3f}\">\n{}"
      "</testsuites>\n",
      kRoot, totals.tests, totals.failures, totals.skipped, totals.seconds, suites.str());
}

}  // namespace kwd::smoke
