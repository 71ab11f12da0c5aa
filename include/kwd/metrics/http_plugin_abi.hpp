#pragma once

#include <cstddef>

// The C interface of kernel-watchdog-metrics.so, the /metrics HTTP server. It lives in a
// module of its own because cpp-httplib initialises OpenSSL when it is loaded (about 1.7 MiB
// of libcrypto made resident): every `kernel-watchdog run` would pay that for a server only
// the daemon uses, and only when asked. The daemon loads it with dlopen. Nothing here
// throws; errors come back as text.
extern "C" {

struct kwd_metrics_http;

// Binds HOST:PORT (port 0: any free one) and serves GET /metrics from a thread of its own.
// Null on failure, with the reason in `error` (NUL-terminated, cut to error_size).
using kwd_metrics_http_start_fn = kwd_metrics_http* (*)(const char* host, int port, char* error,
                                                        std::size_t error_size);
// Replaces the text a scrape gets.
using kwd_metrics_http_publish_fn = void (*)(kwd_metrics_http* server, const char* text,
                                             std::size_t size);
using kwd_metrics_http_port_fn = int (*)(const kwd_metrics_http* server);
// Stops serving, joins the thread and frees the server.
using kwd_metrics_http_stop_fn = void (*)(kwd_metrics_http* server);

}  // extern "C"
