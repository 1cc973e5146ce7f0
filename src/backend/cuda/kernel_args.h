// The plain records that cross from the CUDA backend's host code to its
// kernels: activation kinds, the error word kernels report into, and the
// description of one KV pool. No CUDA or fmt headers, so host and device
// code both include it.
#pragma once

#include <cstdint>

namespace folio::cuda {

// A rope table's query temperature (RopeTable's): beta 0 for none.
struct RopeTemperature {
  float beta = 0.0f;
  float offset = 0.0f;
  float length = 1.0f;
};

// How a kernel reads and writes an activation tensor.
enum ActKind : int { kActF32 = 0, kActBf16 = 1 };

// What a kernel found wrong in device-resident input (ids, offsets, records),
// reported at the next synchronisation point; a, b and c are its numbers.
enum ErrorCode : int {
  kErrNone = 0,
  kErrEmbeddingId = 1,         // a: token id, b: vocabulary
  kErrGatherRow = 2,           // a: row index, b: rows
  kErrAttentionPosition = 3,   // a: token, b: position, c: sequence length
  kErrAttentionBlock = 4,      // a: token, b: block id, c: blocks
  kErrKvSlot = 5,              // a: token, b: slot, c: slots
  kErrMoeExpertId = 6,         // a: expert id, b: experts
  kErrExpertRows = 7,          // a: expert, b: begin, c: end (of the rows given, in DeviceStatus::d)
  kErrCombineRow = 8,          // a: token, b: row, c: rows
  kErrSampleLogitsRow = 9,     // a: row, b: logits row, c: logits rows
  kErrSampleAdjustRange = 10,  // a: row, b: begin, c: end
  kErrSampleLogprobSlot = 11,  // a: row, b: slot, c: slots
  kErrSampleToken = 12,        // a: row, b: token, c: vocabulary (an adjustment or a draft)
  kErrSampleNoFinite = 13,     // a: row
  kErrSampleNoMass = 14,       // a: row
  kErrSampleLogprobsTop = 15,  // a: row
  kErrSampleMaskRow = 16,      // a: row, b: mask row, c: masks
};

// Written by the first kernel that finds a problem; lives in pinned host
// memory mapped into the device, so the host reads it after a sync without
// a copy.
struct DeviceStatus {
  int code = 0;
  int reserved = 0;
  long long a = 0, b = 0, c = 0, d = 0;
};

// One KV pool as kernels read it (backend/kv_pool.h): codes of row r at
// codes + r * row_bytes, its f16 scales at scales + r * row_scales.
struct KvPoolArgs {
  void* codes = nullptr;
  std::uint16_t* scales = nullptr;
  int type = 0;  // KvDType
  int dim = 0;   // numbers per row
  std::int64_t row_bytes = 0;
  std::int64_t row_scales = 0;
};

}  // namespace folio::cuda
