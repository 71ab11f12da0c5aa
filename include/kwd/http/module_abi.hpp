#pragma once

#include <cstddef>

// The C interface of kernel-watchdog-http.so: the daemon's HTTP, on Debian's cpp-httplib (a
// maintained library; parsing HTTP by hand is how servers get owned). It lives in a module of
// its own because cpp-httplib initialises OpenSSL when it is loaded (about 1.7 MiB of
// libcrypto made resident): every `kernel-watchdog run` would pay that for what only the
// daemon uses, and only when asked. It is loaded with dlopen (kwd/http/module.hpp). Nothing
// here throws; errors come back as text.
extern "C" {

struct kwd_http_server;

// Binds HOST:PORT (port 0: any free one) and serves GET PATH with the last published text
// from a thread of its own; other paths are 404, other methods 405. Null on failure, with
// the reason in `error` (NUL-terminated, cut to error_size).
using kwd_http_server_start_fn = kwd_http_server* (*)(const char* host, int port, const char* path,
                                                      const char* content_type, char* error,
                                                      std::size_t error_size);
// Replaces the text a GET gets.
using kwd_http_server_publish_fn = void (*)(kwd_http_server* server, const char* text,
                                            std::size_t size);
using kwd_http_server_port_fn = int (*)(const kwd_http_server* server);
// Stops serving, joins the thread and frees the server.
using kwd_http_server_stop_fn = void (*)(kwd_http_server* server);

// GET http://HOST:PORT/PATH with an Authorization header (none when null), waiting at most
// timeout_ms to connect and as long again to read. Returns the HTTP status (the body in
// *body, *body_size bytes, freed with kwd_http_free) or -1 with the reason in `error`. The
// reason never carries the Authorization value.
using kwd_http_get_fn = int (*)(const char* host, int port, const char* path,
                                const char* authorization, int timeout_ms, char** body,
                                std::size_t* body_size, char* error, std::size_t error_size);
using kwd_http_free_fn = void (*)(char* body);

}  // extern "C"
