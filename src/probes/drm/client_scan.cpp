#include "kwd/probes/drm/client_scan.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <set>
#include <system_error>
#include <tuple>

namespace kwd::probes::drm {
namespace {

// fdinfo of a DRM file is a few dozen lines; a bound keeps a strange one from costing more.
constexpr std::size_t kFdinfoMaxBytes = 16 * 1024;

std::string read_bounded(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string text(kFdinfoMaxBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

std::optional<int> fd_number(const std::string& name) {
  int fd = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
  if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return fd;
}

}  // namespace

ClientScan scan_clients(const std::filesystem::path& root, const std::vector<pid_t>& pids) {
  ClientScan out;
  // (driver, pdev, client id): the document makes ids unique per device at least.
  std::set<std::tuple<std::string, std::string, std::uint64_t>> seen;
  for (const pid_t pid : pids) {
    const auto proc = root / "proc" / std::to_string(pid);
    std::error_code ec;
    std::filesystem::directory_iterator fds(proc / "fd", ec);
    if (ec) {
      // Gone since the tree was read: nothing to say. Not ours (another user's process seen
      // by a daemon without the rights): said once per scan.
      if (ec != std::errc::no_such_file_or_directory)
        out.problems.push_back("cannot list the descriptors of pid " + std::to_string(pid) + ": " +
                               ec.message());
      continue;
    }
    std::vector<int> numbers;
    for (const auto& entry : fds) {
      const auto fd = fd_number(entry.path().filename().string());
      if (!fd) continue;
      std::error_code link_ec;
      const auto target = std::filesystem::read_symlink(entry.path(), link_ec);
      // Only character devices under /dev/dri are DRM files; reading the fdinfo of every
      // descriptor (sockets, the notebook's data files) would cost far more.
      if (link_ec || !target.string().starts_with("/dev/dri/")) continue;
      numbers.push_back(*fd);
    }
    std::sort(numbers.begin(), numbers.end());
    for (const int fd : numbers) {
      auto client = parse_fdinfo(read_bounded(proc / "fdinfo" / std::to_string(fd)));
      if (!client) continue;  // closed meanwhile, or a DRM node without usage stats
      ++out.drm_descriptors;
      if (client->client_id &&
          !seen.emplace(client->driver, client->pdev, *client->client_id).second) {
        ++out.duplicates;
        continue;
      }
      out.clients.push_back({pid, fd, std::move(*client)});
    }
  }
  return out;
}

}  // namespace kwd::probes::drm
