#include "kwd/daemon/kubelet_records.hpp"

#include <fcntl.h>

#include <algorithm>
#include <sstream>

#include "kwd/platform/regular_file.hpp"

namespace kwd::daemon {
namespace {

constexpr std::size_t kMaxRecordBytes = 64 * 1024;

std::string read_record(const std::filesystem::path& path) {
  // The kubelet's own directory, root's: links are followed (a projected volume's files are
  // links into its current ..data), but only regular files are read, and only so much.
  const auto file = platform::open_regular_file(AT_FDCWD, path.c_str());
  if (!file.fd) return "";
  return platform::read_up_to(file.fd.get(), kMaxRecordBytes).value_or("");
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
    s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  return std::string(s);
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos < line.size()) {
    const std::size_t start = line.find_first_not_of(" \t", pos);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(line.find_first_of(" \t", start), line.size());
    out.push_back(line.substr(start, end - start));
    pos = end;
  }
  return out;
}

bool is_loopback_entry(std::string_view address) {
  return address == "127.0.0.1" || address == "::1" || address.starts_with("fe00::") ||
         address.starts_with("ff0");
}

}  // namespace

bool is_object_name(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  if (!std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
      }))
    return false;
  return name.front() != '-' && name.front() != '.' && name.back() != '-' && name.back() != '.';
}

std::string pod_name_from_etc_hosts(std::string_view text) {
  if (!text.starts_with("# Kubernetes-managed hosts file.")) return "";
  std::string name;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.starts_with("# Entries added by HostAliases")) break;
    if (line.starts_with('#')) continue;
    const auto f = fields(line);
    if (f.size() < 2 || is_loopback_entry(f[0])) continue;
    // "IP hostname", or "IP fqdn hostname" for a pod with a subdomain.
    name = std::string(f.back());
  }
  return is_object_name(name) ? name : "";
}

std::string container_name_from_mountinfo(std::string_view mountinfo, std::string_view pod_uid) {
  const std::string marker = "/pods/" + std::string(pod_uid) + "/containers/";
  std::size_t pos = 0;
  while (pos < mountinfo.size()) {
    const std::size_t eol = std::min(mountinfo.find('\n', pos), mountinfo.size());
    const std::string_view line = mountinfo.substr(pos, eol - pos);
    pos = eol + 1;
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": the mount at /dev/termination-log.
    const auto f = fields(line);
    if (f.size() < 5 || f[4] != "/dev/termination-log") continue;
    const std::size_t at = f[3].find(marker);
    if (at == std::string_view::npos) continue;
    std::string_view rest = f[3].substr(at + marker.size());
    const std::string name(rest.substr(0, rest.find('/')));
    if (is_object_name(name)) return name;
  }
  return "";
}

PodRecords read_pod_records(const std::filesystem::path& kubelet_root, const std::string& pod_uid) {
  PodRecords out;
  const auto dir = kubelet_root / "pods" / pod_uid;
  out.pod_name = pod_name_from_etc_hosts(read_record(dir / "etc-hosts"));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "containers", ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && is_object_name(name)) out.containers.push_back(name);
  }
  std::sort(out.containers.begin(), out.containers.end());
  for (const auto& entry :
       std::filesystem::directory_iterator(dir / "volumes" / "kubernetes.io~projected", ec)) {
    const std::string ns = trim(read_record(entry.path() / "namespace"));
    if (is_object_name(ns)) {
      out.namespace_name = ns;
      break;
    }
  }
  return out;
}

}  // namespace kwd::daemon
