#include <cstdio>

#include "kwd/diagnosis/advisor.hpp"
#include "kwd/diagnosis/shared_memory_remedies.hpp"

namespace kwd::diagnosis {
void Advisor::shared_memory_advice() {
  add(larger_dev_shm(v_.integer("/shared_memory/size_bytes")));
  if (pytorch()) add(torch_shares_less());
}

void Advisor::cpu_advice() {
  add("cpu.rosetta_native_arm64",
      "On a Mac with Apple Silicon, check `python -c \"import platform; "
      "print(platform.machine())\"`: x86_64 means Python runs under Rosetta 2, which has no "
      "AVX. Install a native arm64 Python (python.org, Homebrew in /opt/homebrew, Miniforge) "
      "and the framework's arm64 build into a new environment.",
      "Rosetta 2 translates x86_64 code without AVX/AVX2; framework wheels for x86_64 are "
      "built to need them.");
  add("cpu.build_for_this_cpu",
      "On an older x86 CPU (no AVX/AVX2, or no AVX-512 where the build wants it): install a "
      "build made for it (conda-forge's builds, an older release, or one compiled from source "
      "with -march=native), or run the notebook on a machine whose CPU has what the build "
      "needs (lscpu lists the CPU's flags).",
      "Framework wheels from PyPI are compiled for a minimum instruction set (TensorFlow's "
      "need AVX); the CPU stops at the first instruction it does not have.");
}

void Advisor::native_crash_advice() {
  const auto& tb = in_.traceback;
  if (tb.is_object() && tb.contains("frames") && !tb["frames"].empty()) {
    const ReportView top(tb["frames"][0]);  // a stored report's frame may be of any shape
    add("native.check_call",
        "Look at the call " + top.text("/function").value_or("?") + "() (" +
            top.text("/file").value_or("?") + ":" +
            std::to_string(top.integer("/line").value_or(0)) +
            "): check the arguments passed to native code there (array shapes, dtypes, "
            "pointers, file handles) and the version of the library it calls into.",
        "It is the innermost Python frame of the crashing thread, from faulthandler.");
  } else if (in_.r_kernel()) {
    add("native.traceback",
        "Run the cell's code in R outside Jupyter under a debugger, `R -d gdb`, then `run`, the "
        "code, and `bt` at the crash: its frames name the package and the C function. Without "
        "gdb, `Rscript -e 'source(\"cell.R\")'` prints R's own traceback of the crash.",
        "R's own crash message (in the stderr tail, when it printed one) gives the address, "
        "not the package or the call that went into native code.");
  } else if (v_.has("/watchdog/python_shim/ran") && !v_.flag("/watchdog/python_shim/ran")) {
    const std::string why = v_.text("/watchdog/python_shim/why_not").value_or("");
    if (why.find("(-") != std::string::npos)
      add("native.traceback",
          "Start the kernel's interpreter without -I, -E or -S (edit the argv in its "
          "kernel.json) so kernel-watchdog can turn faulthandler on in it, and the next report "
          "names the Python line; or reproduce outside Jupyter with `python -X faulthandler "
          "script.py`.",
          "This report has no Python stack for the crash: " + why + ".");
    else
      add("native.traceback",
          "Reproduce the crash outside Jupyter under the language's own debugger or crash "
          "handler (for Python: `python -X faulthandler script.py`; for native code: "
          "`gdb --args ...` and `bt`).",
          "This report has no stack of the crash's own language: " + why + ".");
  } else if (v_.text("/watchdog/mode").value_or("") == "daemon") {
    // The daemon finds kernels it did not start: it cannot give them faulthandler's pipe.
    add("native.traceback",
        "Run the kernel under `kernel-watchdog run`: wrap its kernelspec (`kernel-watchdog "
        "kernelspec wrap NAME`; `kernel-watchdog kernelspec list` shows the names) and pick "
        "the watched kernel, so the next report names the Python line and the cell; or "
        "reproduce outside Jupyter with `python -X faulthandler script.py`.",
        "This report has no Python stack for the crash: the daemon watched a kernel it did not "
        "start, which runs without faulthandler and does not announce its cells.");
  } else {
    add("native.traceback",
        "Keep faulthandler on (the watchdog's default; do not pass --no-faulthandler) so the "
        "next report names the Python line; or reproduce outside Jupyter with "
        "`python -X faulthandler script.py`.",
        "This report has no Python stack for the crash.");
  }
  // What every Python process loads (the C++ runtime, libpython) says nothing of mixed
  // builds: the advice is for when compiled packages were loaded.
  if (in_.r_kernel()) {
    std::string packages;
    for (const auto& p : v_.array("/fingerprint/r/packages_with_native_code"))
      if (const auto name = ReportView(p).text("/name"))
        packages += (packages.empty() ? "" : ", ") + *name;
    add("native.matching_builds",
        "Reinstall the R packages with compiled code that the kernel had loaded, built for this "
        "R (after an R upgrade: `update.packages(checkBuilt = TRUE, ask = FALSE)`); do not mix "
        "packages from conda, CRAN and the distribution's r-cran-* in one library path.",
        packages.empty() ? std::string("A package built for another R, or against other system "
                                       "libraries, can crash on load or on use.")
                         : "R packages with native code loaded in the kernel: " + packages + ".");
    if (in_.death.signal_name == "SIGBUS")
      add("native.sigbus_mmap",
          "If the data comes from a memory-mapped file (arrow, bigmemory, fst), check that the "
          "file was not truncated or on a full or removed file system.",
          "SIGBUS is typical for reads beyond the end of a mapped file.");
    return;
  }
  std::string names;
  for (const auto& n : in_.frameworks)
    if (n != "libstdc++" && n != "libpython" && names.find(n) == std::string::npos)
      names += (names.empty() ? "" : ", ") + n;
  if (!names.empty()) {
    add("native.matching_builds",
        "Make sure the compiled packages come from one source and were built for each other "
        "(do not mix conda and pip builds of numpy/torch/tensorflow; reinstall after upgrading "
        "numpy).",
        "Native libraries loaded in the kernel: " + names + ".");
  }
  if (in_.death.signal_name == "SIGBUS")
    add("native.sigbus_mmap",
        "If the data comes from a memory-mapped file (np.memmap, HDF5, Arrow), check that the "
        "file was not truncated or on a full/removed file system.",
        "SIGBUS is typical for reads beyond the end of a mapped file.");
}

void Advisor::aborted() {
  add("abort.read_message",
      "Read the library's message just before the abort (quoted in the evidence): it states the "
      "failed check or the uncaught exception, which names what to fix.",
      "SIGABRT is raised on purpose by the library that found the problem.");
}

void Advisor::killed_advice() {
  if (in_.death.signal_name == "SIGKILL") {
    add("killed.find_sender",
        "Find who sent SIGKILL: check `journalctl -k` and `journalctl -u systemd-oomd`, "
        "earlyoom logs, or your job scheduler's log (Slurm, Kubernetes) for a memory or time "
        "limit.",
        "SIGKILL cannot be caught, so only the sender's logs say why.");
    if (in_.pressure && in_.pressure->fraction() >= 0.9) {
      working_set(
          "Memory was at " +
          std::to_string(std::llround(std::clamp(in_.pressure->fraction() * 100.0, -1e15, 1e15))) +
          "% of the " + in_.pressure->limit_name + " when the kernel was killed");
      framework_host_memory();
    }
  } else {
    add("killed.sender",
        "Something sent " + in_.death.signal_name +
            " to the kernel process directly (a `kill`, a process manager, a time limit); "
            "check what else manages processes on this machine.",
        "The kernel manager was not asked to shut the kernel down.");
  }
}

void Advisor::exited_advice() {
  if (f_.cause == CauseId::exited) {
    add("exit.exit_call",
        "Look for exit(), quit(), sys.exit() or os._exit() in the cells that ran, or a library "
        "that exits on its own.",
        "The interpreter ended normally, without a crash.");
    return;
  }
  const auto code = in_.death.exit_code.value_or(0);
  if (code > 128 && code <= 128 + 64)
    add("exit.wrapped_signal",
        "The kernel command looks like a wrapper script: its child died of signal " +
            std::to_string(code - 128) +
            "; run the kernel's interpreter directly in the kernelspec so the report sees the "
            "signal.",
        "Exit codes above 128 are how shells report a signal.");
  add("exit.error_before_exit",
      "Fix the error printed before the exit (see the evidence); if the kernel never started, "
      "run its command line from kernel.json in a terminal to see the message.",
      in_.r_kernel() ? "An R kernel exits with a non-zero code when R stops on an error outside "
                       "the kernel's handlers or quit(status = n) is called."
                     : "A Python kernel exits with a non-zero code when an exception reaches the "
                       "top level or sys.exit(n) is called.");
}

void Advisor::hang_advice() {
  const auto pid = v_.integer("/kernel/pid");
  const std::string p = pid ? std::to_string(*pid) : "<pid>";
  if (v_.has("/startup")) {
    const std::string name = v_.text("/startup/kernel_name").value_or("");
    add("startup.check_kernelspec",
        "Run the kernelspec's command line by hand and see whether it starts a Jupyter kernel: "
        "`jupyter kernelspec list` shows where " +
            (name.empty() ? std::string("its") : name + "'s") +
            " kernel.json is; its argv must start a kernel that reads {connection_file} (for "
            "Python: python -m ipykernel_launcher -f {connection_file}).",
        "A process that never binds the kernel's sockets answers nothing: not "
        "kernel_info_request, not heartbeats.");
    std::string given = "It was given the start-up timeout only";
    if (auto t = v_.number("/startup/timeout_s"); t && *t > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", *t);
      given = std::string("It was given ") + buf + " s";
    }
    add("startup.longer_timeout",
        "If it is only slow to start (large imports at start-up, a cold disk or container "
        "image), give it longer: `kernel-watchdog smoke --startup-timeout=120 ...`.",
        given + " to answer.");
  }
  const auto state = v_.text("/hang/process_state").value_or("");
  if (state.rfind('T', 0) == 0 || state.rfind('t', 0) == 0)
    add("hang.stopped",
        "The kernel process is stopped (SIGSTOP, job control or a debugger holding it): send it "
        "SIGCONT (`kill -CONT " +
            p + "`) or detach the debugger.",
        "Its state is " + state + ": it runs no code at all until continued.");
  if (state.rfind('D', 0) == 0)
    add("hang.blocked_io",
        "The kernel is blocked inside the operating system (state D): check the storage or "
        "network file system it reads from; an interrupt cannot help until the I/O returns.",
        "Uninterruptible sleep means a system call is waiting on a device or a mount.");
  add("hang.dump_stacks",
      "See where it is stuck with `py-spy dump --native --pid " + p + "` (or `gdb -p " + p +
          " -batch -ex 'thread apply all bt'`), then interrupt the "
          "kernel.",
      "ipykernel answers heartbeats from a thread of its own, so missed beats mean the whole "
      "process is stopped or wedged below Python.");
}

}  // namespace kwd::diagnosis
