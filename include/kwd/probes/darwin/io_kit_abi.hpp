#pragma once

// The part of Apple's Core Foundation and I/O Kit C ABI that the IOAccelerator probe calls,
// declared from Apple's documentation (CFBase.h, CFString.h, CFNumber.h, CFDictionary.h,
// IOKitLib.h, IOTypes.h): the toolchain that compiles the darwin code on Linux (zig) carries
// macOS's libc and Mach headers but no framework. The two frameworks are opened at run time
// (io_kit_library.hpp), so nothing here is linked. tests/darwin/io_kit_abi_check.cpp holds
// every declaration below against Apple's own headers; the GitHub workflow's macOS job
// compiles it.

#include <device/device_types.h>  // io_object_t, io_name_t (Mach's, shared with I/O Kit)
#include <mach/mach.h>            // mach_port_t, kern_return_t

#include <cstdint>

namespace kwd::probes::darwin::io_kit {

// Core Foundation: opaque objects behind pointers, and the integers of CFBase.h (LP64).
struct CfObject;  // every CF type is an opaque struct reached through a pointer
using CFTypeRef = const void*;
using CFAllocatorRef = const CfObject*;
using CFStringRef = const CfObject*;
using CFNumberRef = const CfObject*;
using CFDictionaryRef = const CfObject*;
using CFMutableDictionaryRef = CfObject*;
using CFIndex = long;
using CFTypeID = unsigned long;
using Boolean = unsigned char;
using CFStringEncoding = std::uint32_t;
using CFNumberType = CFIndex;  // CF_ENUM(CFIndex, CFNumberType)

inline constexpr CFAllocatorRef kDefaultAllocator = nullptr;  // NULL is kCFAllocatorDefault
inline constexpr CFStringEncoding kCFStringEncodingUTF8 = 0x08000100;
inline constexpr CFNumberType kCFNumberSInt64Type = 4;

// I/O Kit: every object is a Mach port name (IOTypes.h).
using io_iterator_t = io_object_t;
using io_registry_entry_t = io_object_t;
using IOOptionBits = std::uint32_t;
inline constexpr io_object_t kNullObject = 0;  // IO_OBJECT_NULL

// MACH_PORT_NULL as the main port means the default one (kIOMainPortDefault, on every
// macOS; kIOMasterPortDefault before 12).
inline constexpr mach_port_t kMainPortDefault = MACH_PORT_NULL;

// The functions, as types: each is looked up by the name before its `Fn`.
using CFReleaseFn = void(CFTypeRef cf);
using CFGetTypeIDFn = CFTypeID(CFTypeRef cf);
using CFDictionaryGetTypeIDFn = CFTypeID();
using CFNumberGetTypeIDFn = CFTypeID();
using CFStringCreateWithCStringFn = CFStringRef(CFAllocatorRef alloc, const char* c_str,
                                                CFStringEncoding encoding);
using CFDictionaryGetValueFn = const void*(CFDictionaryRef dict, const void* key);
using CFNumberGetValueFn = Boolean(CFNumberRef number, CFNumberType type, void* value);
// The dictionary it returns is consumed by IOServiceGetMatchingServices.
using IOServiceMatchingFn = CFMutableDictionaryRef(const char* name);
using IOServiceGetMatchingServicesFn = kern_return_t(mach_port_t main_port,
                                                     CFDictionaryRef matching,
                                                     io_iterator_t* existing);
using IOIteratorNextFn = io_object_t(io_iterator_t iterator);
using IOObjectReleaseFn = kern_return_t(io_object_t object);
using IOObjectGetClassFn = kern_return_t(io_object_t object, char* class_name);  // io_name_t
using IORegistryEntryCreateCFPropertyFn = CFTypeRef(io_registry_entry_t entry, CFStringRef key,
                                                    CFAllocatorRef allocator, IOOptionBits options);

}  // namespace kwd::probes::darwin::io_kit

// Every function above with the framework that exports it, as X(framework, name): the
// library's members, their lookups and the check against Apple's headers are made from it.
#define KWD_IO_KIT_FUNCTIONS(X)                 \
  X(core_foundation, CFRelease)                 \
  X(core_foundation, CFGetTypeID)               \
  X(core_foundation, CFDictionaryGetTypeID)     \
  X(core_foundation, CFNumberGetTypeID)         \
  X(core_foundation, CFStringCreateWithCString) \
  X(core_foundation, CFDictionaryGetValue)      \
  X(core_foundation, CFNumberGetValue)          \
  X(io_kit, IOServiceMatching)                  \
  X(io_kit, IOServiceGetMatchingServices)       \
  X(io_kit, IOIteratorNext)                     \
  X(io_kit, IOObjectRelease)                    \
  X(io_kit, IOObjectGetClass)                   \
  X(io_kit, IORegistryEntryCreateCFProperty)
