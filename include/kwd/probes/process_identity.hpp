#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace kwd::probes {

// Who a process that is not the kernel's is, for a report that names it: what it runs and
// which GPU frameworks it has loaded (their remedies differ: JAX pre-allocates, TensorFlow
// maps the whole device, PyTorch caches). When it is a Jupyter kernel itself (its argv names
// a connection file), which one and which notebook: "the kernel of train.ipynb" is what
// its owner knows it by. Platform folders implement it; fields it cannot read stay empty.
struct ProcessIdentity {
  std::string command_line;             // shortened, control characters replaced
  std::vector<std::string> frameworks;  // "jax", "tensorflow", "torch", "cupy"
  std::string kernel_id;                // "" unless it is a Jupyter kernel
  std::string notebook;                 // "" unless known (see notebook_of_kernel)
  bool watched = false;                 // its parent is `kernel-watchdog run` (or smoke)
};

ProcessIdentity identify_process(pid_t pid);

class ProcessRecord;
// The Jupyter part of identify_process, the same on every platform: kernel_id, notebook and
// watched, when the process's argv names a connection file.
void identify_kernel(const ProcessRecord& process, ProcessIdentity& id);

// The value of `name` in the environment `pid` was started with ("" when unset or not
// readable). Changes the process made later are not seen.
std::string environment_variable(pid_t pid, std::string_view name);

// Where the notebook a kernel runs is known from, and what it is.
struct KernelNotebook {
  std::string path;    // as the Jupyter server gave it (often relative to its root)
  std::string source;  // "connection_file" (its jupyter_session), "environment"
                       // (JPY_SESSION_NAME), "jupyter_server" (its /api/sessions), or ""
                       // when not known
};

// The notebook of the kernel `pid` whose connection file is `connection_file` (may be
// empty): the file's jupyter_session (jupyter_client >= 8.3 writes it), else the
// JPY_SESSION_NAME that jupyter_server puts in a kernel's environment. The file is read
// only if it is a regular file of this user's.
KernelNotebook notebook_of_kernel(const std::string& connection_file, pid_t pid);

}  // namespace kwd::probes
