// op_scope.h — an operator scope whose "Input Dims" follow the operands'
// rank, shared by the CPU operators (ops.cc) and the CUDA ones (cuda_ops.cc)
// so that both write the same shapes for the same operator.
//
//   static constexpr tprof::ScopeSite kSite{"op::add", tprof::kCpuOp};
//   const OpScope scope(&kSite, a, b);   // [[64, 64], [64, 64]] or [[8, 64, 64], [8, 64, 64]]
//
// TPROF_RECORD_OP_SHAPES needs the rank written at the call site, so the
// operators that take both 2-D and 3-D operands open their scope with this.
// Operands are any type with rank(), batch(), rows() and cols() (Tensor,
// DeviceTensor). Like the macros, it records nothing in a TPROF_ENABLE=OFF build.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "tprof/record_function.h"

namespace matmul_add {

class OpScope {
 public:
  using Shapes = std::initializer_list<std::initializer_list<std::int64_t>>;

  template <class A>
  OpScope(const tprof::ScopeSite* site, const A& a) noexcept {
    if constexpr (!TPROF_ENABLE) return;
    if (a.rank() == 2) {
      scope_.emplace(site, Shapes{{a.rows(), a.cols()}});
    } else {
      scope_.emplace(site, Shapes{{a.batch(), a.rows(), a.cols()}});
    }
  }
  template <class A, class B>
  OpScope(const tprof::ScopeSite* site, const A& a, const B& b) noexcept {
    if constexpr (!TPROF_ENABLE) return;
    if (a.rank() == 2) {
      scope_.emplace(site, Shapes{{a.rows(), a.cols()}, {b.rows(), b.cols()}});
    } else {
      scope_.emplace(site, Shapes{{a.batch(), a.rows(), a.cols()}, {b.batch(), b.rows(), b.cols()}});
    }
  }
  template <class A, class B, class C>
  OpScope(const tprof::ScopeSite* site, const A& a, const B& b, const C& c) noexcept {
    if constexpr (!TPROF_ENABLE) return;
    if (a.rank() == 2) {
      scope_.emplace(site, Shapes{{a.rows(), a.cols()}, {b.rows(), b.cols()}, {c.rows(), c.cols()}});
    } else {
      scope_.emplace(site, Shapes{{a.batch(), a.rows(), a.cols()},
                                  {b.batch(), b.rows(), b.cols()},
                                  {c.batch(), c.rows(), c.cols()}});
    }
  }

 private:
  std::optional<tprof::RecordFunction> scope_;
};

}  // namespace matmul_add
