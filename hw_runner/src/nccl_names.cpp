// The NCCL backend's names, and its absence in a build without CUDA and NCCL.
#include <stdexcept>

#include "optiflow/hw_runner/nccl_backend.hpp"

namespace optiflow::hw_runner {

std::string nccl_native_name(support::Collective collective) {
  switch (collective) {
    case support::Collective::all_gather:
      return "ncclAllGather";
    case support::Collective::reduce_scatter:
      return "ncclReduceScatter";
    default:
      return "ncclAllReduce";
  }
}

#ifndef OPTIFLOW_HAVE_NCCL
bool nccl_backend_built() {
  return false;
}

namespace {

[[noreturn]] void not_built() {
  throw std::runtime_error(
      "this optiflow was built without the NCCL backend (CUDA or NCCL not found)");
}

}  // namespace

int run_nccl_job(const schedule::Schedule&, const RunOptions&, const Reporter&) {
  not_built();
}

std::vector<PairSample> run_nccl_calibration(const CalibrationOptions&) {
  not_built();
}
#endif

}  // namespace optiflow::hw_runner
