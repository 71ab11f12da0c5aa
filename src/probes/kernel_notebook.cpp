#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kwd/platform/regular_file.hpp"
#include "kwd/probes/process_identity.hpp"
#include "kwd/protocol/connection_file.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes {
namespace {

// Another user's file is none of our business, and a FIFO or a device would block or lie.
bool own_regular_file(const std::string& path) {
  const auto file = platform::open_regular_file(AT_FDCWD, path.c_str(), O_NOFOLLOW);
  return file.fd && file.st.st_uid == ::geteuid();
}

}  // namespace

KernelNotebook notebook_of_kernel(const std::string& connection_file, pid_t pid) {
  if (!connection_file.empty() && own_regular_file(connection_file)) {
    try {
      auto session = protocol::load_connection_file(connection_file).jupyter_session;
      if (!session.empty()) return {std::move(session), "connection_file"};
    } catch (const std::exception&) {
      // Unreadable or half-written: the environment may still say.
    }
  }
  if (pid > 0)
    if (auto name = environment_variable(pid, "JPY_SESSION_NAME"); !name.empty())
      return {std::move(name), "environment"};
  return {};
}

}  // namespace kwd::probes
