// libzmq's functions that the watchdog calls, each finding libzmq's own at its first call
// (see kwd/platform/deferred_library.hpp), under the platform's names for it
// (src/platform/<os>/library_names.cpp). Declared by zmq.h: a definition here that does not
// match it does not compile. Without libzmq every call fails with ENOSYS, and what
// needed it (a kernel's IOPub, a smoke client) says so; the kernel is not affected.
#include <zmq.h>

#include <cerrno>
#include <cstring>

#include "kwd/platform/deferred_library.hpp"

#if ZMQ_VERSION_MAJOR != 4
#error "libzmq 4.x (ABI 5: libzmq.so.5, libzmq.5.dylib) expected"
#endif

namespace {

kwd::platform::DeferredLibrary& libzmq() {
  static kwd::platform::DeferredLibrary library(kwd::platform::libzmq_names());
  return library;
}

template <typename T>
T unavailable(T value) {
  errno = ENOSYS;
  return value;
}

}  // namespace

extern "C" {

void* zmq_ctx_new() {
  static const auto fn = libzmq().function<decltype(&zmq_ctx_new)>("zmq_ctx_new");
  return fn != nullptr ? fn() : unavailable<void*>(nullptr);
}

int zmq_ctx_set(void* context, int option, int value) {
  static const auto fn = libzmq().function<decltype(&zmq_ctx_set)>("zmq_ctx_set");
  return fn != nullptr ? fn(context, option, value) : unavailable(-1);
}

int zmq_ctx_term(void* context) {
  static const auto fn = libzmq().function<decltype(&zmq_ctx_term)>("zmq_ctx_term");
  return fn != nullptr ? fn(context) : unavailable(-1);
}

void* zmq_socket(void* context, int type) {
  static const auto fn = libzmq().function<decltype(&zmq_socket)>("zmq_socket");
  return fn != nullptr ? fn(context, type) : unavailable<void*>(nullptr);
}

int zmq_close(void* socket) {
  static const auto fn = libzmq().function<decltype(&zmq_close)>("zmq_close");
  return fn != nullptr ? fn(socket) : unavailable(-1);
}

int zmq_bind(void* socket, const char* address) {
  static const auto fn = libzmq().function<decltype(&zmq_bind)>("zmq_bind");
  return fn != nullptr ? fn(socket, address) : unavailable(-1);
}

int zmq_connect(void* socket, const char* address) {
  static const auto fn = libzmq().function<decltype(&zmq_connect)>("zmq_connect");
  return fn != nullptr ? fn(socket, address) : unavailable(-1);
}

int zmq_disconnect(void* socket, const char* address) {
  static const auto fn = libzmq().function<decltype(&zmq_disconnect)>("zmq_disconnect");
  return fn != nullptr ? fn(socket, address) : unavailable(-1);
}

int zmq_setsockopt(void* socket, int option, const void* value, size_t size) {
  static const auto fn = libzmq().function<decltype(&zmq_setsockopt)>("zmq_setsockopt");
  return fn != nullptr ? fn(socket, option, value, size) : unavailable(-1);
}

int zmq_getsockopt(void* socket, int option, void* value, size_t* size) {
  static const auto fn = libzmq().function<decltype(&zmq_getsockopt)>("zmq_getsockopt");
  return fn != nullptr ? fn(socket, option, value, size) : unavailable(-1);
}

int zmq_socket_monitor(void* socket, const char* address, int events) {
  static const auto fn = libzmq().function<decltype(&zmq_socket_monitor)>("zmq_socket_monitor");
  return fn != nullptr ? fn(socket, address, events) : unavailable(-1);
}

int zmq_send(void* socket, const void* buffer, size_t size, int flags) {
  static const auto fn = libzmq().function<decltype(&zmq_send)>("zmq_send");
  return fn != nullptr ? fn(socket, buffer, size, flags) : unavailable(-1);
}

int zmq_poll(zmq_pollitem_t* items, int count, long timeout) {
  static const auto fn = libzmq().function<decltype(&zmq_poll)>("zmq_poll");
  return fn != nullptr ? fn(items, count, timeout) : unavailable(-1);
}

int zmq_msg_init(zmq_msg_t* message) {
  static const auto fn = libzmq().function<decltype(&zmq_msg_init)>("zmq_msg_init");
  // zmq_msg_close() of a message that was never initialised must still be harmless.
  if (fn == nullptr) std::memset(message, 0, sizeof *message);
  return fn != nullptr ? fn(message) : unavailable(-1);
}

int zmq_msg_close(zmq_msg_t* message) {
  static const auto fn = libzmq().function<decltype(&zmq_msg_close)>("zmq_msg_close");
  return fn != nullptr ? fn(message) : unavailable(-1);
}

int zmq_msg_recv(zmq_msg_t* message, void* socket, int flags) {
  static const auto fn = libzmq().function<decltype(&zmq_msg_recv)>("zmq_msg_recv");
  return fn != nullptr ? fn(message, socket, flags) : unavailable(-1);
}

int zmq_msg_send(zmq_msg_t* message, void* socket, int flags) {
  static const auto fn = libzmq().function<decltype(&zmq_msg_send)>("zmq_msg_send");
  return fn != nullptr ? fn(message, socket, flags) : unavailable(-1);
}

void* zmq_msg_data(zmq_msg_t* message) {
  static const auto fn = libzmq().function<decltype(&zmq_msg_data)>("zmq_msg_data");
  return fn != nullptr ? fn(message) : nullptr;
}

size_t zmq_msg_size(const zmq_msg_t* message) {
  static const auto fn = libzmq().function<decltype(&zmq_msg_size)>("zmq_msg_size");
  return fn != nullptr ? fn(message) : 0;
}

int zmq_msg_more(const zmq_msg_t* message) {
  static const auto fn = libzmq().function<decltype(&zmq_msg_more)>("zmq_msg_more");
  return fn != nullptr ? fn(message) : 0;
}

int zmq_curve_keypair(char* public_key, char* secret_key) {
  static const auto fn = libzmq().function<decltype(&zmq_curve_keypair)>("zmq_curve_keypair");
  return fn != nullptr ? fn(public_key, secret_key) : unavailable(-1);
}

int zmq_curve_public(char* public_key, const char* secret_key) {
  static const auto fn = libzmq().function<decltype(&zmq_curve_public)>("zmq_curve_public");
  return fn != nullptr ? fn(public_key, secret_key) : unavailable(-1);
}

uint8_t* zmq_z85_decode(uint8_t* destination, const char* text) {
  static const auto fn = libzmq().function<decltype(&zmq_z85_decode)>("zmq_z85_decode");
  return fn != nullptr ? fn(destination, text) : unavailable<uint8_t*>(nullptr);
}

int zmq_errno() {
  static const auto fn = libzmq().function<decltype(&zmq_errno)>("zmq_errno");
  return fn != nullptr ? fn() : errno;
}

const char* zmq_strerror(int error) {
  static const auto fn = libzmq().function<decltype(&zmq_strerror)>("zmq_strerror");
  return fn != nullptr ? fn(error) : std::strerror(error);
}

}  // extern "C"
