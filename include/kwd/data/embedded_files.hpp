#pragma once

#include <string_view>

namespace kwd::data {

// Files from data/ compiled into the binary (cmake/embed_text.cmake), so the binary needs
// nothing beside it at run time.
std::string_view signatures_json();     // data/signatures.json
std::string_view compatibility_json();  // data/compatibility.json
std::string_view sitecustomize_py();    // data/python/sitecustomize.py
std::string_view systemd_unit();        // systemd/kernel-watchdog.service
std::string_view launchd_plist();       // launchd/org.kernel-watchdog.daemon.plist

}  // namespace kwd::data
