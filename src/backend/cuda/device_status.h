// DeviceStatusWord: the host end of the error word kernels report into
// (kernel_args.h), in pinned host memory mapped into the device. After each
// synchronisation the backend calls check(), which turns the first reported
// problem into an Error with the numbers the kernel recorded and clears it.
#pragma once

#include "backend/cuda/kernel_args.h"

namespace folio::cuda {

class DeviceStatusWord {
 public:
  DeviceStatusWord();
  ~DeviceStatusWord();
  DeviceStatusWord(const DeviceStatusWord&) = delete;
  DeviceStatusWord& operator=(const DeviceStatusWord&) = delete;

  // The pointer kernels write through.
  DeviceStatus* device() const { return device_; }
  // Throws the reported problem (then clears it); call only after the
  // device has finished the work that may report.
  void check();

 private:
  DeviceStatus* host_ = nullptr;
  DeviceStatus* device_ = nullptr;
};

}  // namespace folio::cuda
