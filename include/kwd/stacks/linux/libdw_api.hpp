#pragma once

#include <elfutils/libdwfl.h>

#include <string>

namespace kwd::stacks::linux_stacks {

// The libdwfl functions the unwinder uses, from libdw.so.1 opened with dlopen at the first
// capture (as systemd-coredump does): the watchdog runs without elfutils installed, and a
// missing libdw is a capture without native frames, said in `missing`. The library stays
// loaded for the life of the process (its callbacks are referenced by every Dwfl made).
struct Libdw {
  std::string missing;  // why the functions below are null; "" when all were found

  decltype(&dwfl_begin) begin = nullptr;
  decltype(&dwfl_end) end = nullptr;
  decltype(&dwfl_errmsg) errmsg = nullptr;
  decltype(&dwfl_report_begin) report_begin = nullptr;
  decltype(&dwfl_report_end) report_end = nullptr;
  decltype(&dwfl_linux_proc_report) linux_proc_report = nullptr;
  decltype(&dwfl_linux_proc_find_elf) linux_proc_find_elf = nullptr;
  decltype(&dwfl_build_id_find_debuginfo) build_id_find_debuginfo = nullptr;
  decltype(&dwfl_attach_state) attach_state = nullptr;
  decltype(&dwfl_getthread_frames) getthread_frames = nullptr;
  decltype(&dwfl_thread_state_registers) thread_state_registers = nullptr;
  decltype(&dwfl_thread_state_register_pc) thread_state_register_pc = nullptr;
  decltype(&dwfl_frame_pc) frame_pc = nullptr;
  decltype(&dwfl_frame_thread) frame_thread = nullptr;
  decltype(&dwfl_thread_dwfl) thread_dwfl = nullptr;
  decltype(&dwfl_addrmodule) addrmodule = nullptr;
  decltype(&dwfl_module_addrinfo) module_addrinfo = nullptr;
  decltype(&dwfl_module_getsymtab) module_getsymtab = nullptr;
  decltype(&dwfl_module_getsym_info) module_getsym_info = nullptr;
  decltype(&dwfl_module_info) module_info = nullptr;
  decltype(&dwfl_module_getsrc) module_getsrc = nullptr;
  decltype(&dwfl_lineinfo) lineinfo = nullptr;

  // Loaded once per process. $KERNEL_WATCHDOG_LIBDW names another file to open instead of
  // "libdw.so.1" (a libdw outside the loader's path; the tests use it to make one missing).
  static const Libdw& get();
};

}  // namespace kwd::stacks::linux_stacks
