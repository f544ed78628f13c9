// Kernel names short enough for a line of text that still say which code
// ran: the one shortening every view uses (diagnose, kernels, compare, the
// HTML report). A demangled kernel name loses its return type, parameter
// list, namespaces and the template arguments every kernel of its family
// carries (the pointer array, offset calculators, load/store policies), and
// keeps the functor and the dtype:
//
//   void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
//       at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)
//   -> vectorized_elementwise_kernel<4, FillFunctor<float>>
//
// Within one view, two different kernels never print the same: KernelNames
// gives the kernels whose short names collide a longer form (docs/diagnose.md,
// "Kernel names").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tprof/trace.h"

namespace tprof::internal {

// The short form's limit in code points (the diagnose text's lines are 160).
inline constexpr std::size_t kShortKernelName = 72;

// The short form of one name, alone (no other name to tell it from): names
// that are not C++ signatures ("Memcpy DtoD (Device -> Device)",
// "nvjet_sm90_tst_...") come back unchanged, up to max_chars; longer ones
// end in "…".
std::string short_kernel_name(std::string_view name, std::size_t max_chars = kShortKernelName);

// The same name with only its return type, parameter list and namespaces
// removed: every template argument and lambda kept (the form two kernels
// whose short names collide are told apart by).
std::string long_kernel_name(std::string_view name);

// Short names for one view, unique among the names it was given: a
// collision between different names is resolved with long_kernel_name, then
// with " #2", " #3" in the order given.
class KernelNames {
 public:
  KernelNames() = default;
  explicit KernelNames(const std::vector<std::string_view>& names, std::size_t max_chars = kShortKernelName);
  // Every device activity name in the trace (kernels, copies, memsets,
  // range-profiler ranges).
  explicit KernelNames(const Trace& trace, std::size_t max_chars = kShortKernelName);
  // Names that are not kernel signatures (ops "aten::addmm", annotations,
  // compiled-graph names): kept whole up to max_chars, else cut in the
  // middle (the start and the end kept); collisions numbered " #2", " #3".
  static KernelNames plain(const std::vector<std::string_view>& names, std::size_t max_chars);

  // The view's name for `name`; a name not given to the constructor (an
  // op's "aten::mm", a thread) comes back as it is.
  std::string get(std::string_view name) const;
  // Whether `name` is one of the view's kernel names.
  bool has(std::string_view name) const { return map_.count(std::string(name)) != 0; }

 private:
  void build(const std::vector<std::string_view>& names);
  std::size_t max_chars_ = kShortKernelName;
  bool signatures_ = true;  // names are parsed as C++ signatures
  std::unordered_map<std::string, std::string> map_;
};

}  // namespace tprof::internal
