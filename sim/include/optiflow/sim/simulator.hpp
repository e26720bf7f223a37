// The event-driven simulator over the schedule IR (docs/simulator.md): an alpha-beta model
// for pre-screening thousands of candidates, and a flow model that shares links max-min
// fairly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/support/size_result.hpp"
#include "optiflow/topology/protocol.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::sim {

using topology::LinkId;

enum class Model {
  alpha_beta,  ///< each link a FIFO server that serialises its own bytes
  flow,        ///< concurrent transfers share each link's bandwidth max-min fairly
};
std::string_view to_string(Model model);
std::optional<Model> model_from_string(std::string_view name);

/// NCCL_STEPS: the steps a connection holds in flight.
inline constexpr int kNcclSlots = 8;

struct SimOptions {
  Model model = Model::alpha_beta;
  /// Run every size with this protocol. Absent: the schedule's choice for the size
  /// (Schedule::protocol_for).
  std::optional<topology::Protocol> protocol;
  /// Replaces the protocol table's row for every size: what-if studies, and tests of the
  /// network model alone (a row of zero latencies and full data shares).
  std::optional<topology::ProtocolCosts> protocol_costs;
  /// Steps a FIFO connection holds in flight: a send waits for a free slot, which its
  /// receiver frees when its receive completes.
  int slots = kNcclSlots;
  /// Extra cost of starting any step, beyond the protocol's. Absent: the topology's
  /// op_overhead_us.
  std::optional<double> op_overhead_us;
  bool record_timeline = false;
};

/// One transfer as it happened: which step sent it, where, when.
struct TransferRecord {
  std::int32_t rank = 0;  ///< sender
  std::int32_t tb = 0;
  std::int32_t step = 0;
  std::int32_t peer = 0;  ///< receiver
  double start_us = 0;    ///< data starts to move on its first link
  double end_us = 0;      ///< data has arrived
  double bytes = 0;
  std::vector<LinkId> route;
};

/// A step on the critical path: the chain of steps, each waiting for the previous, that ends
/// with the last step to finish.
struct CriticalStep {
  std::int32_t rank = 0, tb = 0, step = 0;
  schedule::StepKind kind = schedule::StepKind::nop;
  double start_us = 0, end_us = 0;
};

struct LinkUsage {
  LinkId link = 0;
  double busy_us = 0;      ///< time with at least one transfer on it
  double bytes = 0;        ///< bytes carried
  double utilisation = 0;  ///< bytes / (bandwidth * collective time)
};

/// The per-size result (size, time, bandwidths; the bound is the caller's to add) and what the
/// simulation saw on the way.
struct SimResult : support::SizeResult {
  topology::Protocol protocol = topology::Protocol::simple;  ///< the protocol it ran with
  std::vector<CriticalStep> critical_path;
  std::vector<LinkUsage> links;          ///< every link that carried data, by link id
  std::vector<TransferRecord> timeline;  ///< when SimOptions::record_timeline
};

/// A schedule prepared for simulation on one topology: matched sends and receives, routes
/// (the schedule's, or the cheapest path), dependencies flattened. Build once, run at every
/// size. Throws InputError when the schedule names a protocol this model does not know. Run is
/// const and thread-safe. The schedule must have passed verify_schedule. The topology is
/// referenced, not copied: it must outlive the Simulator.
class Simulator {
 public:
  Simulator(const topology::Topology& topology, const schedule::Schedule& schedule,
            SimOptions options = {});
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  SimResult run(std::uint64_t size_bytes) const;
  std::vector<SimResult> sweep(std::span<const std::uint64_t> sizes) const;

  struct Impl;  ///< opaque: the prepared schedule

 private:
  std::unique_ptr<Impl> impl_;
};

/// Simulates many (schedule, size list) candidates on all cores; results come back in input
/// order and are identical to running them one by one.
struct Candidate {
  const schedule::Schedule* schedule = nullptr;
  std::vector<std::uint64_t> sizes;
};
std::vector<std::vector<SimResult>> simulate_all(const topology::Topology& topology,
                                                 std::span<const Candidate> candidates,
                                                 const SimOptions& options, unsigned threads = 0);

}  // namespace optiflow::sim
