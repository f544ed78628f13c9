// Test support: CUPTI activity records built with the installed headers'
// structs, as a live CUPTI would hand them over, for replay through
// CuptiRecordConverter (tests/unit/cupti_replay_test.cc,
// tests/unit/cupti_trace_test.cc). Times are ns.
#pragma once

#include <cupti_activity.h>

#include <array>
#include <cstdint>

#include "src/cupti/cupti_convert.h"

namespace tprof::internal {

// The H100 80GB HBM3 of the fixtures, as a DEVICE record describes it.
inline CUpti_ActivityDevice5 h100_device(std::uint32_t id) {
  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = id;
  d.name = "NVIDIA H100 80GB HBM3";
  d.globalMemorySize = 85017493504ull;
  d.computeCapabilityMajor = 9;
  d.computeCapabilityMinor = 0;
  d.numThreadsPerWarp = 32;
  d.numMultiprocessors = 132;
  d.maxWarpsPerMultiprocessor = 64;
  d.maxBlocksPerMultiprocessor = 32;
  d.maxSharedMemoryPerMultiprocessor = 233472;
  d.maxRegistersPerMultiprocessor = 65536;
  d.maxRegistersPerBlock = 65536;
  d.maxSharedMemoryPerBlock = 49152;
  d.maxThreadsPerBlock = 1024;
  return d;
}

inline CUpti_ActivityContext3 context_record(std::uint32_t context, std::uint32_t device) {
  CUpti_ActivityContext3 c{};
  c.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  c.contextId = context;
  c.deviceId = device;
  return c;
}

// Times in the fixtures are µs with three decimals: ns here.
inline CUpti_ActivityKernel10 kernel(const char* name, std::uint64_t start_ns, std::uint64_t dur_ns, std::uint32_t corr,
                              std::array<int, 3> grid, std::array<int, 3> block, std::uint16_t regs,
                              std::int32_t static_smem, std::int32_t dynamic_smem) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start_ns;
  k.end = start_ns + dur_ns;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = 7;
  k.correlationId = corr;
  k.gridX = grid[0];
  k.gridY = grid[1];
  k.gridZ = grid[2];
  k.blockX = block[0];
  k.blockY = block[1];
  k.blockZ = block[2];
  k.registersPerThread = regs;
  k.staticSharedMemory = static_smem;
  k.dynamicSharedMemory = dynamic_smem;
  k.queued = CUPTI_TIMESTAMP_UNKNOWN;
  return k;
}

inline CUpti_ActivityMemcpy6 memcpy_record(std::uint8_t copy_kind, std::uint8_t src, std::uint8_t dst,
                                    std::uint64_t start_ns, std::uint64_t dur_ns, std::uint64_t bytes,
                                    std::uint32_t corr) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = copy_kind;
  m.srcKind = src;
  m.dstKind = dst;
  m.start = start_ns;
  m.end = start_ns + dur_ns;
  m.bytes = bytes;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = 7;
  m.correlationId = corr;
  return m;
}

inline CUpti_ActivityAPI api_record(CUpti_ActivityKind kind, std::uint32_t cbid, std::uint64_t start_ns,
                             std::uint64_t dur_ns, std::uint32_t tid, std::uint32_t corr) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.start = start_ns;
  a.end = start_ns + dur_ns;
  a.processId = tid;
  a.threadId = tid;
  a.correlationId = corr;
  return a;
}

inline CUpti_ActivitySynchronization2 sync_record(CUpti_ActivitySynchronizationType type, std::uint64_t start_ns,
                                           std::uint64_t dur_ns, std::uint32_t context, std::uint32_t stream,
                                           std::uint32_t event, std::uint32_t corr) {
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = type;
  s.start = start_ns;
  s.end = start_ns + dur_ns;
  s.contextId = context;
  s.streamId = stream;
  s.cudaEventId = event;
  s.correlationId = corr;
  return s;
}

// A kernel, copy or memset record as a CUDA graph's replay writes it: the
// graph's id and the id of the node that ran it (CUPTI's graphId,
// graphNodeId).
template <class T>
inline T from_graph(T record, std::uint32_t graph, std::uint64_t node) {
  record.graphId = graph;
  record.graphNodeId = node;
  return record;
}

template <class T>
inline void add(CuptiRecordConverter& c, const T& record) {
  c.add(reinterpret_cast<const CUpti_Activity*>(&record));
}

inline CUpti_ActivityMemset4 memset_record(std::uint64_t start_ns, std::uint64_t dur_ns, std::uint64_t bytes,
                                           std::uint32_t corr) {
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.start = start_ns;
  m.end = start_ns + dur_ns;
  m.bytes = bytes;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = 7;
  m.correlationId = corr;
  return m;
}

// A MEMORY2 record (CUpti_ActivityMemory4): an allocation or release of
// `bytes` at `address`, made by the call with correlation id `corr`.
inline CUpti_ActivityMemory4 memory_record(CUpti_ActivityMemoryOperationType op, CUpti_ActivityMemoryKind kind,
                                           std::uint64_t address, std::uint64_t bytes, std::uint64_t ts_ns,
                                           std::uint32_t corr, std::uint32_t device = 0) {
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = op;
  m.memoryKind = kind;
  m.correlationId = corr;
  m.address = address;
  m.bytes = bytes;
  m.timestamp = ts_ns;
  m.deviceId = device;
  m.contextId = 1;
  m.streamId = CUPTI_INVALID_STREAM_ID;
  return m;
}

// The same record as cudaMallocAsync / cudaFreeAsync write it: from the
// local pool at `pool`, which holds `pool_size` bytes (`used` in use) after it.
inline CUpti_ActivityMemory4 from_pool(CUpti_ActivityMemory4 m, std::uint64_t pool, std::uint64_t pool_size,
                                       std::uint64_t used) {
  m.isAsync = 1;
  m.streamId = 7;
  m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  m.memoryPoolConfig.address = pool;
  m.memoryPoolConfig.pool.size = pool_size;
  m.memoryPoolConfig.utilizedSize = used;
  return m;
}

// A MEMORY_POOL record (CUpti_ActivityMemoryPool3) of a local pool.
inline CUpti_ActivityMemoryPool3 pool_record(CUpti_ActivityMemoryPoolOperationType op, std::uint64_t pool,
                                             std::uint64_t size, std::uint64_t used, std::uint64_t min_keep,
                                             std::uint64_t ts_ns, std::uint32_t corr) {
  CUpti_ActivityMemoryPool3 p{};
  p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  p.memoryPoolOperationType = op;
  p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  p.correlationId = corr;
  p.deviceId = 0;
  p.minBytesToKeep = min_keep;
  p.address = pool;
  p.size = size;
  p.timestamp = ts_ns;
  p.utilizedSize = used;
  return p;
}

}  // namespace tprof::internal
