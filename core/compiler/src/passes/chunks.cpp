// The chunks pass: the buffer's chunk count, and each transfer's data as chunk indices.
#include <algorithm>

#include "pass_table.hpp"

namespace optiflow::compiler::passes {

void assign_chunks(Plan& plan, std::int64_t max_chunks) {
  std::int64_t chunks = std::max<std::int64_t>(plan.ranks, 1);
  for (const Transfer& t : plan.transfers)
    for (support::Rational r : {t.data.begin, t.data.end}) {
      if (chunks % r.den() == 0) continue;  // the common case, without a gcd
      const auto lcm = support::checked_lcm(chunks, r.den());
      if (!lcm || *lcm > max_chunks)
        throw InternalError("the plan needs more than " + std::to_string(max_chunks) +
                            " chunks per buffer, which evaluation should have rejected");
      chunks = *lcm;
    }
  plan.chunks = chunks;
  // Every denominator divides `chunks`, so these are exact.
  auto in_chunks = [chunks](support::Rational r) { return r.num() * (chunks / r.den()); };
  for (Transfer& t : plan.transfers) {
    t.first_chunk = in_chunks(t.data.begin);
    t.chunk_count = in_chunks(t.data.end) - t.first_chunk;
  }
}

void chunks_pass(CompileState& state) {
  assign_chunks(state.plan, state.limits.max_chunks);
}

}  // namespace optiflow::compiler::passes
