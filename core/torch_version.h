// What this libtorch can do, from its version alone: light enough for any translation unit
// (core/torch_compat.h holds the differences that need libtorch's own headers).
#pragma once

#include <string>

#include <torch/version.h>

namespace recheck::compat {

// CPU autocast casts to float16 from libtorch 2.1; 1.13 has no float16 CPU kernels for matmul,
// and its Python autocast turns itself off when asked for float16 on CPU.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
inline constexpr bool kCpuAutocastHasFloat16 = true;
#else
inline constexpr bool kCpuAutocastHasFloat16 = false;
#endif
// Whether autocast on `device_type` ("cpu" or "cuda") can cast to float16 with this libtorch.
inline bool autocast_has_float16(const std::string& device_type) {
  return device_type == "cuda" || kCpuAutocastHasFloat16;
}

}  // namespace recheck::compat
