// tprof/string_pool.h — interned strings with dense 32-bit ids.
//
//   tprof::StringPool pool;
//   tprof::StrId id = pool.intern("aten::mm");   // same id for the same text
//   std::string_view s = pool.str(id);            // valid while the pool lives
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "tprof/internal/visibility.h"

TPROF_API_BEGIN
namespace tprof {

using StrId = std::uint32_t;
inline constexpr StrId kEmptyStr = 0;  // id 0 is always ""

// Interned strings. Ids are dense, stable and never reused; views stay valid
// for the pool's lifetime. Not thread-safe for concurrent interning.
class StringPool {
 public:
  StringPool();
  StringPool(StringPool&&) noexcept;
  StringPool& operator=(StringPool&&) noexcept;
  StringPool(const StringPool&) = delete;
  StringPool& operator=(const StringPool&) = delete;
  ~StringPool();

  // At most this many strings (ids 0 .. 2^32 - 2; 2^32 - 1 is never an id).
  static constexpr std::size_t kMaxStrings = 0xffffffffu;

  // Returns the id of `s`, adding a copy of it when it is new. A new string
  // when the pool is full gets kEmptyStr and makes full() true: ids never
  // wrap. Whoever interns input (the reader) checks full() and fails.
  StrId intern(std::string_view s);
  // True once a new string found no id left (see intern()).
  bool full() const { return full_; }
  // Tests: caps every pool made from now on (a reader's too) at `limit`
  // strings, so that the overflow path runs without 2^32 strings; 0 puts
  // kMaxStrings back. Not for concurrent use with pools being made.
  static void set_limit_for_testing(std::size_t limit);
  // Returns the id of `s` if it was interned.
  std::optional<StrId> find(std::string_view s) const;
  std::string_view str(StrId id) const { return views_[id]; }
  std::size_t size() const { return views_.size(); }

 private:
  std::uint64_t hash_of(std::string_view s) const;
  void grow();
  std::string_view store(std::string_view s);

  std::vector<std::string_view> views_;
  std::vector<std::uint64_t> hashes_;  // per id
  std::vector<StrId> slots_;           // open addressing; 0xffffffff = empty
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* block_pos_ = nullptr;
  std::size_t block_left_ = 0;
  std::size_t limit_ = kMaxStrings;
  bool full_ = false;
};

}  // namespace tprof
TPROF_API_END
