#include <catch2/catch.hpp>
#include <regex>

#include "kwd/diagnosis/pattern_literals.hpp"
#include "kwd/diagnosis/signature_table.hpp"

using kwd::diagnosis::may_match;
using kwd::diagnosis::required_literals;
using V = std::vector<std::string>;

TEST_CASE("required literals of a pattern, per top-level alternative", "[diagnosis]") {
  CHECK(required_literals("CUDA out of memory\\. Tried to allocate") ==
        V{"CUDA out of memory. Tried to allocate"});
  CHECK(required_literals("ResourceExhaustedError|Resource exhausted: OOM") ==
        V{"ResourceExhaustedError", "Resource exhausted: OOM"});
  CHECK(required_literals("RESOURCE_EXHAUSTED: (Out of memory|Failed)") ==
        V{"RESOURCE_EXHAUSTED: "});
  CHECK(required_literals("[Cc]ould not create cudnn handle") == V{"ould not create cudnn handle"});
  CHECK(required_literals("AVX2? instructions") == V{" instructions"});
  CHECK(required_literals("free\\(\\): invalid") == V{"free(): invalid"});
  // An alternative without a usable literal means no filter at all.
  CHECK(required_literals("abc|\\d+").empty());
  CHECK(required_literals("x.y").empty());
  CHECK(may_match("anything", {}));
  CHECK(may_match("a ResourceExhaustedError here", V{"ResourceExhaustedError", "OOM"}));
  CHECK_FALSE(may_match("all good", V{"ResourceExhaustedError"}));
}

TEST_CASE("the filter never hides a line a signature's pattern matches", "[diagnosis]") {
  const auto& table = kwd::diagnosis::SignatureTable::active();
  REQUIRE(table.signatures().size() >= 15);
  for (const auto& sig : table.signatures()) {
    INFO(sig.id);
    REQUIRE(std::regex_search(sig.example, sig.regex));
    CHECK(may_match(sig.example, sig.literals));
  }
}
