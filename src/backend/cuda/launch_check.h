// Failure reporting for the kernel launchers (.cu files): each launch is
// followed by check_launch, which turns a launch error into folio's Error
// with the kernel's name. Defined in host C++ (launch_check.cc), so the .cu
// files stay free of fmt.
#pragma once

#include <cstdint>

namespace folio::cuda {

// Throws Error when the last launch failed (bad configuration, no kernel
// image for this GPU, a sticky error from an earlier fault).
void check_launch(const char* kernel);
// Throws Error unless `blocks` fits a grid's x dimension.
void check_grid(std::int64_t blocks, const char* kernel);
[[noreturn]] void launch_failed(const char* what);

}  // namespace folio::cuda
