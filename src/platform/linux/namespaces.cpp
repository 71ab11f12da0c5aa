#include "kwd/platform/namespaces.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kwd::platform {
namespace {

std::optional<std::uint64_t> inode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.st_ino);
}

}  // namespace

std::optional<std::uint64_t> net_namespace_of(pid_t pid) {
  return inode_of("/proc/" + std::to_string(pid) + "/ns/net");
}

std::optional<std::uint64_t> own_net_namespace() {
  return inode_of("/proc/thread-self/ns/net");
}

NetNamespaceEntered::NetNamespaceEntered(pid_t pid)
    : own_(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) {
  if (!own_)
    throw std::runtime_error(std::string("cannot open our own network namespace: ") +
                             std::strerror(errno));
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
  const util::UniqueFd target(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target || ::setns(target.get(), CLONE_NEWNET) != 0)
    throw std::runtime_error("cannot enter the network namespace of pid " + std::to_string(pid) +
                             ": " + std::strerror(errno));
}

NetNamespaceEntered::~NetNamespaceEntered() {
  // Back where the thread was; failing that is not something to continue from quietly.
  if (::setns(own_.get(), CLONE_NEWNET) != 0) std::terminate();
}

std::string enter_cgroup_namespace_of(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/cgroup";
  const auto theirs = inode_of(path);
  if (!theirs || theirs == inode_of("/proc/thread-self/ns/cgroup")) return "";
  const util::UniqueFd target(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target || ::setns(target.get(), CLONE_NEWCGROUP) != 0)
    throw std::runtime_error("cannot enter the cgroup namespace of pid " + std::to_string(pid) +
                             ": " + std::strerror(errno));
  return "entered the cgroup namespace of pid " + std::to_string(pid);
}

}  // namespace kwd::platform
