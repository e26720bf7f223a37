#include "optiflow/topology/rail_balance.hpp"

#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace optiflow::topology {
namespace {

// The best bandwidth of a two-link path between `gpu` and a node of kind `far` through one of
// kind `via`, leaving the GPU (`outward`) or reaching it; 0 if there is none.
double two_hop(const Topology& topo, NodeId gpu, bool outward, NodeKind via, NodeKind far) {
  const auto links = [&](NodeId node) {
    return outward ? topo.out_links(node) : topo.in_links(node);
  };
  const auto other_end = [&](LinkId l) { return outward ? topo.link(l).dst : topo.link(l).src; };
  double best = 0;
  for (LinkId near_link : links(gpu)) {
    const NodeId middle = other_end(near_link);
    if (topo.node(middle).kind != via) continue;
    for (LinkId far_link : links(middle))
      if (topo.node(other_end(far_link)).kind == far)
        best = std::max(best, std::min(topo.link(near_link).bw_GBps, topo.link(far_link).bw_GBps));
  }
  return best;
}

// The grid of hosts x rails with each GPU's port; `ok` is false where there is no grid or some
// GPU has no NIC.
struct Rails {
  std::vector<std::vector<int>> rank_at;
  std::vector<double> port;  ///< by rank
  bool ok = false;
  std::size_t hosts() const { return rank_at.size(); }
  std::size_t per_host() const { return rank_at.front().size(); }
};

Rails rails_of(const Topology& topo) {
  Rails rails{rank_grid(topo), nic_port_GBps(topo)};
  rails.ok = !rails.rank_at.empty() && !rails.port.empty();
  return rails;
}

// The hosts whose data NIC (h, l) does not carry: its own (in) and each ring neighbour's (out).
std::array<std::size_t, 3> excluded_hosts(std::size_t h, std::size_t hosts) {
  return {h, (h + 1) % hosts, (h + hosts - 1) % hosts};
}

// The busiest NIC's time for these keeps (rail_time).
double busiest_nic_time(const Rails& rails, std::span<const double> keep) {
  if (!rails.ok || keep.size() != rails.port.size()) return 0;
  const std::size_t H = rails.hosts(), L = rails.per_host();
  std::vector<std::vector<double>> on_rail(H, std::vector<double>(L));  // D(h, l)
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t l = 0; l < L; ++l) {
      const double k = keep[static_cast<std::size_t>(rails.rank_at[h][l])];
      for (std::size_t rail = 0; rail < L; ++rail)
        on_rail[h][rail] += rail == l ? k : (1 - k) / static_cast<double>(L - 1);
    }
  double worst = 0;
  for (std::size_t l = 0; l < L; ++l) {
    double total = 0;
    for (std::size_t h = 0; h < H; ++h) total += on_rail[h][l];
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t n : excluded_hosts(h, H))
        worst = std::max(worst, (total - on_rail[n][l]) /
                                    rails.port[static_cast<std::size_t>(rails.rank_at[h][l])]);
  }
  return worst;
}

}  // namespace

std::vector<double> nic_port_GBps(const Topology& topo) {
  std::vector<double> bw;
  for (NodeId gpu : topo.gpus_by_rank()) {
    const double out = two_hop(topo, gpu, true, NodeKind::nic, NodeKind::switch_);
    const double in = two_hop(topo, gpu, false, NodeKind::nic, NodeKind::switch_);
    if (out == 0 || in == 0) return {};
    bw.push_back(std::min(out, in));
  }
  return bw;
}

std::vector<std::vector<int>> rank_grid(const Topology& topo) {
  int hosts = 0, per_host = 0;
  for (NodeId gpu : topo.gpus_by_rank()) {
    hosts = std::max(hosts, topo.node(gpu).host + 1);
    per_host = std::max(per_host, topo.node(gpu).local + 1);
  }
  if (hosts < 2 || per_host < 2 || hosts * per_host != topo.rank_count()) return {};
  std::vector<std::vector<int>> rank_at(static_cast<std::size_t>(hosts),
                                        std::vector<int>(static_cast<std::size_t>(per_host), -1));
  for (int r = 0; r < topo.rank_count(); ++r) {
    const Node& gpu = topo.node(topo.gpu_of_rank(r));
    int& cell = rank_at[static_cast<std::size_t>(gpu.host)][static_cast<std::size_t>(gpu.local)];
    if (cell >= 0) return {};
    cell = r;
  }
  return rank_at;
}

// Variables: k_g (column g = rank), the time T (column N) and each rail's total S_l (column
// N + 1 + l). With b = 1 / (L - 1), host h puts
//   D(h, l) = k(h, l) + b * sum_{l' != l} (1 - k(h, l')) = k(h, l) - b * sum_{l' != l} k(h, l') + 1
// shares on rail l, S_l = sum_h D(h, l), and a ring along rail l makes NIC (h, l) carry
// S_l - D(n, l) for each excluded host n. Rows:
//   S_l - sum_h [k(h, l) - b * sum_{l' != l} k(h, l')] = H                (rail total)
//   S_l - k(n, l) + b * sum_{l' != l} k(n, l') - c(h, l) T <= 1           (NIC load <= T c)
// The totals keep each NIC row L + 2 long; written out, a row would hold every GPU of the
// cluster, and a thousand-GPU cluster would not fit.
// Objective: T, less a tie-break of eps * sum k (scatter the least among equal times).
std::optional<RailBalance> balance_rails(const Topology& topo) {
  const Rails rails = rails_of(topo);
  if (!rails.ok) return std::nullopt;
  const std::size_t H = rails.hosts(), L = rails.per_host();
  const auto N = static_cast<int>(H * L);
  const int time_column = N;
  const auto total_column = [&](std::size_t l) { return N + 1 + static_cast<int>(l); };
  const double b = 1.0 / static_cast<double>(L - 1);

  CoinPackedMatrix rows(false, 0, 0);
  rows.setDimensions(0, N + 1 + static_cast<int>(L));
  std::vector<double> row_lower, row_upper;
  std::vector<int> columns;
  std::vector<double> values;
  // -D(h, l) without its constant, appended to the row being built.
  const auto append_minus_share = [&](std::size_t h, std::size_t l) {
    for (std::size_t rail = 0; rail < L; ++rail) {
      columns.push_back(rails.rank_at[h][rail]);
      values.push_back(rail == l ? -1 : b);
    }
  };
  const auto add_row = [&](double lower, double upper) {
    rows.appendRow(static_cast<int>(columns.size()), columns.data(), values.data());
    row_lower.push_back(lower);
    row_upper.push_back(upper);
    columns.clear();
    values.clear();
  };
  for (std::size_t l = 0; l < L; ++l) {
    columns.push_back(total_column(l));
    values.push_back(1);
    for (std::size_t h = 0; h < H; ++h) append_minus_share(h, l);
    add_row(static_cast<double>(H), static_cast<double>(H));
  }
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t l = 0; l < L; ++l)
      for (std::size_t n : excluded_hosts(h, H)) {
        columns.push_back(total_column(l));
        values.push_back(1);
        append_minus_share(n, l);
        columns.push_back(time_column);
        values.push_back(-rails.port[static_cast<std::size_t>(rails.rank_at[h][l])]);
        add_row(-COIN_DBL_MAX, 1);
      }

  const std::vector<double> ones(static_cast<std::size_t>(N), 1.0);
  const double even_time = busiest_nic_time(rails, ones);
  const double eps = 1e-4 * even_time / N;
  std::vector<double> column_lower(static_cast<std::size_t>(N) + 1 + L, 0);
  std::vector<double> column_upper(column_lower.size(), COIN_DBL_MAX);
  std::vector<double> objective(column_lower.size(), 0);
  std::fill_n(column_upper.begin(), N, 1.0);
  std::fill_n(objective.begin(), N, -eps);
  objective[static_cast<std::size_t>(time_column)] = 1;

  ClpSimplex lp;
  lp.setLogLevel(0);
  lp.loadProblem(rows, column_lower.data(), column_upper.data(), objective.data(), row_lower.data(),
                 row_upper.data());
  lp.primal();
  if (lp.status() != 0) return std::nullopt;  // cannot happen (k = 1 is feasible); no program

  RailBalance balance;
  balance.hosts = static_cast<int>(H);
  balance.per_host = static_cast<int>(L);
  balance.keep.assign(lp.getColSolution(), lp.getColSolution() + N);
  for (double& k : balance.keep) k = std::clamp(k, 0.0, 1.0);
  balance.time = busiest_nic_time(rails, balance.keep);
  balance.even_time = even_time;
  return balance;
}

double rail_time(const Topology& topo, std::span<const double> keep) {
  return busiest_nic_time(rails_of(topo), keep);
}

RoundedKeeps round_keeps(const Topology& topo, std::span<const double> keep, int most_parts,
                         double slack) {
  const Rails rails = rails_of(topo);
  const double exact_time = busiest_nic_time(rails, keep);
  std::optional<RoundedKeeps> within_slack;
  RoundedKeeps closest;
  double closest_time = std::numeric_limits<double>::infinity();
  std::vector<double> rounded(keep.size());
  for (int d = 1; d <= most_parts; ++d) {
    RoundedKeeps candidate{d, std::vector<int>(keep.size())};
    bool exact = true;
    for (std::size_t g = 0; g < keep.size(); ++g) {
      const double k = std::clamp(keep[g], 0.0, 1.0);
      candidate.parts[g] = static_cast<int>(std::lround(k * d));
      rounded[g] = static_cast<double>(candidate.parts[g]) / d;
      exact = exact && std::abs(rounded[g] - k) <= 0.001;
    }
    if (exact) return candidate;
    const double time = busiest_nic_time(rails, rounded);
    if (!within_slack && time <= exact_time * (1 + slack)) within_slack = candidate;
    if (time < closest_time) {
      closest_time = time;
      closest = std::move(candidate);
    }
  }
  return within_slack ? *within_slack : closest;
}

}  // namespace optiflow::topology
