// tprof/record_function.h — RAII scopes, events and memory hooks: what a
// program calls on its hot paths while a tprof::Profiler may be recording.
//
//   void matmul_add(...) {
//     TPROF_RECORD_FUNCTION_SCOPE();                  // named "matmul_add" (the enclosing function)
//     TPROF_RECORD_FUNCTION("matmul_add");            // static name: a pointer and a tick
//     { TPROF_RECORD_OP("op::mm"); gemm(...); }        // category cpu_op, as torch's aten ops
//     tprof::RecordFunction scope(layer_name);         // a runtime name: interned once per thread
//     TPROF_ARG(scope, "batch", 64);                   // Kineto "args" of the scope, static key
//     scope.arg("layout", "NHWC");                     // a runtime key (interned)
//     TPROF_INSTANT("cache flushed");                  // an instant event ("i")
//     tprof::counter("queue depth", queue.size());     // a counter sample ("C")
//   }
//   tprof::Flow f = tprof::flow_begin("task");        // on the submitting thread, inside a scope ...
//   tprof::flow_end(f);                               // ... on the thread that runs it, inside a scope
//   void* p = malloc(n); tprof::record_alloc(p, n);   // [memory] events for profile_memory
//
// Cost: with no window recording, every call here is one relaxed load and
// one branch; while recording, a scope is two tick reads and one 32-byte
// record in a thread-local buffer (no lock, no allocation); an argument
// with a static key (TPROF_ARG, ArgKey) one more record. Runtime names,
// runtime argument keys and string values are interned: a hash lookup in a
// thread-local cache, a lock only the first time a thread sees one.
// Building with TPROF_ENABLE=0 (CMake option TPROF_ENABLE=OFF) removes the
// macros entirely.
//
// A full buffer drops what begins after it filled, counted exactly; scopes
// already open keep their records, so no child is kept without its parent.
//
// Thread-safety: scopes, events and hooks may be used from any thread at any
// time; one RecordFunction belongs to the thread that made it.
//
// Signal handlers: the calls with static names are async-signal-safe on a
// thread whose buffer is attached for the window: TPROF_RECORD_FUNCTION,
// TPROF_RECORD_FUNCTION_SCOPE, TPROF_RECORD_OP, TPROF_RECORD_OP_SHAPES,
// TPROF_RECORD_FUNCTION_VAR, TPROF_ARG and arg(const ArgKey*, number),
// RecordFunction(const ScopeSite*),
// TPROF_INSTANT, TPROF_COUNTER, instant/counter(const ScopeSite*),
// record_alloc, record_free and flow_end. A handler's record is kept, or,
// when the handler interrupted tprof on its own thread, refused and counted
// as dropped; the interrupted thread's records are always kept. A thread's
// buffer is attached by its first record in each window (a lock; the first
// time the thread records at all, an allocation): Profiler::start() and the
// step() that opens a window attach the calling thread, any other thread
// must record once in the window before a handler on it does. Runtime names
// (RecordFunction(std::string_view), instant/counter(std::string_view),
// flow_begin, arg() with a runtime key or a string value) intern under a
// lock and allocate: not from a handler.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <type_traits>

#include "tprof/internal/recorder.h"
#include "tprof/internal/visibility.h"

#ifndef TPROF_ENABLE
#define TPROF_ENABLE 1
#endif

TPROF_API_BEGIN
namespace tprof {

// Categories a scope is written with (Kineto's names).
inline constexpr const char* kUserAnnotation = "user_annotation";  // torch's record_function
inline constexpr const char* kCpuOp = "cpu_op";                    // torch's aten operators
inline constexpr const char* kCpuInstantEvent = "cpu_instant_event";  // Kineto's instants
inline constexpr const char* kUserCounter = "user_counter";           // counter samples

// A call site, described once (static constexpr) per macro use.
struct ScopeSite {
  const char* name;
  const char* category = kUserAnnotation;
};

// c10::DeviceType values as torch writes them in [memory] events.
struct Device {
  std::int16_t type = 0;    // 0 CPU, 1 CUDA
  std::int16_t index = -1;  // -1 for the CPU
};
inline constexpr Device kCpuDevice{0, -1};
inline constexpr Device cuda_device(std::int16_t index) { return Device{1, index}; }

using Shapes = std::initializer_list<std::initializer_list<std::int64_t>>;

// An argument's key, described once (static constexpr) where it is used:
// the record holds its address, and the name is read when the trace is
// built. TPROF_ARG declares one; declare your own to reuse it:
//   static constexpr tprof::ArgKey kTokens{"tokens"};  scope.arg(&kTokens, n);
struct ArgKey {
  const char* name;
};

// A scope: recorded from construction to destruction when a window records.
class RecordFunction {
 public:
  // A scope that records nothing (TPROF_RECORD_FUNCTION_VAR when TPROF_ENABLE=0).
  enum Off { kOff };
  explicit RecordFunction(Off) noexcept {}
  explicit RecordFunction(const ScopeSite* site) noexcept {
    if (__builtin_expect(internal::g_recording.load(std::memory_order_relaxed), 0)) {
      internal::open_span(reinterpret_cast<std::uintptr_t>(site), internal::kRecordScope, 0, &slot_);
    }
  }
  // As above, with input shapes ("Input Dims"), kept when the profiler has
  // record_shapes. Shapes beyond the thread's payload space are dropped (counted).
  RecordFunction(const ScopeSite* site, Shapes shapes) noexcept;
  // A runtime name: interned (a lock only the first time a thread sees it).
  explicit RecordFunction(std::string_view name, const char* category = kUserAnnotation) noexcept;
  RecordFunction(std::string_view name, Shapes shapes, const char* category = kUserAnnotation) noexcept;

  ~RecordFunction() {
    if (slot_.buffer != nullptr) internal::close_span(slot_);
  }

  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

  // Arguments, written in the scope's Kineto "args" after "External id" and
  // "Input Dims", in the order given. Recorded only while the scope is (a
  // record each, dropped and counted when the buffer is full). Call from the
  // scope's thread, before it ends.
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  RecordFunction& arg(std::string_view key, T value) noexcept {
    if (slot_.buffer != nullptr) {
      add_arg(key, std::is_signed_v<T> ? internal::kArgInt : internal::kArgUint, static_cast<std::uint64_t>(value));
    }
    return *this;
  }
  RecordFunction& arg(std::string_view key, double value) noexcept;
  RecordFunction& arg(std::string_view key, bool value) noexcept;
  RecordFunction& arg(std::string_view key, std::string_view value) noexcept;
  RecordFunction& arg(std::string_view key, const char* value) noexcept {
    return arg(key, value != nullptr ? std::string_view(value) : std::string_view());
  }
  // The same with a static key (an ArgKey that outlives the window's
  // trace): a number costs one record, no lookup. A string value is still
  // interned.
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  RecordFunction& arg(const ArgKey* key, T value) noexcept {
    if (slot_.buffer != nullptr) {
      internal::append_arg(slot_, reinterpret_cast<std::uintptr_t>(key),
                           static_cast<std::uint16_t>((std::is_signed_v<T> ? internal::kArgInt : internal::kArgUint) |
                                                      internal::kArgStaticKey),
                           static_cast<std::uint64_t>(value));
    }
    return *this;
  }
  RecordFunction& arg(const ArgKey* key, double value) noexcept {
    if (slot_.buffer != nullptr) {
      std::uint64_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      internal::append_arg(slot_, reinterpret_cast<std::uintptr_t>(key), static_cast<std::uint16_t>(internal::kArgDouble | internal::kArgStaticKey),
                           bits);
    }
    return *this;
  }
  RecordFunction& arg(const ArgKey* key, bool value) noexcept {
    if (slot_.buffer != nullptr) {
      internal::append_arg(slot_, reinterpret_cast<std::uintptr_t>(key), static_cast<std::uint16_t>(internal::kArgBool | internal::kArgStaticKey),
                           value ? 1 : 0);
    }
    return *this;
  }
  RecordFunction& arg(const ArgKey* key, std::string_view value) noexcept;
  RecordFunction& arg(const ArgKey* key, const char* value) noexcept {
    return arg(key, value != nullptr ? std::string_view(value) : std::string_view());
  }

  // Whether this scope is being recorded.
  bool recording() const noexcept { return slot_.buffer != nullptr; }

 private:
  void add_arg(std::string_view key, std::uint16_t type, std::uint64_t value) noexcept;
  void add_arg_inside(std::string_view key, std::uint16_t type, std::uint64_t value) noexcept;

  internal::OpenSlot slot_;
};

// An instant event (ph "i", thread scope, category cpu_instant_event unless
// the site says otherwise) at this moment.
inline void instant(const ScopeSite* site) noexcept {
  if (__builtin_expect(internal::g_recording.load(std::memory_order_relaxed), 0)) {
    internal::append(
        {reinterpret_cast<std::uintptr_t>(site), internal::read_ticks(), 0, 0, internal::kRecordInstant, 0});
  }
}
// The same with a runtime name (interned).
void instant(std::string_view name) noexcept;

// A counter sample (ph "C", args {"value": v}): the counter `name` has
// `value` from now on. Viewers draw each name as a track.
inline void counter(const ScopeSite* site, double value) noexcept {
  if (__builtin_expect(internal::g_recording.load(std::memory_order_relaxed), 0)) {
    std::uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    internal::append(
        {reinterpret_cast<std::uintptr_t>(site), internal::read_ticks(), bits, 0, internal::kRecordCounter, 0});
  }
}
void counter(std::string_view name, double value) noexcept;

// A flow between two points of the program, usually on two threads (a task
// submitted here and run there): an arrow from the scope open around
// flow_begin() to the scope open around flow_end(). Copyable; id 0 when
// flow_begin() ran while no window recorded (flow_end() then does nothing).
// A flow whose other end falls outside the window is not written.
struct Flow {
  std::uint64_t id = 0;
  std::uint64_t name = 0;  // interned name key
};
Flow flow_begin(std::string_view name = "flow") noexcept;
void flow_end(const Flow& flow) noexcept;

// Records an allocation of `bytes` at `ptr` on `device` (a [memory] event,
// when the profiler has profile_memory). Thread-safe, allocation-free.
inline void record_alloc(const void* ptr, std::int64_t bytes, Device device = kCpuDevice) noexcept {
  if (__builtin_expect(internal::g_recording.load(std::memory_order_relaxed), 0) &&
      internal::g_profile_memory.load(std::memory_order_relaxed)) {
    internal::append({reinterpret_cast<std::uintptr_t>(ptr), internal::read_ticks(), static_cast<std::uint64_t>(bytes),
                      0, internal::kRecordMemory,
                      static_cast<std::uint16_t>((static_cast<std::uint16_t>(device.type) << 8) |
                                                 (static_cast<std::uint16_t>(device.index) & 0xff))});
  }
}

// Records that `bytes` at `ptr` were freed (a negative [memory] event).
inline void record_free(const void* ptr, std::int64_t bytes, Device device = kCpuDevice) noexcept {
  // -INT64_MIN does not exist: the most negative size frees INT64_MAX bytes.
  record_alloc(ptr, bytes == INT64_MIN ? INT64_MAX : -bytes, device);
}

}  // namespace tprof
TPROF_API_END

#define TPROF_CONCAT_INNER2_(a, b) a##b
#define TPROF_CONCAT2_(a, b) TPROF_CONCAT_INNER2_(a, b)

// Each macro use declares its site and scope under names made unique by
// __COUNTER__, so two on one line (a macro expanding to two) do not collide.
#define TPROF_UNIQUE_(prefix, id) TPROF_CONCAT2_(prefix, id)
#define TPROF_SCOPE_IMPL_(id, name, category)                                         \
  static constexpr ::tprof::ScopeSite TPROF_UNIQUE_(tprof_site_, id){name, category}; \
  const ::tprof::RecordFunction TPROF_UNIQUE_(tprof_scope_, id) { &TPROF_UNIQUE_(tprof_site_, id) }
#define TPROF_SCOPE_SHAPES_IMPL_(id, name, category, ...)                             \
  static constexpr ::tprof::ScopeSite TPROF_UNIQUE_(tprof_site_, id){name, category}; \
  const ::tprof::RecordFunction TPROF_UNIQUE_(tprof_scope_, id) {                     \
    &TPROF_UNIQUE_(tprof_site_, id), ::tprof::Shapes __VA_ARGS__                      \
  }

#if TPROF_ENABLE
// A scope named by a string literal, category user_annotation (torch's record_function).
#define TPROF_RECORD_FUNCTION(name) TPROF_SCOPE_IMPL_(__COUNTER__, name, ::tprof::kUserAnnotation)
// A scope named after the enclosing function (__func__: "forward", not the signature).
#define TPROF_RECORD_FUNCTION_SCOPE() TPROF_SCOPE_IMPL_(__COUNTER__, __func__, ::tprof::kUserAnnotation)
// A scope of category cpu_op (an operator, as torch's aten:: events).
#define TPROF_RECORD_OP(name) TPROF_SCOPE_IMPL_(__COUNTER__, name, ::tprof::kCpuOp)
// An operator scope with input shapes: TPROF_RECORD_OP_SHAPES("op::mm", {{m, k}, {k, n}}).
#define TPROF_RECORD_OP_SHAPES(name, ...) TPROF_SCOPE_SHAPES_IMPL_(__COUNTER__, name, ::tprof::kCpuOp, __VA_ARGS__)
// A scope in a variable you name, for arguments:
//   TPROF_RECORD_FUNCTION_VAR(scope, "decode"); scope.arg("tokens", n);
#define TPROF_RECORD_FUNCTION_VAR(var, name) TPROF_SCOPE_VAR_IMPL_(__COUNTER__, var, name)
#define TPROF_SCOPE_VAR_IMPL_(id, var, name)                                                          \
  static constexpr ::tprof::ScopeSite TPROF_UNIQUE_(tprof_site_, id){name, ::tprof::kUserAnnotation}; \
  ::tprof::RecordFunction var { &TPROF_UNIQUE_(tprof_site_, id) }
// An argument of a scope variable, keyed by a string literal (one record,
// no lookup): TPROF_ARG(scope, "tokens", n);
#define TPROF_ARG(var, key, value) TPROF_ARG_IMPL_(__COUNTER__, var, key, value)
#define TPROF_ARG_IMPL_(id, var, key, value)                                       \
  do {                                                                             \
    static constexpr ::tprof::ArgKey TPROF_UNIQUE_(tprof_arg_, id){key};           \
    (var).arg(&TPROF_UNIQUE_(tprof_arg_, id), value);                              \
  } while (0)
// An instant event named by a string literal.
#define TPROF_INSTANT(name) TPROF_INSTANT_IMPL_(__COUNTER__, name)
#define TPROF_INSTANT_IMPL_(id, name)                                                                    \
  do {                                                                                                   \
    static constexpr ::tprof::ScopeSite TPROF_UNIQUE_(tprof_site_, id){name, ::tprof::kCpuInstantEvent}; \
    ::tprof::instant(&TPROF_UNIQUE_(tprof_site_, id));                                                   \
  } while (0)
// A counter sample named by a string literal.
#define TPROF_COUNTER(name, value) TPROF_COUNTER_IMPL_(__COUNTER__, name, value)
#define TPROF_COUNTER_IMPL_(id, name, value)                                                         \
  do {                                                                                               \
    static constexpr ::tprof::ScopeSite TPROF_UNIQUE_(tprof_site_, id){name, ::tprof::kUserCounter}; \
    ::tprof::counter(&TPROF_UNIQUE_(tprof_site_, id), static_cast<double>(value));                   \
  } while (0)
#else
namespace tprof::internal {
// Names its arguments without evaluating them (it is only ever inside
// sizeof): a variable computed only for a disabled macro stays "used".
template <class... T>
constexpr int unevaluated_use(const T&...) noexcept {
  return 0;
}
}  // namespace tprof::internal
#define TPROF_UNUSED_ARGS_(...) static_cast<void>(sizeof(::tprof::internal::unevaluated_use(__VA_ARGS__)))
#define TPROF_RECORD_FUNCTION(name) TPROF_UNUSED_ARGS_(name)
#define TPROF_RECORD_FUNCTION_SCOPE() static_cast<void>(0)
#define TPROF_RECORD_OP(name) TPROF_UNUSED_ARGS_(name)
#define TPROF_RECORD_OP_SHAPES(name, ...) TPROF_UNUSED_ARGS_(name, ::tprof::Shapes __VA_ARGS__)
#define TPROF_RECORD_FUNCTION_VAR(var, name) \
  TPROF_UNUSED_ARGS_(name);                  \
  ::tprof::RecordFunction var(::tprof::RecordFunction::kOff)
#define TPROF_ARG(var, key, value) TPROF_UNUSED_ARGS_(var, key, value)
#define TPROF_INSTANT(name) TPROF_UNUSED_ARGS_(name)
#define TPROF_COUNTER(name, value) TPROF_UNUSED_ARGS_(name, value)
#endif
