#include "kwd/stacks/linux/libdw_api.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace kwd::stacks::linux_stacks {
namespace {

Libdw load() {
  Libdw lib;
  const char* override_path = std::getenv("KERNEL_WATCHDOG_LIBDW");
  const char* name =
      override_path != nullptr && *override_path != '\0' ? override_path : "libdw.so.1";
  // Never closed: a Dwfl's callbacks point into it until the process ends.
  void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    lib.missing = std::string("cannot load ") + name + " (elfutils' libdw; Debian/Ubuntu: " +
                  "apt install libdw1, Fedora: dnf install elfutils-libs): " +
                  (why != nullptr ? why : "unknown error");
    return lib;
  }
  const auto find = [&](auto& slot, const char* symbol) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(::dlsym(handle, symbol));
    if (slot == nullptr && lib.missing.empty())
      lib.missing = std::string(name) + " has no " + symbol + " (too old an elfutils)";
  };
  find(lib.begin, "dwfl_begin");
  find(lib.end, "dwfl_end");
  find(lib.errmsg, "dwfl_errmsg");
  find(lib.report_begin, "dwfl_report_begin");
  find(lib.report_end, "dwfl_report_end");
  find(lib.linux_proc_report, "dwfl_linux_proc_report");
  find(lib.linux_proc_find_elf, "dwfl_linux_proc_find_elf");
  find(lib.build_id_find_debuginfo, "dwfl_build_id_find_debuginfo");
  find(lib.attach_state, "dwfl_attach_state");
  find(lib.getthread_frames, "dwfl_getthread_frames");
  find(lib.thread_state_registers, "dwfl_thread_state_registers");
  find(lib.thread_state_register_pc, "dwfl_thread_state_register_pc");
  find(lib.frame_pc, "dwfl_frame_pc");
  find(lib.frame_thread, "dwfl_frame_thread");
  find(lib.thread_dwfl, "dwfl_thread_dwfl");
  find(lib.addrmodule, "dwfl_addrmodule");
  find(lib.module_addrinfo, "dwfl_module_addrinfo");
  find(lib.module_getsymtab, "dwfl_module_getsymtab");
  find(lib.module_getsym_info, "dwfl_module_getsym_info");
  find(lib.module_info, "dwfl_module_info");
  find(lib.module_getsrc, "dwfl_module_getsrc");
  find(lib.lineinfo, "dwfl_lineinfo");
  return lib;
}

}  // namespace

const Libdw& Libdw::get() {
  static const Libdw lib = load();
  return lib;
}

}  // namespace kwd::stacks::linux_stacks
