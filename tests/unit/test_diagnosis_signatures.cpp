#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "kwd/data/embedded_files.hpp"
#include "kwd/diagnosis/signature_scan.hpp"
#include "kwd/diagnosis/signature_table.hpp"

using namespace kwd::diagnosis;
using nlohmann::json;

TEST_CASE("the built-in signature table is complete and every pattern matches its example",
          "[diagnosis][signatures]") {
  const auto& table = SignatureTable::active();
  CHECK(table.origin() == "built-in");
  REQUIRE(table.signatures().size() >= 15);
  std::set<std::string> families;
  for (const auto& s : table.signatures()) {
    INFO(s.id << ": " << s.example);
    families.insert(s.family);
    CHECK(std::regex_search(s.example, s.regex));
    CHECK(s.source.starts_with("https://github.com/"));
    CHECK_FALSE(s.meaning.empty());
  }
  for (const char* f : {"tensorflow", "pytorch", "jax", "cuda", "cudnn", "cublas", "metal", "mps",
                        "mlx", "glibc", "cxx_runtime", "python"}) {
    INFO(f);
    CHECK(families.contains(f));
  }
}

TEST_CASE("an example line matches only signatures that agree on what it means",
          "[diagnosis][signatures]") {
  // A GPU OOM line must not also be read as a GPU fault, and so on: a line may match more
  // than one entry only if they support the same cause, one of them is mere context, or one
  // is the abort mechanism and the other the reason for it ("terminate called ... Insufficient
  // Memory": the rules rank the reason first).
  const auto& table = SignatureTable::active();
  for (const auto& s : table.signatures()) {
    const std::vector<TextSource> sources{{"/stderr_tail/text", "stderr", s.example}};
    for (const auto& hit : scan(table, sources)) {
      INFO(s.id << " also matched " << hit.signature->id);
      const bool agree = hit.signature->supports == s.supports ||
                         hit.signature->supports == "context" || s.supports == "context" ||
                         hit.signature->supports == "abort" || s.supports == "abort";
      CHECK(agree);
    }
  }
}

TEST_CASE("scan keeps the last matching line of each source, with its line number",
          "[diagnosis][signatures]") {
  const std::string text =
      "starting\nRuntimeError: CUDA out of memory. Tried to allocate 20 MiB\nretrying\n"
      "RuntimeError: CUDA out of memory. Tried to allocate 40 MiB\r\nbye\n";
  const auto hits = scan(SignatureTable::active(), {{"/stderr_tail/text", "stderr", text}});
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].signature->id == "pytorch.cuda_out_of_memory");
  CHECK(hits[0].line == 4);
  CHECK(hits[0].matches == 2);
  CHECK(hits[0].lines_in_source == 5);
  CHECK(hits[0].recent());
  CHECK(hits[0].excerpt == "RuntimeError: CUDA out of memory. Tried to allocate 40 MiB");
}

TEST_CASE("a very long line is matched without blowing the regex engine's stack",
          "[diagnosis][signatures]") {
  std::string line(200000, '=');
  line += " CUDA_ERROR_OUT_OF_MEMORY";
  const auto hits = scan(SignatureTable::active(), {{"/stderr_tail/text", "stderr", line}});
  CHECK(hits.empty());  // past the matching window: not read, and no crash
  const auto near = scan(SignatureTable::active(),
                         {{"/stderr_tail/text", "stderr", "x CUDA_ERROR_OUT_OF_MEMORY\n" + line}});
  CHECK(near.size() == 1);
}

TEST_CASE("text_sources reads stderr, the iopub stream, the last error and the kernel log",
          "[diagnosis][signatures]") {
  const json report = {
      {"stderr_tail", {{"text", "a"}}},
      {"execution", {{"stream_stderr_tail", "b"}, {"last_error", {{"evalue", "c"}}}}},
      {"oom_evidence", {{"kernel_log", {"d", "e"}}}}};
  const auto sources = text_sources(report);
  REQUIRE(sources.size() == 5);
  CHECK(sources[0].pointer == "/stderr_tail/text");
  CHECK(sources[1].pointer == "/execution/stream_stderr_tail");
  CHECK(sources[2].pointer == "/execution/last_error/evalue");
  CHECK(sources[4].pointer == "/oom_evidence/kernel_log/1");
  CHECK(text_sources(json::array()).empty());
}

TEST_CASE("a table with a bad entry is refused with the entry named", "[diagnosis][signatures]") {
  const char* bad_pattern = R"({"signatures":[{"id":"x","family":"f","pattern":"(","example":"e",
      "meaning":"m","supports":"abort","strength":"strong","source":"https://github.com/a/b"}]})";
  CHECK_THROWS_WITH(SignatureTable::parse(bad_pattern, "t"), Catch::Contains("signature 0 (x)"));
  const char* bad_cause = R"({"signatures":[{"id":"x","family":"f","pattern":"a","example":"a",
      "meaning":"m","supports":"sunspots","strength":"strong","source":"https://github.com/a/b"}]})";
  CHECK_THROWS_WITH(SignatureTable::parse(bad_cause, "t"), Catch::Contains("not a cause"));
  const char* no_source = R"({"signatures":[{"id":"x","family":"f","pattern":"a","example":"a",
      "meaning":"m","supports":"abort","strength":"strong","source":"somewhere"}]})";
  CHECK_THROWS_WITH(SignatureTable::parse(no_source, "t"), Catch::Contains("https"));
  CHECK_THROWS(SignatureTable::parse("[]", "t"));
  CHECK(SignatureTable::parse(kwd::data::signatures_json(), "again").signatures().size() ==
        SignatureTable::active().signatures().size());
}
