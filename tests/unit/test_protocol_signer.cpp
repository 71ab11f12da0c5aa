#include <catch2/catch.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/protocol/message_signer.hpp"

using kwd::protocol::MessageSigner;
using kwd::protocol::Secret;
using kwd::protocol::SignatureSchemeError;

namespace {

const Secret kSignerKey{"a0436f6c-1916-498b-8eb9-e81ab9368e84"};
const std::vector<std::string_view> kParts{R"({"msg_id":"1","msg_type":"status"})", "{}", "{}",
                                           R"({"execution_state":"busy"})"};

}  // namespace

TEST_CASE("signatures match Python's hmac for every hmac-<hashlib name> scheme") {
  // Expected values computed with Python's hmac.new(key, digestmod=hashlib.<name>).
  const std::vector<std::pair<std::string, std::string>> cases{
      {"hmac-sha256", "2e88e459b004bd02347e191cdcdb1ed495577f5d5da0656f89aaad88a6f5300c"},
      {"hmac-sha1", "ac0e1d9976f22220686435010e84c224b9e7e3dd"},
      {"hmac-md5", "5ab135474e497b47c5e4ba3ea46315ed"},
      {"hmac-sha512",
       "d7d92936fcb7b8034495b9baa731811248f3188b4950675bee880fc79445ca94c3dfe61e36e9cdccac90f358"
       "09e3a4dc60f81c064b3229a5dda1de1bfdc1cb25"},
      {"hmac-sha3_256", "1f7dcbdd7b1fa3ce3071bc4f519dbe56f369c6c3fa876fda0dfb4b828dbca7a7"},
      {"hmac-blake2b",
       "229e03aa50aa3ddf8902e6bfe01d0f24775737771d3af3896a74a07b401d3f2c8f0b9922bfdb6af3b6c24a94"
       "4423cec0f9070262f48b427ba2e8ada835f96a93"},
  };
  for (const auto& [scheme, expected] : cases) {
    INFO(scheme);
    MessageSigner signer(scheme, kSignerKey);
    REQUIRE(signer.signs());
    CHECK(signer.sign(kParts) == expected);
    CHECK(signer.verify(expected, kParts));
    // The same signer again: the per-message re-initialisation keeps the key.
    CHECK(signer.sign(kParts) == expected);
  }
}

TEST_CASE("verify refuses anything but the exact lowercase signature") {
  MessageSigner signer("hmac-sha256", kSignerKey);
  const std::string good = signer.sign(kParts);
  std::string flipped = good;
  flipped[10] = flipped[10] == 'a' ? 'b' : 'a';
  std::string upper = good;
  for (char& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK_FALSE(signer.verify(flipped, kParts));
  CHECK_FALSE(signer.verify(good.substr(0, 63), kParts));
  CHECK_FALSE(signer.verify(good + "0", kParts));
  CHECK_FALSE(signer.verify("", kParts));
  CHECK_FALSE(signer.verify(upper, kParts));
  auto other_parts = kParts;
  other_parts[3] = R"({"execution_state":"idle"})";
  CHECK_FALSE(signer.verify(good, other_parts));
  MessageSigner other_key("hmac-sha256", Secret("another key"));
  CHECK_FALSE(other_key.verify(good, kParts));
}

TEST_CASE("an empty key means unsigned messages, as in jupyter_client") {
  MessageSigner signer("hmac-sha256", Secret{});
  CHECK_FALSE(signer.signs());
  CHECK(signer.sign(kParts).empty());
  CHECK(signer.verify("anything", kParts));
}

TEST_CASE("unknown or unusable schemes are refused, naming the scheme") {
  for (const std::string scheme :
       {"sha256", "hmac-", "hmac-nosuchhash", "hmac-shake_128", "rsa-sha256"}) {
    INFO(scheme);
    try {
      MessageSigner signer(scheme, kSignerKey);
      FAIL("accepted " << scheme);
    } catch (const SignatureSchemeError& e) {
      const std::string what = e.what();
      CHECK(what.find(scheme) != std::string::npos);
      CHECK(what.find(std::string(kSignerKey.reveal())) == std::string::npos);
    }
    CHECK(kwd::protocol::signature_scheme_problem(scheme).has_value());
  }
  CHECK_FALSE(kwd::protocol::signature_scheme_problem("hmac-sha256").has_value());
}
