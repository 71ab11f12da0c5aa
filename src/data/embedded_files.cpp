#include "kwd/data/embedded_files.hpp"

namespace kwd::data {

std::string_view signatures_json() {
  static constexpr std::string_view text =
#include "kwd_embedded/signatures.inc"
      ;
  return text;
}

std::string_view compatibility_json() {
  static constexpr std::string_view text =
#include "kwd_embedded/compatibility.inc"
      ;
  return text;
}

std::string_view sitecustomize_py() {
  static constexpr std::string_view text =
#include "kwd_embedded/sitecustomize.inc"
      ;
  return text;
}

std::string_view systemd_unit() {
  static constexpr std::string_view text =
#include "kwd_embedded/systemd_unit.inc"
      ;
  return text;
}

std::string_view launchd_plist() {
  static constexpr std::string_view text =
#include "kwd_embedded/launchd_plist.inc"
      ;
  return text;
}

}  // namespace kwd::data
