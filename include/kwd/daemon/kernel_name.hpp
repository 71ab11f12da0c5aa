#pragma once

#include <string>
#include <vector>

#include "kwd/kernelspec/kernelspec.hpp"

namespace kwd::daemon {

// The kernelspec a kernel process was started from: the one whose argv is the process's,
// template fields ({connection_file}, {resource_dir}) matching any argument, and the first
// argument compared by file name (jupyter_client replaces a bare `python`/`python3` with
// its own interpreter's path). "" when no kernelspec fits, or more than one does.
std::string kernelspec_name_for(const std::vector<std::string>& argv,
                                const std::vector<kernelspec::Kernelspec>& specs);

}  // namespace kwd::daemon
