// The NCCL backend's CUDA kernels, callable from host C++ (nccl_kernels.cu). Internal.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace optiflow::hw_runner::detail {

/// dst[i] = a[i] + b[i] for n uint32 elements (wrapping), on `stream`. dst may be a or b.
cudaError_t launch_add(std::uint32_t* dst, const std::uint32_t* a, const std::uint32_t* b,
                       std::size_t n, cudaStream_t stream);

}  // namespace optiflow::hw_runner::detail
