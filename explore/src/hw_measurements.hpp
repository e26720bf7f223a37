// explore --hw: each batch's best candidates by simulated time run on real hardware, each
// schedule once per run; what they measured decides the winners from then on.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "candidate.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/sim/fidelity.hpp"

namespace optiflow::explore {

class HwMeasurements {
 public:
  /// `options` (measure, hw_topk, hw_backend, warn, topology, sizes) must outlive this.
  explicit HwMeasurements(const ExploreOptions& options);

  /// Whether anything is measured in this run.
  bool active() const { return options_.measure && options_.hw_topk > 0; }
  /// Measures the batch's best hw_topk schedules not measured before. A failed measurement
  /// is reported through `warn`, leaves the candidate its simulated result, and is not retried.
  void measure(const std::vector<Candidate>& batch);
  /// The candidate's measured times per size, or null when it was not measured.
  const std::vector<double>* times(const Candidate& c) const;

  std::int64_t measured() const { return measured_count_; }
  std::int64_t failed() const { return failed_count_; }
  /// Every measured schedule at every size against its simulation: whether the pre-screen
  /// sent the schedules the hardware would have picked.
  sim::FidelityReport fidelity() const { return sim::fidelity(points_); }

 private:
  std::vector<std::size_t> best_unmeasured(const std::vector<Candidate>& batch) const;
  double mean_log_ratio(const Simulated& simulated) const;
  void measure_one(const Candidate& c);
  void warn(const std::string& message) const;

  const ExploreOptions& options_;
  // By schedule hash; nullopt: the measurement failed (it is not retried).
  std::map<std::string, std::optional<std::vector<double>>> measured_;
  std::int64_t measured_count_ = 0, failed_count_ = 0;
  std::vector<sim::FidelityPoint> points_;
};

}  // namespace optiflow::explore
