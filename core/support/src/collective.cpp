#include "optiflow/support/collective.hpp"

#include <array>
#include <utility>

namespace optiflow::support {
namespace {

constexpr std::array<std::pair<Collective, std::string_view>, 6> kCanonical{{
    {Collective::all_gather, "allgather"},
    {Collective::reduce_scatter, "reducescatter"},
    {Collective::all_reduce, "allreduce"},
    {Collective::broadcast, "broadcast"},
    {Collective::reduce, "reduce"},
    {Collective::all_to_all, "alltoall"},
}};

constexpr std::array<std::pair<std::string_view, Collective>, 12> kAliases{{
    {"all-gather", Collective::all_gather},
    {"all_gather", Collective::all_gather},
    {"ag", Collective::all_gather},
    {"reduce-scatter", Collective::reduce_scatter},
    {"reduce_scatter", Collective::reduce_scatter},
    {"rs", Collective::reduce_scatter},
    {"all-reduce", Collective::all_reduce},
    {"all_reduce", Collective::all_reduce},
    {"ar", Collective::all_reduce},
    {"all-to-all", Collective::all_to_all},
    {"all_to_all", Collective::all_to_all},
    {"a2a", Collective::all_to_all},
}};

}  // namespace

std::string_view to_string(Collective collective) {
  for (const auto& [value, name] : kCanonical)
    if (value == collective) return name;
  return "?";
}

std::optional<Collective> collective_from_string(std::string_view name) {
  for (const auto& [value, canonical] : kCanonical)
    if (canonical == name) return value;
  for (const auto& [alias, value] : kAliases)
    if (alias == name) return value;
  return std::nullopt;
}

double busbw_factor(Collective collective, int ranks) {
  const double n = ranks;
  switch (collective) {
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
      return (n - 1) / n;
    case Collective::all_reduce:
      return 2 * (n - 1) / n;
    case Collective::broadcast:
    case Collective::reduce:
      return 1.0;
  }
  return 1.0;
}

}  // namespace optiflow::support
