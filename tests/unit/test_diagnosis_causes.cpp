// The causes table is the one definition of a cause: the schema, the causes page of the docs
// and the signature table must agree with it; so must the docs with the causes of a failed cell.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/cell_failure.hpp"
#include "kwd/diagnosis/signature_table.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace kwd::diagnosis;

namespace {

std::string read_source_file(const char* relative) {
  std::ifstream in(fs::path(KWD_SOURCE_DIR) / relative);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every match of a table row's pattern in a document (which must outlive the matches).
std::vector<std::smatch> rows_of(const std::string& doc, const std::regex& row) {
  return {std::sregex_iterator(doc.begin(), doc.end(), row), std::sregex_iterator()};
}

// The crash causes' ids, in the table's order.
std::vector<std::string> cause_ids() {
  std::vector<std::string> ids;
  for (const auto& c : causes())
    ids.emplace_back(c.id);
  return ids;
}

}  // namespace

TEST_CASE("the causes table: unique ids and labels, indexed by CauseId", "[causes]") {
  std::set<std::string_view> ids, labels;
  const std::regex label_value("^[a-z][a-z0-9_]*$");
  for (const auto& c : causes()) {
    INFO(c.id);
    CHECK(ids.insert(c.id).second);
    CHECK(labels.insert(c.metric_label).second);
    CHECK(std::regex_match(std::string(c.metric_label), label_value));
    CHECK(std::regex_match(std::string(c.id), label_value));
    CHECK_FALSE(c.name.empty());
    CHECK_FALSE(c.title.empty());
    CHECK(&cause(c.which) == &c);
    CHECK(find_cause(c.id) == &c);
  }
  CHECK(find_cause("no_such_cause") == nullptr);
  CHECK(find_cause("") == nullptr);
}

TEST_CASE("docs/report.schema.json allows exactly the causes of the table", "[causes]") {
  const json schema = json::parse(read_source_file("docs/report.schema.json"));
  const json& allowed =
      schema.at(json::json_pointer("/properties/diagnosis/properties/cause/enum"));
  CHECK(allowed.get<std::vector<std::string>>() == cause_ids());
}

TEST_CASE("docs/causes.md lists every cause of the table, and no other", "[causes]") {
  const std::string doc = read_source_file("docs/causes.md");
  // One row per cause in the causes table of the document: | `id` | name | severity | `label` |
  const std::regex row(R"(\n\| `([a-z_]+)` \| ([^|\n]+) \| (error|warning) \| `([a-z_]+)` \|)");
  std::vector<std::string> documented;
  for (const auto& m : rows_of(doc, row)) {
    documented.push_back(m[1].str());
    const Cause* c = find_cause(m[1].str());
    INFO("documented cause " << m[1].str());
    REQUIRE(c != nullptr);
    CHECK(m[2].str() == std::string(c->name));
    CHECK(m[3].str() == std::string(severity_name(c->severity)));
    CHECK(m[4].str() == std::string(c->metric_label));
  }
  CHECK(documented == cause_ids());
}

TEST_CASE("docs/causes.md lists every cause of a failed cell, and no other", "[causes]") {
  const std::string doc = read_source_file("docs/causes.md");
  // One row per cause in the document's second table, two columns: | `id` | plain words |
  const std::regex row(R"(\n\| `([a-z_0-9]+)` \| ([^|\n]+) \|(?=\n))");
  std::vector<std::string> documented;
  for (const auto& m : rows_of(doc, row)) {
    documented.push_back(m[1].str());
    INFO("documented cause of a failed cell " << m[1].str());
    const auto causes = cell_failure_causes();
    const auto found = std::find_if(causes.begin(), causes.end(),
                                    [&](const CellFailureCause& c) { return c.id == m[1].str(); });
    REQUIRE(found != causes.end());
    CHECK(m[2].str() == std::string(found->name));
  }
  std::vector<std::string> from_table;
  std::set<std::string_view> unique;
  for (const auto& c : cell_failure_causes()) {
    from_table.emplace_back(c.id);
    CHECK(unique.insert(c.id).second);
  }
  CHECK(documented == from_table);
}

TEST_CASE("signatures may support the causes stderr can show, and only those", "[causes]") {
  const auto table_with = [](const std::string& supports) {
    return json{{"version", 1},
                {"signatures",
                 {{{"id", "t.one"},
                   {"family", "test"},
                   {"pattern", "boom"},
                   {"example", "boom"},
                   {"meaning", "a test"},
                   {"supports", supports},
                   {"strength", "strong"},
                   {"source", "https://example.org/"}}}}}
        .dump();
  };
  for (const auto& c : causes()) {
    INFO(c.id);
    if (c.shown_by_stderr)
      CHECK_NOTHROW(SignatureTable::parse(table_with(std::string(c.id)), "test"));
    else
      CHECK_THROWS_AS(SignatureTable::parse(table_with(std::string(c.id)), "test"), TableError);
  }
  CHECK_NOTHROW(SignatureTable::parse(table_with("context"), "test"));
  CHECK_THROWS_AS(SignatureTable::parse(table_with("oom"), "test"), TableError);
}
