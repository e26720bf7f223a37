// Small text-formatting helpers for the command's output (GCC 12 has no <format>).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/support/strings.hpp"
#include "optiflow/topology/bounds.hpp"

namespace optiflow::db {
struct ModelCallTotals;
}

namespace optiflow::cli {

/// "model calls: N (K from the replay cache, F failed), P prompt + C completion tokens, cost X".
std::string model_call_totals_line(const db::ModelCallTotals& totals);

using support::strprintf;

/// "12.5" / "300" / "6.25": a bandwidth or time without trailing zeros (up to 3 decimals).
std::string compact_number(double value);

/// One result of the simulation JSON (docs/formats.md): size, time, bandwidths, protocol, and
/// the bound at that size.
nlohmann::json simulation_row(const sim::SimResult& result, const topology::LowerBound& bound);

/// The simulation JSON document (docs/formats.md) around `rows`, printed to stdout; `extra`
/// fields (e.g. a baseline's notes) join the fixed ones.
void print_simulation_json(const std::string& topology, support::Collective collective,
                           const std::string& model, const std::string& schedule,
                           nlohmann::json rows, nlohmann::json extra = nlohmann::json::object());

}  // namespace optiflow::cli
