#include "kwd/util/demangle.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace kwd::util {

std::string demangle(std::string_view symbol) {
  // Only Itanium-mangled names: __cxa_demangle also "demangles" plain words such as "f"
  // (as a type name), which would turn C functions into nonsense.
  if (!symbol.starts_with("_Z")) return std::string(symbol);
  const std::string name(symbol);
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || !out) return name;
  return out.get();
}

}  // namespace kwd::util
