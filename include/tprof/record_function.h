// tprof/record_function.h — RAII scopes and memory hooks: what a program
// calls on its hot paths while a tprof::Profiler may be recording.
//
//   void matmul_add(...) {
//     TPROF_RECORD_FUNCTION("matmul_add");            // static name: a pointer and a tick
//     { TPROF_RECORD_OP("op::mm"); gemm(...); }        // category cpu_op, as torch's aten ops
//     tprof::RecordFunction scope(layer_name);         // a runtime name: interned once per thread
//   }
//   void* p = malloc(n); tprof::record_alloc(p, n);   // [memory] events for profile_memory
//
// Cost: with no window recording, a scope is one relaxed load and one branch;
// while recording, two tick reads and one 32-byte record in a thread-local
// buffer (no lock, no allocation). Building with TPROF_ENABLE=0 (CMake
// option TPROF_ENABLE=OFF) removes the macros entirely.
//
// Thread-safety: scopes and hooks may be used from any thread at any time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "tprof/internal/recorder.h"

#ifndef TPROF_ENABLE
#define TPROF_ENABLE 1
#endif

namespace tprof {

// Categories a scope is written with (Kineto's names).
inline constexpr const char* kUserAnnotation = "user_annotation";  // torch's record_function
inline constexpr const char* kCpuOp = "cpu_op";                    // torch's aten operators

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

// A scope: recorded from construction to destruction when a window records.
class RecordFunction {
 public:
  explicit RecordFunction(const ScopeSite* site) noexcept {
    if (__builtin_expect(internal::g_recording.load(std::memory_order_relaxed), 0)) {
      a_ = reinterpret_cast<std::uintptr_t>(site);
      kind_ = internal::kRecordScope;
      start_ = internal::read_ticks();
    }
  }
  // As above, with input shapes ("Input Dims"), kept when the profiler has
  // record_shapes. Shapes beyond the thread's payload space are dropped (counted).
  RecordFunction(const ScopeSite* site, std::initializer_list<std::initializer_list<std::int64_t>> shapes) noexcept;
  // A runtime name: interned (a lock only the first time a thread sees it).
  explicit RecordFunction(std::string_view name, const char* category = kUserAnnotation) noexcept;

  ~RecordFunction() {
    if (start_ != 0) internal::append({a_, start_, internal::read_ticks(), payload_, kind_, 0});
  }

  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  std::uint64_t a_ = 0;
  std::uint64_t start_ = 0;  // 0: not recording
  std::uint32_t payload_ = 0;
  std::uint16_t kind_ = 0;
};

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

#define TPROF_CONCAT_INNER2_(a, b) a##b
#define TPROF_CONCAT2_(a, b) TPROF_CONCAT_INNER2_(a, b)

#if TPROF_ENABLE
// A scope named by a string literal, category user_annotation (torch's record_function).
#define TPROF_RECORD_FUNCTION(name)                                                          \
  static constexpr ::tprof::ScopeSite TPROF_CONCAT2_(tprof_site_, __LINE__){name};           \
  const ::tprof::RecordFunction TPROF_CONCAT2_(tprof_scope_, __LINE__) {                     \
    &TPROF_CONCAT2_(tprof_site_, __LINE__)                                                   \
  }
// A scope of category cpu_op (an operator, as torch's aten:: events).
#define TPROF_RECORD_OP(name)                                                                \
  static constexpr ::tprof::ScopeSite TPROF_CONCAT2_(tprof_site_, __LINE__){name, ::tprof::kCpuOp}; \
  const ::tprof::RecordFunction TPROF_CONCAT2_(tprof_scope_, __LINE__) {                     \
    &TPROF_CONCAT2_(tprof_site_, __LINE__)                                                   \
  }
// An operator scope with input shapes: TPROF_RECORD_OP_SHAPES("op::mm", {{m, k}, {k, n}}).
#define TPROF_RECORD_OP_SHAPES(name, ...)                                                    \
  static constexpr ::tprof::ScopeSite TPROF_CONCAT2_(tprof_site_, __LINE__){name, ::tprof::kCpuOp}; \
  const ::tprof::RecordFunction TPROF_CONCAT2_(tprof_scope_, __LINE__) {                     \
    &TPROF_CONCAT2_(tprof_site_, __LINE__), __VA_ARGS__                                      \
  }
#else
#define TPROF_RECORD_FUNCTION(name) static_cast<void>(0)
#define TPROF_RECORD_OP(name) static_cast<void>(0)
#define TPROF_RECORD_OP_SHAPES(name, ...) static_cast<void>(0)
#endif
