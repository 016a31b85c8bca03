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

// Autocast caches the casts of leaves that require grad for the rest of the outermost region,
// and before torch 2.11 (pytorch#112583, fixed by pytorch#165068) also those made under no_grad,
// which have no grad_fn: a later cast of the same leaf with grad on gets the cached one, and its
// gradient is lost. A recomputation under autocast meets it when a nested checkpoint's forward
// (run under no_grad) casts a leaf its body casts again.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
inline constexpr bool kAutocastCacheKeepsCastsWithoutGrad = false;
#else
inline constexpr bool kAutocastCacheKeepsCastsWithoutGrad = true;
#endif

}  // namespace recheck::compat
