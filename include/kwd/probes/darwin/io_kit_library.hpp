#pragma once

#include <string>

#include "kwd/probes/darwin/io_kit_abi.hpp"

namespace kwd::probes::darwin {

// Core Foundation and I/O Kit, opened with dlopen at their first use (the frameworks are
// in every macOS's shared cache; the binary links neither).
struct IoKitLibrary {
#define KWD_IO_KIT_MEMBER(framework, name) io_kit::name##Fn* name = nullptr;
  KWD_IO_KIT_FUNCTIONS(KWD_IO_KIT_MEMBER)
#undef KWD_IO_KIT_MEMBER

  // Every function, opened once per process; nullptr when a framework or a function is
  // missing, with `problem` naming it.
  static const IoKitLibrary* get(std::string& problem);
};

}  // namespace kwd::probes::darwin
