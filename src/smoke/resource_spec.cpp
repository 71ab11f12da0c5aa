#include "kwd/smoke/resource_spec.hpp"

#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kwd/platform/regular_file.hpp"

namespace kwd::smoke {
namespace {

// A resource spec is a few lines; anything larger is not one.
constexpr std::size_t kMaxSpecBytes = 1 << 20;
constexpr std::size_t kMaxGpus = 256;

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what + " (CTest's resource specification: " +
                           "{\"version\": {\"major\": 1, \"minor\": 0}, \"local\": [{\"gpus\": " +
                           "[{\"id\": \"0\", \"slots\": 2}]}]})");
}

// CTest's rule for an id: lowercase letters, digits and underscores, the first not a digit
// unless all are ("0", "gpu_1").
bool valid_id(const std::string& id) {
  if (id.empty()) return false;
  bool digits = true;
  for (const char c : id) {
    const bool digit = c >= '0' && c <= '9';
    if (!digit && !(c >= 'a' && c <= 'z') && c != '_') return false;
    digits = digits && digit;
  }
  return digits || !(id.front() >= '0' && id.front() <= '9');
}

}  // namespace

std::vector<SmokeGpu> gpus_of_resource_spec(std::string_view text, const std::string& file) {
  const auto spec = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_object()) bad(file, "not a JSON object");
  const auto version = spec.find("version");
  if (version == spec.end() || !version->is_object() || !version->contains("major") ||
      (*version)["major"] != 1)
    bad(file, "no \"version\" of major 1 (the only one CTest defines)");
  const auto local = spec.find("local");
  if (local == spec.end() || !local->is_array() || local->size() != 1 || !(*local)[0].is_object())
    bad(file, "\"local\" must be an array of one object");
  const auto& node = (*local)[0];
  const auto gpus = node.find("gpus");
  if (gpus == node.end()) bad(file, "\"local\" names no \"gpus\"");
  if (!gpus->is_array()) bad(file, "\"gpus\" is not an array");
  if (gpus->size() > kMaxGpus) bad(file, "more than 256 GPUs");
  std::vector<SmokeGpu> out;
  for (const auto& entry : *gpus) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_string())
      bad(file, "a GPU without a string \"id\"");
    SmokeGpu gpu;
    gpu.ctest_id = entry["id"].get<std::string>();
    if (!valid_id(gpu.ctest_id))
      bad(file, "GPU id \"" + gpu.ctest_id +
                    "\": lowercase letters, digits and underscores only, and not a digit first "
                    "unless all are");
    for (const auto& other : out)
      if (other.ctest_id == gpu.ctest_id) bad(file, "GPU id \"" + gpu.ctest_id + "\" twice");
    gpu.slots = 1;
    if (const auto slots = entry.find("slots"); slots != entry.end()) {
      if (!slots->is_number_unsigned() || *slots > 1024)
        bad(file, "GPU \"" + gpu.ctest_id + "\": slots is not a whole number from 0 to 1024");
      gpu.slots = slots->get<std::size_t>();
    }
    gpu.name = "id " + gpu.ctest_id;
    if (gpu.slots > 0) out.push_back(std::move(gpu));  // no slot: nothing can run there
  }
  if (out.empty()) bad(file, "no GPU with a slot");
  return out;
}

std::vector<SmokeGpu> read_resource_spec(const std::filesystem::path& file) {
  const auto opened = platform::open_regular_file(AT_FDCWD, file.c_str());
  if (opened.not_regular) throw std::runtime_error(file.string() + ": not a regular file");
  if (!opened.fd.valid())
    throw std::runtime_error(file.string() + ": " + std::strerror(opened.error));
  const auto text = platform::read_up_to(opened.fd.get(), kMaxSpecBytes + 1);
  if (!text) throw std::runtime_error(file.string() + ": cannot be read");
  if (text->size() > kMaxSpecBytes) throw std::runtime_error(file.string() + ": over 1 MiB");
  return gpus_of_resource_spec(*text, file.string());
}

}  // namespace kwd::smoke
