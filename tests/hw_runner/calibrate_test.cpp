// The least-squares fit of calibration: exact on exact samples, robust to latency-bound ones.
#include "optiflow/hw_runner/calibrate.hpp"

#include <gtest/gtest.h>

#include "optiflow/support/units.hpp"

namespace optiflow::hw_runner {
namespace {

TEST(FitAlphaBetaTest, RecoversAlphaAndBandwidthFromExactSamples) {
  std::vector<PairSample> samples;
  for (std::uint64_t bytes : {1024ull, 65536ull, 1048576ull})
    samples.push_back({0, 1, bytes, 3.0 + support::transfer_us(static_cast<double>(bytes), 12.5)});
  const LinkFit fit = fit_alpha_beta(samples);
  EXPECT_NEAR(fit.alpha_us, 3.0, 1e-9);
  EXPECT_NEAR(fit.bw_GBps, 12.5, 1e-9);
  EXPECT_NEAR(fit.rms_error_us, 0.0, 1e-9);
}

TEST(FitAlphaBetaTest, FlatSamplesGiveUnboundedBandwidthNotANegativeOne) {
  const std::vector<PairSample> samples{{0, 1, 1024, 5.0}, {0, 1, 4096, 4.9}};
  const LinkFit fit = fit_alpha_beta(samples);
  EXPECT_GT(fit.bw_GBps, 1e5);
  EXPECT_GT(fit.alpha_us, 4.0);
}

}  // namespace
}  // namespace optiflow::hw_runner
