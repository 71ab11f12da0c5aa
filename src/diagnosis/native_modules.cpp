#include "kwd/diagnosis/native_modules.hpp"

namespace kwd::diagnosis {

bool is_runtime_module(std::string_view module) {
  if (const auto slash = module.rfind('/'); slash != std::string_view::npos)
    module.remove_prefix(slash + 1);
  for (const std::string_view prefix :
       {"libc.so", "libc-", "libpthread", "ld-linux", "ld-", "linux-vdso", "[vdso]", "libstdc++",
        "libgcc_s", "libc++", "libdl", "libpython", "python", "libR.so", "kernel-watchdog-crash",
        // macOS: libSystem's parts, the loader, and python.org's framework build's "Python".
        "libsystem_", "libdyld", "dyld", "Python"})
    if (module.starts_with(prefix)) return true;
  return false;
}

}  // namespace kwd::diagnosis
