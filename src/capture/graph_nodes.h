// CUDA graph nodes and the scope each was created in, kept across windows.
//
// A CUDA graph is captured once (torch.compile's mode="reduce-overhead"
// captures during its warm-up steps) and replayed for the rest of the run;
// each replayed kernel names the node that ran it (CUPTI's graphNodeId),
// often a copy of the captured node made by cudaGraphInstantiate. The
// trace builder links a node's creation to the scope open on its thread in
// the window that saw it, and stores the names here, so that replays in
// later windows are attributed by name too:
//
//   GraphNodeScopes& nodes = graph_node_scopes();          // process-wide
//   nodes.add_node(17, "aten::mm", "forward", t0);         // build_trace, window 1
//   nodes.add_clone(42, 17);                               // instantiation copied 17
//   GraphNodeScopes::Names n;
//   if (nodes.find(42, &n)) ...                            // window 3: "aten::mm", "forward", t0
//
// Bounded: past kMaxEntries nodes and copies, new ones are not kept
// (counted in dropped()). Names are stored once each and never removed.
// Thread-safe (one lock; used once per window and node, never per event of
// the hot path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tprof::internal {

class GraphNodeScopes {
 public:
  // Nodes and copies held at most: a model's graphs hold thousands of
  // nodes (torch.compile captures one graph per input shape). An entry
  // costs some 50 bytes, plus its names where they are not shared.
  static constexpr std::size_t kMaxEntries = std::size_t{1} << 18;
  // Copies of copies followed at most (cudaGraphClone, then instantiation).
  static constexpr int kMaxCopies = 16;

  // What a node was created in: the innermost scope (an op, a user
  // annotation, an NVTX range or a ProfilerStep#N) and the innermost user
  // annotation or NVTX range (empty when none), with that annotation's
  // start (epoch ns: which instance of the name it was). Views into the
  // table, valid while it lives.
  struct Names {
    std::string_view scope, annotation;
    std::int64_t annotation_start_ns = 0;
  };

  // Records the scope open when `node` was created (the first record of a
  // node wins: a node is created once).
  void add_node(std::uint64_t node, std::string_view scope, std::string_view annotation,
                std::int64_t annotation_start_ns);
  // Records that `node` is a copy of `original`.
  void add_clone(std::uint64_t node, std::uint64_t original);
  // The node `node` is a copy of, followed through copies of copies
  // (`node` itself when it is no copy the table knows).
  std::uint64_t original(std::uint64_t node) const;
  // The names of `node`'s original (original(node)); false when unknown.
  bool find(std::uint64_t node, Names* out) const;

  std::size_t size() const;
  // Nodes and copies not kept because the table was full.
  std::uint64_t dropped() const;
  // Forgets everything (tests; views from find() die with it).
  void clear();
  // Held around fork() (pthread_atfork), released on both sides.
  void lock_for_fork() { mu_.lock(); }
  void unlock_after_fork() { mu_.unlock(); }

 private:
  bool full() const { return nodes_.size() + clones_.size() >= kMaxEntries; }
  std::uint32_t intern(std::string_view s);
  std::uint64_t original_locked(std::uint64_t node) const;

  mutable std::mutex mu_;
  std::deque<std::string> names_;  // stable addresses; names_[0] is ""
  std::unordered_map<std::string_view, std::uint32_t> name_ids_;
  struct Node {
    std::uint32_t scope, annotation;  // into names_
    std::int64_t annotation_start_ns;
  };
  std::unordered_map<std::uint64_t, Node> nodes_;
  std::unordered_map<std::uint64_t, std::uint64_t> clones_;                           // copy -> original
  std::uint64_t dropped_ = 0;
};

// The process's table: what Profiler windows read and extend. Never
// destroyed (a window may end during exit).
GraphNodeScopes& graph_node_scopes();

}  // namespace tprof::internal
