// CUPTI activity records -> DeviceEvents (src/capture/activity_source.h),
// named and with args as Kineto (PyTorch's profiler) writes them. Pure
// conversion: needs the CUPTI headers, not libcupti, so the replay tests
// feed it hand-built records on any machine.
//
//   CuptiRecordConverter conv;
//   CUpti_Activity* rec = nullptr;
//   while (cuptiActivityGetNextRecord(buf, valid_bytes, &rec) == CUPTI_SUCCESS) conv.add(rec);
//   ...                                   // more buffers, in any order
//   DeviceBatch batch;
//   conv.finish(&batch);                  // events, text, device properties
//
// Records may arrive in any order across buffers: kernels (which need the
// DEVICE record for "blocks per SM" and occupancy), synchronizations
// (which need the CONTEXT record for their device) and memory records
// (which need the API record of their call for its thread) are resolved in
// finish().
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/capture/activity_source.h"

namespace tprof::internal {

// The DEVICE record fields that occupancy and "deviceProperties" use.
struct CuptiDevice {
  std::uint32_t id = 0;
  std::string name;
  std::uint64_t global_memory_bytes = 0;
  std::uint32_t compute_major = 0, compute_minor = 0;
  std::uint32_t max_threads_per_block = 0;
  std::uint32_t max_threads_per_sm = 0;
  std::uint32_t regs_per_block = 0, regs_per_sm = 0;
  std::uint32_t warp_size = 0;
  std::uint32_t smem_per_block = 0, smem_per_sm = 0;
  std::uint32_t num_sms = 0;
  // Not in the DEVICE record: derived from the compute capability (see .cc).
  std::uint32_t smem_reserved_per_block = 0, smem_per_block_optin = 0;
};

class CuptiRecordConverter {
 public:
  // A device described by the driver rather than by a DEVICE record
  // (CUPTI writes those only for contexts created while the kind is on): kept
  // unless a DEVICE record for the same id has come or comes later.
  void add_device_info(const CuptiDevice& device) { devices_.emplace(device.id, device); }

  // Converts one record, read according to record->kind as the struct
  // version of the installed headers (CUpti_ActivityKernel10, Memcpy6,
  // MemcpyPtoP4, Memset4, API, Synchronization2, Overhead3, Device5,
  // Context3, Memory4, MemoryPool3). The record is copied: it need not
  // outlive the call. Kinds other than those, and memory records of
  // memory that is neither on a device nor pinned host memory, are counted
  // in ignored_records(). Not thread-safe.
  void add(const CUpti_Activity* record);

  // Appends the events added since the last finish() to *out, their text
  // included, and one deviceProperties object per device seen so far.
  // Devices and contexts are remembered across finish() calls: CUPTI may
  // report a context once, in an earlier window than its work.
  void finish(DeviceBatch* out);

  // Drops the runtime and driver call records torch.profiler leaves out
  // (src/cupti/kineto_api_calls.h) when true; keeps every call when false
  // (the default).
  void keep_torch_api_calls_only(bool on) { torch_api_calls_only_ = on; }

  // Memory records are recorded: the threads of the API records
  // keep_torch_api_calls_only drops are kept until finish(), so that memory
  // made by such a call still finds its thread. Off by default (the drops
  // cost nothing then).
  void expect_memory_records(bool on) { memory_threads_ = on; }

  // Records of kinds the converter does not handle, since the last finish().
  std::uint64_t ignored_records() const { return ignored_; }
  // API call records dropped by keep_torch_api_calls_only, since the last finish().
  std::uint64_t filtered_api_records() const { return filtered_api_; }
  // Records whose end preceded their start (written with end = start).
  std::uint64_t clamped_records() const { return clamped_; }

 private:
  // What a kernel's event needs once device properties are known.
  struct PendingKernel {
    std::int64_t start_ns, end_ns;
    std::uint64_t queued;
    std::uint32_t device, context, stream, correlation;
    std::int32_t grid[3], block[3];
    std::int32_t static_smem, dynamic_smem;
    std::uint16_t registers;
    std::uint32_t name_id;  // index into kernel_names_
    std::uint64_t graph_node;  // 0 unless replayed from a CUDA graph
    std::uint32_t graph;
  };
  // What a synchronization's event needs once contexts are known.
  struct PendingSync {
    std::int64_t start_ns, end_ns;
    std::uint32_t type, context, stream, event_id, correlation;
  };

  void add_kernel(const CUpti_Activity* record);
  void add_memcpy(const CUpti_Activity* record);
  void add_memcpy_peer(const CUpti_Activity* record);
  void add_memset(const CUpti_Activity* record);
  void add_api(const CUpti_Activity* record, DeviceEventKind kind);
  void add_sync(const CUpti_Activity* record);
  void add_overhead(const CUpti_Activity* record);
  void add_device(const CUpti_Activity* record);
  void add_context(const CUpti_Activity* record);
  void add_memory(const CUpti_Activity* record);
  void add_memory_pool(const CUpti_Activity* record);
  // The device of a context, from a work record (kernel, copy, memset).
  void learn_context(std::uint32_t context, std::uint32_t device);

  // The event of a device activity record (start, end, deviceId, streamId,
  // correlationId), its times ordered.
  template <class R>
  DeviceEvent work_event(DeviceEventKind kind, const R& r);
  // Into scratch_: the args copies and memsets share (device, context,
  // stream, correlation, bytes, bandwidth).
  template <class R>
  void write_transfer_args(const R& r, std::int64_t dur_ns);
  void emit_kernel(const PendingKernel& k, std::pair<std::uint32_t, std::uint32_t> name);
  void emit_sync(const PendingSync& s);
  // Orders times, counting a reversed pair.
  void clamp(std::int64_t start_ns, std::int64_t* end_ns);
  // Appends an event whose args are the members of `args_object` ("{...}").
  void push(DeviceEvent e, std::pair<std::uint32_t, std::uint32_t> name, std::string_view args_object);
  std::pair<std::uint32_t, std::uint32_t> api_name(DeviceEventKind kind, std::uint32_t cbid);
  std::uint32_t intern_kernel_name(const char* mangled);

  DeviceBatch batch_;  // events converted so far; kernels and syncs join in finish()
  std::vector<PendingKernel> kernels_;
  std::vector<PendingSync> syncs_;
  // Kernel names as CUPTI gives them (mangled), interned: a training step
  // launches the same few kernels thousands of times.
  std::deque<std::string> kernel_names_;
  std::unordered_map<std::string_view, std::uint32_t> kernel_name_ids_;
  // (kind, cbid) -> name text in batch_, written once per API.
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> api_names_;
  std::map<std::uint32_t, CuptiDevice> devices_;  // by device id: properties come out in id order
  std::unordered_map<std::uint32_t, std::uint32_t> context_device_;
  std::string scratch_;  // one args object at a time
  // Memory records of this batch; their threads are found in finish().
  std::vector<DeviceMemoryEvent> memory_;
  // Correlation id -> OS thread of the API records dropped by
  // keep_torch_api_calls_only in this batch (only with expect_memory_records).
  std::unordered_map<std::uint64_t, std::int64_t> dropped_call_threads_;
  // Address -> bytes of this batch's allocations not yet released: the
  // size of a release record that gives none. Per batch, so that what a
  // window allocates and frees after it ends is not kept for ever.
  std::unordered_map<std::uint64_t, std::uint64_t> live_bytes_;
  bool memory_threads_ = false;
  std::uint64_t ignored_ = 0;
  std::uint64_t clamped_ = 0;
  std::uint64_t filtered_api_ = 0;
  bool torch_api_calls_only_ = false;
};

// Kineto's names for CUPTI enumerations (cupti_strings.cpp).
std::string_view memcpy_kind_name(std::uint32_t copy_kind) noexcept;
std::string_view memory_kind_name(std::uint32_t memory_kind) noexcept;
std::string_view sync_kind_name(std::uint32_t sync_type) noexcept;
std::string_view overhead_kind_name(std::uint32_t overhead_kind) noexcept;

// The kernel name as Kineto shows it: demangled, or `name` unchanged when
// it is not a mangled C++ name ("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT").
std::string demangle_kernel_name(const char* name);

// Kineto's "est. achieved occupancy %" of a kernel launch: the occupancy
// calculator's active blocks per SM (capped by the blocks there are to run)
// times the block size over the SM's thread capacity, rounded. 0 when the
// calculator rejects the launch (e.g. more static shared memory than the
// default per-block limit, as cuBLAS's nvjet kernels use).
int estimated_occupancy_percent(const CuptiDevice& device, std::uint16_t registers,
                                std::int32_t static_smem, std::int32_t dynamic_smem, std::int64_t block_threads,
                                float blocks_per_sm);

}  // namespace tprof::internal
