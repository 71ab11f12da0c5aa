#pragma once

#include <string>
#include <string_view>

namespace kwd::util {

// "_ZN3foo3barEv" -> "foo::bar()"; anything that is not a mangled C++ name comes back as it is.
std::string demangle(std::string_view symbol);

}  // namespace kwd::util
