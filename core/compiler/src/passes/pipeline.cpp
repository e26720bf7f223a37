// The pipeline pass: every transfer cut into the program's `pipeline` slices.
#include <algorithm>
#include <span>

#include "pass_table.hpp"

namespace optiflow::compiler::passes {
namespace {

support::Rational point(const Interval& i, std::int64_t k, std::int64_t parts) {
  // begin + (end - begin) * k / parts; every value here is a small fraction of the buffer.
  return *add(i.begin, *mul(*sub(i.end, i.begin), *support::Rational::make(k, parts)));
}

}  // namespace

void pipeline(Plan& plan) {
  const std::int64_t k = plan.pipeline;
  if (k <= 1) return;
  Plan sliced = empty_like(plan);
  sliced.transfers.reserve(plan.transfers.size() * static_cast<std::size_t>(k));
  std::vector<Index> first_slice(plan.transfers.size()), deps;
  for (std::size_t t = 0; t < plan.transfers.size(); ++t) {
    const Transfer& whole = plan.transfers[t];
    first_slice[t] = static_cast<Index>(sliced.transfers.size());
    for (std::int64_t s = 0; s < k; ++s) {
      Transfer part = whole;
      part.data = Interval{point(whole.data, s, k), point(whole.data, s + 1, k)};
      part.slice = static_cast<std::int32_t>(s);
      // A dependency's slices lie in data order, so the ones overlapping this slice are a run.
      deps.clear();
      for (Index d : plan.deps[t]) {
        const auto slices = std::span(sliced.transfers).subspan(at(first_slice[at(d)]), at(k));
        const auto first = std::partition_point(slices.begin(), slices.end(), [&](const auto& x) {
          return x.data.end <= part.data.begin;
        });
        for (auto x = first; x != slices.end() && x->data.begin < part.data.end; ++x)
          deps.push_back(first_slice[at(d)] + static_cast<Index>(x - slices.begin()));
      }
      sliced.add(std::move(part), deps);
    }
  }
  plan = std::move(sliced);
}

void pipeline_pass(CompileState& state) {
  pipeline(state.plan);
}

}  // namespace optiflow::compiler::passes
