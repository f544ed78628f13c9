#include "src/capture/graph_nodes.h"

#include <pthread.h>

namespace tprof::internal {

std::uint32_t GraphNodeScopes::intern(std::string_view s) {
  if (names_.empty()) {
    names_.emplace_back();
    name_ids_.emplace(std::string_view(names_.back()), 0);
  }
  const auto it = name_ids_.find(s);
  if (it != name_ids_.end()) return it->second;
  names_.emplace_back(s);
  const auto id = static_cast<std::uint32_t>(names_.size() - 1);
  name_ids_.emplace(std::string_view(names_.back()), id);
  return id;
}

void GraphNodeScopes::add_node(std::uint64_t node, std::string_view scope, std::string_view annotation,
                               std::int64_t annotation_start_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_.count(node) != 0) return;
  if (full()) {
    ++dropped_;
    return;
  }
  const std::uint32_t s = intern(scope);
  const std::uint32_t a = intern(annotation);
  nodes_.emplace(node, Node{s, a, annotation_start_ns});
}

void GraphNodeScopes::add_clone(std::uint64_t node, std::uint64_t original) {
  if (node == original) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (clones_.count(node) != 0) return;
  if (full()) {
    ++dropped_;
    return;
  }
  clones_.emplace(node, original);
}

std::uint64_t GraphNodeScopes::original_locked(std::uint64_t node) const {
  // Bounded: ids come from the tracer, and a cycle must not hang a window.
  for (int i = 0; i < kMaxCopies; ++i) {
    const auto it = clones_.find(node);
    if (it == clones_.end()) break;
    node = it->second;
  }
  return node;
}

std::uint64_t GraphNodeScopes::original(std::uint64_t node) const {
  std::lock_guard<std::mutex> lock(mu_);
  return original_locked(node);
}

bool GraphNodeScopes::find(std::uint64_t node, Names* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = nodes_.find(original_locked(node));
  if (it == nodes_.end()) return false;
  out->scope = names_[it->second.scope];
  out->annotation = names_[it->second.annotation];
  out->annotation_start_ns = it->second.annotation_start_ns;
  return true;
}

std::size_t GraphNodeScopes::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.size() + clones_.size();
}

std::uint64_t GraphNodeScopes::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void GraphNodeScopes::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_.clear();
  clones_.clear();
  name_ids_.clear();
  names_.clear();
  dropped_ = 0;
}

GraphNodeScopes& graph_node_scopes() {
  static GraphNodeScopes* t = new GraphNodeScopes();
  return *t;
}

namespace {

// As the recorder's locks (recorder.cc): a fork() while another thread
// holds the table's lock would leave the child's copy locked forever.
[[maybe_unused]] const bool g_fork_handlers = [] {
  return pthread_atfork([] { graph_node_scopes().lock_for_fork(); }, [] { graph_node_scopes().unlock_after_fork(); },
                        [] { graph_node_scopes().unlock_after_fork(); }) == 0;
}();

}  // namespace

}  // namespace tprof::internal
