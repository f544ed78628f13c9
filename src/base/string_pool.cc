#include "tprof/string_pool.h"

#include <atomic>
#include <cstring>

#include "src/base/hash.h"

namespace tprof {

namespace {
constexpr StrId kEmptySlot = 0xffffffffu;
constexpr std::size_t kBlockSize = 64 * 1024;
std::atomic<std::size_t> g_limit{StringPool::kMaxStrings};  // set_limit_for_testing
}  // namespace

void StringPool::set_limit_for_testing(std::size_t limit) {
  g_limit.store(limit == 0 || limit > kMaxStrings ? kMaxStrings : limit, std::memory_order_relaxed);
}

StringPool::StringPool() : limit_(g_limit.load(std::memory_order_relaxed)) {
  slots_.assign(64, kEmptySlot);
  views_.emplace_back();
  hashes_.push_back(internal::hash_str({}));
  slots_[hashes_[0] & (slots_.size() - 1)] = 0;
}

StringPool::StringPool(StringPool&&) noexcept = default;
StringPool& StringPool::operator=(StringPool&&) noexcept = default;
StringPool::~StringPool() = default;

std::uint64_t StringPool::hash_of(std::string_view s) const { return internal::hash_str(s); }

std::string_view StringPool::store(std::string_view s) {
  if (s.empty()) return {};
  if (s.size() > block_left_) {
    // Long strings get a block of their own so short ones keep packing densely.
    std::size_t size = s.size() > kBlockSize / 4 ? s.size() : kBlockSize;
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    char* block = blocks_.back().get();
    if (size != kBlockSize) {
      std::memcpy(block, s.data(), s.size());
      return {block, s.size()};
    }
    block_pos_ = block;
    block_left_ = size;
  }
  char* dst = block_pos_;
  std::memcpy(dst, s.data(), s.size());
  block_pos_ += s.size();
  block_left_ -= s.size();
  return {dst, s.size()};
}

void StringPool::grow() {
  std::vector<StrId> slots(slots_.size() * 2, kEmptySlot);
  const std::size_t mask = slots.size() - 1;
  for (StrId id = 0; id < views_.size(); ++id) {
    std::size_t i = hashes_[id] & mask;
    while (slots[i] != kEmptySlot) i = (i + 1) & mask;
    slots[i] = id;
  }
  slots_.swap(slots);
}

std::optional<StrId> StringPool::find(std::string_view s) const {
  const std::uint64_t h = hash_of(s);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    StrId id = slots_[i];
    if (id == kEmptySlot) return std::nullopt;
    if (hashes_[id] == h && views_[id] == s) return id;
  }
}

StrId StringPool::intern(std::string_view s) {
  const std::uint64_t h = hash_of(s);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = h & mask;
  for (;; i = (i + 1) & mask) {
    StrId id = slots_[i];
    if (id == kEmptySlot) break;
    if (hashes_[id] == h && views_[id] == s) return id;
  }
  if (views_.size() >= limit_) {
    full_ = true;  // 2^32 - 1 would be kEmptySlot, 2^32 would wrap to 0 ("")
    return kEmptyStr;
  }
  const StrId id = static_cast<StrId>(views_.size());
  views_.push_back(store(s));
  hashes_.push_back(h);
  slots_[i] = id;
  if (views_.size() * 2 > slots_.size()) grow();
  return id;
}

}  // namespace tprof
