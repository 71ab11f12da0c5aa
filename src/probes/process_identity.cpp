#include "kwd/probes/process_identity.hpp"

#include <filesystem>

#include "kwd/probes/process_record.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/process_args.hpp"

namespace kwd::probes {

void identify_kernel(const ProcessRecord& process, ProcessIdentity& id) {
  const auto file = protocol::find_connection_file(process.argv());
  if (!file) return;
  std::filesystem::path path(*file);
  if (path.is_relative()) {
    const auto cwd = process.cwd();
    if (!cwd.empty()) path = cwd / path;
  }
  id.kernel_id = protocol::kernel_id_from_connection_file(path.string());
  id.notebook = notebook_of_kernel(path.string(), process.pid()).path;
  // Under `kernel-watchdog run` or `smoke`: that launcher watches it and reports its death.
  const auto lineage = process.lineage();
  if (!lineage || lineage->ppid <= 1) return;
  const auto parent = ProcessRecord::open(lineage->ppid);
  id.watched = parent && protocol::is_watchdog_launcher(parent->argv());
}

std::string environment_variable(pid_t pid, std::string_view name) {
  const auto record = ProcessRecord::open(pid);
  if (!record) return "";
  return util::environment_value(record->environment(), name).value_or("");
}

}  // namespace kwd::probes
