// Holds include/kwd/probes/darwin/io_kit_abi.hpp against Apple's own headers: compiled on a
// Mac only (tests/CMakeLists.txt, the GitHub workflow's macOS job), where the SDK has them.
// A declaration of ours whose ABI differs from Apple's (a parameter more or less, an integer
// of another width or signedness, a value where Apple has a pointer, another constant) fails
// the build here. Types are compared by ABI, not by name: ours are opaque stand-ins.
#include <CoreFoundation/CoreFoundation.h>
#include <IOKit/IOKitLib.h>

#include <cstddef>
#include <type_traits>

#include "kwd/probes/darwin/io_kit_abi.hpp"

namespace {

namespace ours = kwd::probes::darwin::io_kit;

template <typename T>
struct Integer {
  using type = T;
};
template <typename T>
requires std::is_enum_v<T>
struct Integer<T> {
  using type = std::underlying_type_t<T>;
};

// One value as a C call passes it: nothing, a pointer, or an integer of a width and signedness.
template <typename Apple, typename Ours>
constexpr bool same_value() {
  if constexpr (std::is_void_v<Apple> || std::is_void_v<Ours>) {
    return std::is_void_v<Apple> && std::is_void_v<Ours>;
  } else if constexpr (std::is_pointer_v<Apple> || std::is_pointer_v<Ours>) {
    return std::is_pointer_v<Apple> && std::is_pointer_v<Ours>;
  } else {
    using A = typename Integer<Apple>::type;
    using O = typename Integer<Ours>::type;
    return std::is_integral_v<A> && std::is_integral_v<O> && sizeof(A) == sizeof(O) &&
           std::is_signed_v<A> == std::is_signed_v<O>;
  }
}

template <typename Apple, typename Ours>
struct SameCall : std::false_type {};
template <typename RA, typename... PA, typename RO, typename... PO>
struct SameCall<RA(PA...), RO(PO...)> {
  static constexpr bool value = [] {
    if constexpr (sizeof...(PA) != sizeof...(PO)) {
      return false;
    } else {
      return same_value<RA, RO>() && (same_value<std::decay_t<PA>, PO>() && ...);
    }
  }();
};

#define KWD_SAME_AS_APPLE(framework, name)                         \
  static_assert(SameCall<decltype(::name), ours::name##Fn>::value, \
                #name ": io_kit_abi.hpp's declaration differs from Apple's");
KWD_IO_KIT_FUNCTIONS(KWD_SAME_AS_APPLE)
#undef KWD_SAME_AS_APPLE

static_assert(std::is_same_v<ours::CFIndex, ::CFIndex>);
static_assert(std::is_same_v<ours::CFTypeID, ::CFTypeID>);
static_assert(std::is_same_v<ours::Boolean, ::Boolean>);
static_assert(std::is_same_v<ours::CFStringEncoding, ::CFStringEncoding>);
static_assert(same_value<::CFNumberType, ours::CFNumberType>());
static_assert(ours::kCFStringEncodingUTF8 == ::kCFStringEncodingUTF8);
static_assert(ours::kCFNumberSInt64Type == ::kCFNumberSInt64Type);
static_assert(std::is_same_v<ours::io_iterator_t, ::io_iterator_t>);
static_assert(std::is_same_v<ours::io_registry_entry_t, ::io_registry_entry_t>);
static_assert(std::is_same_v<ours::IOOptionBits, ::IOOptionBits>);
static_assert(ours::kNullObject == IO_OBJECT_NULL);

}  // namespace
