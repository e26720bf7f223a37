// The reductions of the NCCL backend: recv-reduce steps and local `re` steps add uint32
// elements, wrapping, exactly as the host data check expects.
#include "nccl_kernels.hpp"

namespace optiflow::hw_runner::detail {
namespace {

__global__ void add_kernel(std::uint32_t* dst, const std::uint32_t* a, const std::uint32_t* b,
                           std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    dst[i] = a[i] + b[i];
}

}  // namespace

cudaError_t launch_add(std::uint32_t* dst, const std::uint32_t* a, const std::uint32_t* b,
                       std::size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr unsigned kThreads = 256;
  const std::size_t wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 1024 ? wanted : 1024);
  add_kernel<<<blocks, kThreads, 0, stream>>>(dst, a, b, n);
  return cudaGetLastError();
}

}  // namespace optiflow::hw_runner::detail
