#pragma once

#include <nlohmann/json_fwd.hpp>
#include <regex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::diagnosis {

struct TableError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One recognised stderr line (data/signatures.json documents the fields).
struct Signature {
  std::string id;
  std::string family;   // tensorflow, pytorch, cuda, metal, glibc, python, ...
  std::string pattern;  // ECMAScript regular expression, matched against one line
  std::string example;  // a line as printed in the public report (the tests match it)
  std::string meaning;
  std::string supports;  // a diagnosis cause, or "context"
  std::string strength;  // strong | supporting | weak
  std::string remedy;
  std::string source;  // where the message was seen in public
  std::regex regex;
  std::vector<std::string> literals;  // cheap pre-filter, see pattern_literals.hpp
};

class SignatureTable {
 public:
  // Throws TableError naming the entry at fault.
  static SignatureTable parse(std::string_view json_text, std::string origin);
  // $KERNEL_WATCHDOG_SIGNATURES when it names a readable, valid table, else the table
  // compiled into the binary. Loaded once.
  static const SignatureTable& active();

  [[nodiscard]] const std::vector<Signature>& signatures() const { return signatures_; }
  [[nodiscard]] const Signature* find(std::string_view id) const;
  [[nodiscard]] const std::string& origin() const { return origin_; }  // "built-in" or a path
  [[nodiscard]] int version() const { return version_; }

 private:
  std::vector<Signature> signatures_;
  std::string origin_;
  int version_ = 0;
};

}  // namespace kwd::diagnosis
