#include "kwd/platform/linux/pod_cgroup.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace kwd::platform::linux_proc {
namespace {

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t next = std::min(path.find('/', pos), path.size());
    if (next > pos) out.push_back(path.substr(pos, next - pos));
    pos = next + 1;
  }
  return out;
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// A pod UID: the API's 8-4-4-4-12 form, or a static pod's (a hash: 32 hex digits). The
// systemd driver writes its dashes as underscores (systemd reads '-' as nesting).
std::optional<std::string> pod_uid(std::string_view text, bool systemd) {
  if (text.size() != 36 && text.size() != 32) return std::nullopt;
  std::string uid(text);
  const char separator = systemd ? '_' : '-';
  for (std::size_t i = 0; i < uid.size(); ++i) {
    char& c = uid[i];
    const bool dash_place = uid.size() == 36 && (i == 8 || i == 13 || i == 18 || i == 23);
    if (dash_place ? c != separator : !is_hex(c)) return std::nullopt;
    if (dash_place) c = '-';
  }
  return uid;
}

// Docker's, containerd's and CRI-O's ids are 64 hex digits.
bool is_container_id(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), is_hex);
}

std::string qos_name(std::string_view dir) {
  if (dir == "burstable") return "Burstable";
  if (dir == "besteffort") return "BestEffort";
  return "Guaranteed";
}

// The container's segment: "<id>" or "<prefix>-<id>" (cgroupfs), "<prefix>-<id>.scope"
// (systemd).
bool parse_container(std::string_view seg, PodCgroup& out) {
  struct Prefix {
    std::string_view text;
    const char* runtime;
    bool monitor;
  };
  static constexpr std::array<Prefix, 5> kPrefixes{{{"cri-containerd-", "containerd", false},
                                                    {"crio-conmon-", "cri-o", true},
                                                    {"crio-", "cri-o", false},
                                                    {"docker-", "docker", false},
                                                    {"containerd-", "containerd", false}}};
  if (out.driver == "systemd") {
    if (!seg.ends_with(".scope")) return false;
    seg.remove_suffix(6);
  }
  for (const auto& prefix : kPrefixes) {
    if (seg.starts_with(prefix.text) && is_container_id(seg.substr(prefix.text.size()))) {
      out.container_id = seg.substr(prefix.text.size());
      out.runtime = prefix.runtime;
      out.monitor = prefix.monitor;
      return true;
    }
  }
  if (out.driver == "cgroupfs" && is_container_id(seg)) {
    out.container_id = seg;
    return true;
  }
  return false;
}

std::string join(const std::vector<std::string_view>& parts, std::size_t upto, bool leading_slash) {
  std::string out;
  for (std::size_t i = 0; i < upto; ++i) {
    if (i > 0 || leading_slash) out += '/';
    out += parts[i];
  }
  return out;
}

}  // namespace

std::optional<PodCgroup> parse_pod_cgroup(std::string_view path) {
  const auto parts = segments(path);
  const bool absolute = path.starts_with('/');
  for (std::size_t i = 0; i < parts.size(); ++i) {
    PodCgroup out;
    std::size_t at = i;
    std::optional<std::string> uid;
    if (parts[i] == "kubepods") {
      out.driver = "cgroupfs";
      if (++at >= parts.size()) return std::nullopt;
      out.qos_class = "Guaranteed";
      if (parts[at] == "burstable" || parts[at] == "besteffort") {
        out.qos_class = qos_name(parts[at]);
        if (++at >= parts.size()) return std::nullopt;
      }
      if (!parts[at].starts_with("pod")) return std::nullopt;
      uid = pod_uid(parts[at].substr(3), false);
    } else if (parts[i] == "kubepods.slice") {
      out.driver = "systemd";
      if (++at >= parts.size()) return std::nullopt;
      std::string_view pod_prefix = "kubepods-pod";
      out.qos_class = "Guaranteed";
      for (const char* qos : {"burstable", "besteffort"}) {
        if (parts[at] == std::string("kubepods-") + qos + ".slice") {
          out.qos_class = qos_name(qos);
          pod_prefix = parts[at].substr(0, parts[at].size() - 6);  // "kubepods-burstable"
          if (++at >= parts.size()) return std::nullopt;
          break;
        }
      }
      std::string prefix(pod_prefix);
      if (out.qos_class != "Guaranteed") prefix += "-pod";
      const std::string_view seg = parts[at];
      if (!seg.starts_with(prefix) || !seg.ends_with(".slice")) return std::nullopt;
      uid = pod_uid(seg.substr(prefix.size(), seg.size() - prefix.size() - 6), true);
    } else {
      continue;
    }
    if (!uid) return std::nullopt;
    out.pod_uid = std::move(*uid);
    out.pod_path = join(parts, at + 1, absolute);
    if (at + 1 < parts.size()) {
      if (!parse_container(parts[at + 1], out)) return std::nullopt;
      out.container_path = join(parts, at + 2, absolute);
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace kwd::platform::linux_proc
