// Evaluation of DSL programs: each statement is interpreted on the pieces of data it governs,
// recording the transfers that move them (docs/dsl.md, "Semantics").
#include "optiflow/compiler/evaluate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <map>
#include <numeric>
#include <queue>
#include <set>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/topology/tree_packing.hpp"
#include "patterns.hpp"

namespace optiflow::compiler {
namespace {

constexpr std::int32_t kNotHeld = -2;
constexpr std::int32_t kOwned = -1;
constexpr std::int64_t kMaxSplitParts = 1024;
constexpr std::int64_t kMaxPipeline = 64;
constexpr std::int64_t kMaxChannels = 32;
constexpr int kWorkPerClockLog2 = 16;

// A contiguous part of one rank's share, and who holds and who carries it.
struct Piece {
  Interval data;
  std::int32_t source = 0;
  std::vector<std::int32_t> holder;    // per rank: kNotHeld, kOwned or the delivering transfer
  std::vector<std::int32_t> carriers;  // ranks that pass it on in the next step, ascending
};

struct RouteRule {
  std::int32_t from = 0, to = 0, path = 0;
};

// What a block sees: variables, explicit routes and avoided links, all block-scoped.
struct Scope {
  std::map<std::string, support::Rational> vars;
  std::vector<RouteRule> routes;
  std::set<topology::LinkId> avoided;
  std::int32_t avoid_set = 0;
};

using Value = std::vector<support::Rational>;  // one element: a number; more: a tuple (for `by`)

class Evaluator {
 public:
  Evaluator(const topology::Topology& topo, const std::string& source, const std::string& text,
            const EvalLimits& limits)
      : topo_(topo), source_(source), text_(text), limits_(limits), n_(topo.rank_count()) {
    for (topology::NodeId v = 0; v < topo.node_count(); ++v) node_by_id_[topo.node(v).id] = v;
    for (topology::NodeId gpu : topo.gpus_by_rank()) {
      nhosts_ = std::max(nhosts_, topo.node(gpu).host + 1);
      nlocal_ = std::max(nlocal_, topo.node(gpu).local + 1);
    }
    plan_.ranks = n_;
    plan_.avoid_sets.emplace_back();
    chunks_ = std::max<std::int64_t>(n_, 1);
  }

  Plan run(const dsl::Program& program) {
    plan_.pipeline = final_pipeline(program);
    std::vector<std::int32_t> active;
    for (std::int32_t r = 0; r < n_; ++r) {
      Piece piece;
      piece.data = Interval{*support::Rational::make(r, n_), *support::Rational::make(r + 1, n_)};
      piece.source = r;
      piece.holder.assign(static_cast<std::size_t>(n_), kNotHeld);
      piece.holder[static_cast<std::size_t>(r)] = kOwned;
      piece.carriers = {r};
      active.push_back(new_piece(std::move(piece), {}));
    }
    Scope scope;
    run_block(program.body, active, scope, /*top_level=*/true);
    require_complete(active, program);
    return std::move(plan_);
  }

 private:
  // The pipeline depth the program ends up with, looked up before anything is cut, so that
  // every limit counts the slices of pieces and transfers made before a late `pipeline` line.
  // Only top-level `let` and `pipeline` can decide it; an error there is left for the
  // evaluation proper to report in its place.
  std::int32_t final_pipeline(const dsl::Program& program) {
    Scope scope;
    std::int32_t depth = 1;
    try {
      for (const dsl::Statement& s : program.body) {
        if (const auto* let = s.get_if<dsl::Let>())
          scope.vars[let->name] = number(let->value, scope, -1);
        if (const auto* pipeline = s.get_if<dsl::Pipeline>())
          depth = static_cast<std::int32_t>(
              integer(pipeline->value, scope, -1, 1, kMaxPipeline, "pipeline"));
      }
    } catch (const dsl::DslError&) {
    }
    return depth;
  }

  // --- errors and limits -----------------------------------------------------------------
  [[noreturn]] void fail(dsl::SourcePos pos, const std::string& message) const {
    throw dsl::DslError(support::SourceLocation{source_, pos.line, pos.column, {}}, message,
                        dsl::source_line(text_, pos.line));
  }
  void spend(std::size_t work, dsl::SourcePos pos) {
    const std::size_t before = work_;
    work_ += work;
    if (work_ > limits_.max_work)
      fail(pos, "evaluation exceeds its work limit (" + std::to_string(limits_.max_work) +
                    " operations): the program makes too many pieces or transfers");
    // Reading the clock costs more than most units of work, so look at it now and then.
    if ((work_ >> kWorkPerClockLog2) != (before >> kWorkPerClockLog2) &&
        std::chrono::steady_clock::now() > limits_.deadline)
      fail(pos,
           "evaluation exceeds its time limit: the program makes too many pieces or "
           "transfers");
  }

  // The chunk count the compiled plan needs once `data` is cut into `pipeline` slices: the
  // denominators of the slices' ends are those of its begin and of the slice length.
  std::optional<std::int64_t> chunks_with(std::int64_t chunks, const Interval& data,
                                          std::int64_t pipeline) const {
    const auto length = sub(data.end, data.begin);
    const auto slice = length ? div(*length, support::Rational(pipeline)) : std::nullopt;
    if (!slice) return std::nullopt;
    const auto with_begin = support::checked_lcm(chunks, data.begin.den());
    return with_begin ? support::checked_lcm(*with_begin, slice->den()) : std::nullopt;
  }

  // Every piece's data is sent, so the plan will need chunks for it: reject the statement that
  // makes the count exceed the limit before anything is allocated for it.
  void require_chunks(std::optional<std::int64_t> chunks, dsl::SourcePos pos) {
    if (chunks && *chunks <= limits_.max_chunks) {
      chunks_ = *chunks;
      return;
    }
    fail(pos, "the program's pieces need " +
                  (chunks ? std::to_string(*chunks) : std::string("more than 2^63")) +
                  " chunks per buffer" + with_pipeline() + " (limit " +
                  std::to_string(limits_.max_chunks) +
                  "): use fewer parts, simpler weights or a smaller pipeline");
  }

  std::string with_pipeline() const {
    return plan_.pipeline > 1 ? " with pipeline " + std::to_string(plan_.pipeline) : "";
  }

  // Transfers the compiled plan has for `made` transfers of the program.
  std::size_t compiled_transfers(std::size_t made) const {
    return made * static_cast<std::size_t>(plan_.pipeline) * limits_.phases;
  }

  void require_transfers(std::size_t made, dsl::SourcePos pos) const {
    if (compiled_transfers(made) <= limits_.max_transfers) return;
    std::string counted;
    if (plan_.pipeline > 1)
      counted += " of the " + std::to_string(plan_.pipeline) + " pipeline slices";
    if (limits_.phases > 1) counted += " once per phase of the collective";
    fail(pos, "the program makes more than " + std::to_string(limits_.max_transfers) +
                  " transfers" + (counted.empty() ? "" : " (counting each" + counted + ")") +
                  ": use fewer parts, a smaller pipeline or a pattern that sends less");
  }

  std::int32_t new_piece(Piece piece, dsl::SourcePos pos) {
    if (pieces_.size() >= limits_.max_pieces)
      fail(pos, "the program cuts the data into more than " + std::to_string(limits_.max_pieces) +
                    " pieces");
    spend(static_cast<std::size_t>(n_), pos);
    require_chunks(chunks_with(chunks_, piece.data, plan_.pipeline), pos);
    pieces_.push_back(std::move(piece));
    return static_cast<std::int32_t>(pieces_.size() - 1);
  }

  // Every rank must end up with every piece; say which data is missing where, and why.
  void require_complete(const std::vector<std::int32_t>& active,
                        const dsl::Program& program) const {
    const dsl::SourcePos end{program.body.empty() ? 1 : program.body.back().pos.line, 1};
    for (std::int32_t index : active) {
      const Piece& piece = pieces_[static_cast<std::size_t>(index)];
      for (std::int32_t r = 0; r < n_; ++r) {
        if (piece.holder[static_cast<std::size_t>(r)] != kNotHeld) continue;
        std::int32_t missing = 0;
        for (std::int32_t h : piece.holder) missing += h == kNotHeld ? 1 : 0;
        fail(end,
             "the program ends before every rank has all the data: rank " + std::to_string(r) +
                 " never receives fraction [" + piece.data.begin.to_string() + ", " +
                 piece.data.end.to_string() + ") of the buffer (rank " +
                 std::to_string(piece.source) + "'s data), and " + std::to_string(missing - 1) +
                 " other ranks lack it too; add a step that spreads it, e.g. 'direct over hosts'");
      }
    }
  }

  // --- blocks and statements ---------------------------------------------------------------
  void run_block(const dsl::Block& block, std::vector<std::int32_t>& active, Scope scope,
                 bool top_level) {
    for (const dsl::Statement& s : block) run_statement(s, active, scope, top_level);
  }

  // Where a statement runs: the pieces it governs, its block's scope, and whether that block is
  // the program's top level.
  struct At {
    dsl::SourcePos pos;
    std::vector<std::int32_t>& active;
    Scope& scope;
    bool top_level;
  };

  void run_statement(const dsl::Statement& s, std::vector<std::int32_t>& active, Scope& scope,
                     bool top_level) {
    At at{s.pos, active, scope, top_level};
    std::visit([&](const auto& kind) { run(kind, at); }, s.node);
  }

  void run(const dsl::Let& s, const At& at) {
    at.scope.vars[s.name] = number(s.value, at.scope, -1);
  }
  // final_pipeline() found the same depth before evaluation began, and the limits used it.
  void run(const dsl::Pipeline& s, const At& at) {
    plan_.pipeline = setting(s.value, at, "pipeline", kMaxPipeline);
  }
  void run(const dsl::Channels& s, const At& at) {
    plan_.channels = setting(s.value, at, "channels", kMaxChannels);
  }
  void run(const dsl::Protocol& s, const At& at) {
    if (!at.top_level)
      fail(at.pos, "'protocol' applies to the whole program: put it at the top level");
    plan_.protocol = topology::protocol_from_string(s.name);
  }
  void run(const dsl::SplitEven& s, const At& at) { split_even(s, at.pos, at.active, at.scope); }
  void run(const dsl::SplitWeighted& s, const At& at) {
    split_weighted(s, at.pos, at.active, at.scope);
  }
  void run(const dsl::Route& s, const At& at) { add_route(s, at.pos, at.scope); }
  void run(const dsl::Avoid& s, const At& at) { add_avoid(s, at.pos, at.scope); }
  void run(const dsl::Step& s, const At& at) { step(s, at.pos, at.active, at.scope); }

  std::int32_t setting(const dsl::Expr& value, const At& at, const char* name, std::int64_t limit) {
    if (!at.top_level)
      fail(at.pos,
           std::string("'") + name + "' applies to the whole program: put it at the top level");
    return static_cast<std::int32_t>(integer(value, at.scope, -1, 1, limit, name));
  }

  void split_even(const dsl::SplitEven& s, dsl::SourcePos pos, std::vector<std::int32_t>& active,
                  const Scope& scope) {
    const std::int64_t parts =
        integer(s.parts, scope, -1, 1, kMaxSplitParts, "the number of parts");
    if (pieces_.size() + active.size() * static_cast<std::size_t>(parts) > limits_.max_pieces)
      fail(pos, "the program cuts the data into more than " + std::to_string(limits_.max_pieces) +
                    " pieces");
    std::vector<support::Rational> weights(static_cast<std::size_t>(parts), support::Rational(1));
    std::vector<std::vector<std::int32_t>> per_part(static_cast<std::size_t>(parts));
    for (std::int32_t piece : active) {
      const auto subs = split_piece(piece, weights, pos);
      for (std::size_t i = 0; i < subs.size(); ++i) per_part[i].push_back(subs[i]);
    }
    std::vector<std::int32_t> result;
    for (std::int64_t i = 0; i < parts; ++i) {
      Scope inner = scope;
      inner.vars[s.name] = support::Rational(i);
      auto& part = per_part[static_cast<std::size_t>(i)];
      run_block(s.body, part, inner, false);
      result.insert(result.end(), part.begin(), part.end());
    }
    active = std::move(result);
  }

  void split_weighted(const dsl::SplitWeighted& s, dsl::SourcePos pos,
                      std::vector<std::int32_t>& active, const Scope& scope) {
    std::vector<std::vector<std::int32_t>> per_branch(s.branches.size());
    for (std::int32_t piece : active) {
      const std::int32_t source = pieces_[static_cast<std::size_t>(piece)].source;
      std::vector<support::Rational> weights;
      for (const dsl::Branch& b : s.branches) {
        const support::Rational w = number(b.weight, scope, source);
        if (w < support::Rational(0))
          fail(b.weight.pos, "weight " + w.to_string() + " is negative (for the data of rank " +
                                 std::to_string(source) + ")");
        weights.push_back(w);
      }
      if (std::all_of(weights.begin(), weights.end(),
                      [](support::Rational w) { return w == support::Rational(0); }))
        fail(pos, "every weight is 0 for the data of rank " + std::to_string(source) +
                      ": give it a branch with a positive weight");
      const auto subs = split_piece(piece, weights, pos);
      for (std::size_t b = 0, k = 0; b < weights.size(); ++b)
        if (weights[b] > support::Rational(0)) per_branch[b].push_back(subs[k++]);
    }
    std::vector<std::int32_t> result;
    for (std::size_t b = 0; b < s.branches.size(); ++b) {
      run_block(s.branches[b].body, per_branch[b], scope, false);
      result.insert(result.end(), per_branch[b].begin(), per_branch[b].end());
    }
    active = std::move(result);
  }

  // Cuts a piece in proportion to the positive weights, in order; returns the new pieces.
  std::vector<std::int32_t> split_piece(std::int32_t index,
                                        const std::vector<support::Rational>& weights,
                                        dsl::SourcePos pos) {
    if (pieces_.size() + weights.size() > limits_.max_pieces)
      fail(pos, "the program cuts the data into more than " + std::to_string(limits_.max_pieces) +
                    " pieces");
    support::Rational total(0);
    for (support::Rational w : weights) total = checked(add(total, w), pos);
    const Piece original = pieces_[static_cast<std::size_t>(index)];
    const support::Rational length = checked(sub(original.data.end, original.data.begin), pos);
    std::vector<std::int32_t> subs;
    support::Rational cursor = original.data.begin, acc(0);
    for (support::Rational w : weights) {
      if (w == support::Rational(0)) continue;
      acc = checked(add(acc, w), pos);
      const support::Rational end = checked(
          add(original.data.begin, checked(mul(length, checked(div(acc, total), pos)), pos)), pos);
      Piece part = original;
      part.data = Interval{cursor, end};
      cursor = end;
      subs.push_back(new_piece(std::move(part), pos));
    }
    return subs;
  }

  support::Rational checked(std::optional<support::Rational> value, dsl::SourcePos pos) const {
    if (!value) fail(pos, "a number here exceeds 64-bit fractions (use simpler weights)");
    return *value;
  }

  // --- routes --------------------------------------------------------------------------------
  topology::NodeId node(const std::string& id, dsl::SourcePos pos) const {
    auto it = node_by_id_.find(id);
    if (it == node_by_id_.end()) fail(pos, "topology '" + topo_.name() + "' has no node @" + id);
    return it->second;
  }

  void add_route(const dsl::Route& s, dsl::SourcePos pos, Scope& scope) {
    const std::int32_t from = rank_of(s.from, scope), to = rank_of(s.to, scope);
    const topology::NodeId source = topo_.gpu_of_rank(from), destination = topo_.gpu_of_rank(to);
    std::vector<topology::NodeId> path{source};
    for (const dsl::Expr& hop : s.via) {
      path.push_back(node(hop.text, hop.pos));
      if (path.back() == source || path.back() == destination)
        fail(hop.pos, "route: @" + hop.text + " is the route's " +
                          (path.back() == source ? "source" : "destination") +
                          "; 'via' lists only the nodes in between, not the source or destination");
    }
    path.push_back(destination);
    for (std::size_t i = 0; i + 1 < path.size(); ++i)
      if (!has_link(path[i], path[i + 1]))
        fail(pos, "route: no link from @" + topo_.node(path[i]).id + " to @" +
                      topo_.node(path[i + 1]).id);
    scope.routes.push_back(RouteRule{from, to, intern_path(std::move(path))});
  }

  bool has_link(topology::NodeId a, topology::NodeId b) const {
    for (topology::LinkId l : topo_.out_links(a))
      if (topo_.link(l).dst == b) return true;
    return false;
  }

  std::int32_t intern_path(std::vector<topology::NodeId> path) {
    auto [it, inserted] =
        path_index_.try_emplace(path, static_cast<std::int32_t>(plan_.explicit_routes.size()));
    if (inserted) plan_.explicit_routes.push_back(std::move(path));
    return it->second;
  }

  void add_avoid(const dsl::Avoid& s, dsl::SourcePos pos, Scope& scope) {
    for (const dsl::LinkRef& ref : s.links) {
      const topology::NodeId a = node(ref.from, pos), b = node(ref.to, pos);
      std::size_t found = 0;
      for (topology::LinkId l : topo_.out_links(a))
        if (topo_.link(l).dst == b) scope.avoided.insert(l), ++found;
      if (ref.both)
        for (topology::LinkId l : topo_.out_links(b))
          if (topo_.link(l).dst == a) scope.avoided.insert(l), ++found;
      if (found == 0) fail(pos, "avoid: no link joins @" + ref.from + " and @" + ref.to);
    }
    std::vector<topology::LinkId> set(scope.avoided.begin(), scope.avoided.end());
    auto [it, inserted] =
        avoid_index_.try_emplace(set, static_cast<std::int32_t>(plan_.avoid_sets.size()));
    if (inserted) plan_.avoid_sets.push_back(set);
    scope.avoid_set = it->second;
  }

  // --- groups --------------------------------------------------------------------------------
  std::vector<std::vector<std::int32_t>> groups(const dsl::GroupSpec& spec, const Scope& scope,
                                                dsl::SourcePos pos) {
    std::vector<std::vector<std::int32_t>> result;
    auto by_attribute = [&](auto attribute, const char* what) {
      std::map<int, std::vector<std::int32_t>> grouped;
      for (std::int32_t r = 0; r < n_; ++r) {
        const int key = attribute(topo_.node(topo_.gpu_of_rank(r)));
        if (key < 0)
          fail(pos, "topology '" + topo_.name() + "' gives no " + what + " for rank " +
                        std::to_string(r));
        grouped[key].push_back(r);
      }
      for (auto& [key, members] : grouped) result.push_back(std::move(members));
    };
    switch (spec.kind) {
      case dsl::GroupSpec::Kind::all:
        result.emplace_back(static_cast<std::size_t>(n_));
        std::iota(result.back().begin(), result.back().end(), 0);
        break;
      case dsl::GroupSpec::Kind::hosts:
        by_attribute([](const topology::Node& n) { return n.host; }, "host");
        break;
      case dsl::GroupSpec::Kind::rails:
        by_attribute([](const topology::Node& n) { return n.local; }, "local index");
        break;
      case dsl::GroupSpec::Kind::under:
        result.push_back(gpus_under(node(spec.node, pos)));
        break;
      case dsl::GroupSpec::Kind::lists:
        for (const auto& list : spec.lists) result.push_back(list_members(list, scope));
        break;
    }
    for (auto& members : result) order_and_filter(members, spec, scope);
    std::erase_if(result, [](const auto& g) { return g.empty(); });
    std::vector<char> seen(static_cast<std::size_t>(n_), 0);
    for (const auto& g : result)
      for (std::int32_t r : g)
        if (seen[static_cast<std::size_t>(r)]++)
          fail(pos, "rank " + std::to_string(r) + " appears twice in this step's groups");
    return result;
  }

  // GPUs that reach `sw` without crossing another switch or GPU (through NICs, CPUs).
  std::vector<std::int32_t> gpus_under(topology::NodeId sw) const {
    std::vector<char> seen(topo_.node_count(), 0);
    std::vector<std::int32_t> ranks;
    std::queue<topology::NodeId> frontier;
    frontier.push(sw);
    seen[sw] = 1;
    while (!frontier.empty()) {
      const topology::NodeId v = frontier.front();
      frontier.pop();
      for (topology::LinkId l : topo_.in_links(v)) {
        const topology::NodeId u = topo_.link(l).src;
        if (seen[u]) continue;
        seen[u] = 1;
        const topology::Node& n = topo_.node(u);
        if (n.kind == topology::NodeKind::gpu)
          ranks.push_back(n.rank);
        else if (n.kind != topology::NodeKind::switch_)
          frontier.push(u);
      }
    }
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }

  std::vector<std::int32_t> list_members(const std::vector<dsl::Expr>& items, const Scope& scope) {
    std::vector<std::int32_t> members;
    for (const dsl::Expr& item : items) {
      if (item.kind != dsl::Expr::Kind::range) {
        members.push_back(rank_of(item, scope));
        continue;
      }
      const std::int64_t first = integer(item.args[0], scope, -1, 0, n_ - 1, "a rank");
      const std::int64_t last =
          integer(item.args[1], scope, -1, first, n_ - 1, "the end of the range");
      for (std::int64_t r = first; r <= last; ++r) members.push_back(static_cast<std::int32_t>(r));
    }
    return members;
  }

  void order_and_filter(std::vector<std::int32_t>& members, const dsl::GroupSpec& spec,
                        const Scope& scope) {
    if (spec.where)
      std::erase_if(members, [&](std::int32_t r) {
        return number(*spec.where, scope, r) == support::Rational(0);
      });
    if (!spec.by) return;
    std::vector<std::pair<Value, std::int32_t>> keyed;
    for (std::int32_t r : members) keyed.emplace_back(eval(*spec.by, scope, r), r);
    std::stable_sort(keyed.begin(), keyed.end());
    for (std::size_t i = 0; i < keyed.size(); ++i) members[i] = keyed[i].second;
  }

  // --- steps ---------------------------------------------------------------------------------
  // One step's groups, prepared once for all the pieces it moves.
  struct StepGroups {
    std::vector<std::vector<std::int32_t>> members;  // in the pattern's order
    std::vector<std::vector<std::int32_t>> sorted;   // ascending, for merging carriers
    std::vector<std::int32_t> group_of, position;    // per rank; position in the program's order
  };

  StepGroups step_groups(const dsl::Step& s, dsl::SourcePos pos, const Scope& scope) {
    StepGroups g;
    g.members = groups(s.groups, scope, pos);
    g.group_of.assign(static_cast<std::size_t>(n_), -1);
    g.position.assign(static_cast<std::size_t>(n_), -1);
    for (std::size_t k = 0; k < g.members.size(); ++k) {
      auto& members = g.members[k];
      for (std::size_t p = 0; p < members.size(); ++p) {
        g.group_of[static_cast<std::size_t>(members[p])] = static_cast<std::int32_t>(k);
        g.position[static_cast<std::size_t>(members[p])] = static_cast<std::int32_t>(p);
      }
      g.sorted.push_back(members);
      std::sort(g.sorted.back().begin(), g.sorted.back().end());
      if (s.reverse && s.pattern != dsl::Pattern::bfs) std::reverse(members.begin(), members.end());
    }
    return g;
  }

  void step(const dsl::Step& s, dsl::SourcePos pos, std::vector<std::int32_t>& active,
            const Scope& scope) {
    const StepGroups g = step_groups(s, pos, scope);
    const bool reversed = s.reverse && s.pattern != dsl::Pattern::bfs;
    ++stage_;
    plan_.statements.push_back(StatementPos{pos.line, pos.column, s.pattern == dsl::Pattern::pack});
    std::vector<std::int32_t> next;
    for (std::int32_t piece : active) {
      // The root of each group is its first carrier in the program's order.
      std::vector<std::int32_t> roots(g.members.size(), -1);
      for (std::int32_t c : pieces_[static_cast<std::size_t>(piece)].carriers) {
        const std::int32_t k = g.group_of[static_cast<std::size_t>(c)];
        if (k < 0) continue;
        auto& root = roots[static_cast<std::size_t>(k)];
        if (root < 0 ||
            g.position[static_cast<std::size_t>(c)] < g.position[static_cast<std::size_t>(root)])
          root = c;
      }
      std::vector<std::int32_t> current{piece};
      for (std::size_t k = 0; k < g.members.size(); ++k) {
        if (roots[k] < 0) continue;
        const auto m = static_cast<std::int32_t>(g.members[k].size());
        const std::int32_t at = g.position[static_cast<std::size_t>(roots[k])];
        const Group group{g.members[k], g.sorted[k], reversed ? m - 1 - at : at};
        std::vector<std::int32_t> produced;
        for (std::int32_t p : current) {
          const auto out = spread(s, pos, group, p, scope);
          produced.insert(produced.end(), out.begin(), out.end());
        }
        current = std::move(produced);
      }
      next.insert(next.end(), current.begin(), current.end());
    }
    active = std::move(next);
  }

  // One group of a step, as one piece meets it.
  struct Group {
    const std::vector<std::int32_t>& members;  // in the pattern's order
    const std::vector<std::int32_t>& sorted;   // the same, ascending
    std::int32_t root_pos;                     // the piece's root, as a position in `members`
  };

  // Moves piece `index` from the group's root through it; returns the piece(s) it becomes.
  std::vector<std::int32_t> spread(const dsl::Step& s, dsl::SourcePos pos, const Group& group,
                                   std::int32_t index, const Scope& scope) {
    const auto& members = group.members;
    const auto m = static_cast<std::int32_t>(members.size());
    if (s.pattern == dsl::Pattern::scatter) return scatter(pos, group, index, scope);
    if (s.pattern == dsl::Pattern::pack) return move_along_packing(s, pos, group, index, scope);
    if (s.pattern == dsl::Pattern::dbtree) {
      const auto halves = split_piece(index, {support::Rational(1), support::Rational(1)}, pos);
      move_along(pos, members, pattern_tree(dsl::Pattern::binary, 2, m, group.root_pos), halves[0],
                 scope);
      move_along(pos, members, mirrored_binary_tree(m, group.root_pos), halves[1], scope);
      for (std::int32_t half : halves) carry_to_group(half, group.sorted);
      return halves;
    }
    if (s.pattern == dsl::Pattern::bfs) {
      move_along_bfs(s, pos, members, group.root_pos, index, scope);
    } else {
      move_along(pos, members, pattern_tree(s.pattern, s.arity, m, group.root_pos), index, scope);
    }
    carry_to_group(index, group.sorted);
    return {index};
  }

  void move_along(dsl::SourcePos pos, const std::vector<std::int32_t>& members,
                  const PatternTree& tree, std::int32_t index, const Scope& scope) {
    if (!tree.error.empty()) fail(pos, tree.error);
    spend(tree.edges.size(), pos);
    for (const TreeEdge& e : tree.edges)
      send(members[static_cast<std::size_t>(e.from)], members[static_cast<std::size_t>(e.to)],
           index, e.round, -1, scope, pos);
  }

  std::vector<std::int32_t> scatter(dsl::SourcePos pos, const Group& group, std::int32_t index,
                                    const Scope& scope) {
    const auto& members = group.members;
    const auto m = static_cast<std::int32_t>(members.size());
    if (m == 1) return {index};
    const auto subs = split_piece(
        index,
        std::vector<support::Rational>(static_cast<std::size_t>(m - 1), support::Rational(1)), pos);
    for (std::int32_t k = 1; k < m; ++k) {
      const std::int32_t member = members[static_cast<std::size_t>((group.root_pos + k) % m)];
      const std::int32_t sub = subs[static_cast<std::size_t>(k - 1)];
      send(members[static_cast<std::size_t>(group.root_pos)], member, sub, 0, -1, scope, pos);
      // Only the member that received a part carries it on, of all the group.
      auto& carriers = pieces_[static_cast<std::size_t>(sub)].carriers;
      std::erase_if(carriers, [&](std::int32_t c) {
        return std::binary_search(group.sorted.begin(), group.sorted.end(), c);
      });
      carriers.insert(std::upper_bound(carriers.begin(), carriers.end(), member), member);
    }
    return subs;
  }

  static constexpr std::int64_t kPackShares = 16;

  // The group's throughput-optimal tree packing (topology/tree_packing.hpp), computed once per
  // group and set of avoided links; the piece is cut in proportion to its root's trees, whose
  // shares are rounded to multiples of 1/kPackShares so that chunk counts stay small.
  std::vector<std::int32_t> move_along_packing(const dsl::Step& s, dsl::SourcePos pos,
                                               const Group& group, std::int32_t index,
                                               const Scope& scope) {
    if (s.reverse) fail(pos, "pack has no direction: drop `reverse`");
    if (group.sorted.size() < 2) return {index};
    const topology::TreePacking& packing = packing_for(group.sorted, scope, pos);
    const std::int32_t root = group.members[static_cast<std::size_t>(group.root_pos)];
    const auto at = static_cast<std::size_t>(
        std::lower_bound(packing.members.begin(), packing.members.end(), root) -
        packing.members.begin());
    std::vector<const topology::PackedTree*> trees;
    std::vector<support::Rational> weights;
    for (const auto& [tree, parts] : rounded_shares(packing.trees[at])) {
      trees.push_back(tree);
      weights.emplace_back(parts);
    }
    const auto pieces = split_piece(index, weights, pos);
    for (std::size_t k = 0; k < trees.size(); ++k) {
      spend(trees[k]->edges.size(), pos);
      for (const topology::PackedEdge& e : trees[k]->edges)
        send(e.from_rank, e.to_rank, pieces[k], e.depth - 1, intern_path(e.path), scope, pos);
    }
    for (std::int32_t piece : pieces) carry_to_group(piece, group.sorted);
    return pieces;
  }

  const topology::TreePacking& packing_for(const std::vector<std::int32_t>& members,
                                           const Scope& scope, dsl::SourcePos pos) {
    auto key = std::make_pair(
        members, std::vector<topology::LinkId>(scope.avoided.begin(), scope.avoided.end()));
    if (auto it = packings_.find(key); it != packings_.end()) return it->second;
    try {
      return packings_
          .emplace(key, topology::pack_spanning_trees(
                            topo_, std::vector<int>(members.begin(), members.end()), scope.avoided))
          .first->second;
    } catch (const support::InputError& e) {
      const std::string what = e.what();
      const auto at = what.find("error: ");
      fail(pos, at == std::string::npos ? what : what.substr(at + 7));
    }
  }

  // Trees' shares as whole parts of kPackShares (largest remainders first; ties to the
  // heavier tree); trees that get none are dropped.
  static std::vector<std::pair<const topology::PackedTree*, std::int64_t>> rounded_shares(
      const std::vector<topology::PackedTree>& trees) {
    std::vector<std::pair<const topology::PackedTree*, std::int64_t>> parts;
    std::vector<std::pair<double, std::size_t>> remainders;
    std::int64_t given = 0;
    for (std::size_t k = 0; k < trees.size(); ++k) {
      const double exact = trees[k].share * kPackShares;
      const auto whole = static_cast<std::int64_t>(std::floor(exact));
      parts.emplace_back(&trees[k], whole);
      remainders.emplace_back(-(exact - static_cast<double>(whole)), k);
      given += whole;
    }
    std::stable_sort(remainders.begin(), remainders.end());
    for (std::size_t i = 0; given < kPackShares && i < remainders.size(); ++i, ++given)
      ++parts[remainders[i].second].second;
    std::erase_if(parts, [](const auto& p) { return p.second == 0; });
    return parts;
  }

  // A spanning tree over the group from a breadth-first search of the topology from the root's
  // GPU (lowest link id first, or highest with `reverse`), skipping avoided links; members are
  // joined to their nearest member ancestor, along the search tree's path.
  void move_along_bfs(const dsl::Step& s, dsl::SourcePos pos,
                      const std::vector<std::int32_t>& members, std::int32_t root_pos,
                      std::int32_t index, const Scope& scope) {
    std::vector<char> is_member(static_cast<std::size_t>(n_), 0);
    for (std::int32_t r : members) is_member[static_cast<std::size_t>(r)] = 1;
    const topology::NodeId start = topo_.gpu_of_rank(members[static_cast<std::size_t>(root_pos)]);
    std::vector<std::int64_t> parent(topo_.node_count(), -1);
    std::vector<std::int32_t> depth(topo_.node_count(), 0);
    std::vector<topology::NodeId> order{start};
    parent[start] = start;
    for (std::size_t head = 0; head < order.size(); ++head) {
      const topology::NodeId v = order[head];
      auto links = topo_.out_links(v);
      if (s.reverse) std::reverse(links.begin(), links.end());  // a different tree, same rules
      for (topology::LinkId l : links) {
        const topology::NodeId w = topo_.link(l).dst;
        if (parent[w] >= 0 || scope.avoided.contains(l)) continue;
        parent[w] = v;
        order.push_back(w);
      }
    }
    spend(order.size(), pos);
    for (topology::NodeId v : order) {
      const topology::Node& n = topo_.node(v);
      if (v == start || n.kind != topology::NodeKind::gpu ||
          !is_member[static_cast<std::size_t>(n.rank)])
        continue;
      std::vector<topology::NodeId> path{v};
      topology::NodeId up = static_cast<topology::NodeId>(parent[v]);
      while (!(topo_.node(up).kind == topology::NodeKind::gpu &&
               is_member[static_cast<std::size_t>(topo_.node(up).rank)])) {
        path.push_back(up);
        up = static_cast<topology::NodeId>(parent[up]);
      }
      path.push_back(up);
      std::reverse(path.begin(), path.end());
      depth[v] = depth[up] + 1;
      send(topo_.node(up).rank, n.rank, index, depth[v] - 1, intern_path(std::move(path)), scope,
           pos);
    }
    for (std::int32_t r : members)
      if (parent[topo_.gpu_of_rank(r)] < 0)
        fail(pos, "bfs: rank " + std::to_string(r) + " cannot be reached from rank " +
                      std::to_string(members[static_cast<std::size_t>(root_pos)]) +
                      " without the avoided links");
  }

  void send(std::int32_t from, std::int32_t to, std::int32_t index, std::int32_t round,
            std::int32_t route, const Scope& scope, dsl::SourcePos pos) {
    Piece& piece = pieces_[static_cast<std::size_t>(index)];
    auto& holder = piece.holder;
    if (holder[static_cast<std::size_t>(to)] != kNotHeld) return;
    require_transfers(plan_.transfers.size() + 1, pos);
    spend(1, pos);
    Transfer t;
    t.src = from;
    t.dst = to;
    t.data = piece.data;
    const std::int32_t dep = holder[static_cast<std::size_t>(from)];
    t.stage = stage_;
    t.statement = static_cast<std::int32_t>(plan_.statements.size()) - 1;
    t.round = round;
    t.piece = index;
    t.explicit_route = route >= 0 ? route : explicit_route_for(from, to, scope);
    t.avoid_set = scope.avoid_set;
    holder[static_cast<std::size_t>(to)] = static_cast<std::int32_t>(plan_.transfers.size());
    plan_.add(std::move(t), dep >= 0 ? std::span(&dep, 1) : std::span<const std::int32_t>());
  }

  std::int32_t explicit_route_for(std::int32_t from, std::int32_t to, const Scope& scope) const {
    for (auto it = scope.routes.rbegin(); it != scope.routes.rend(); ++it)
      if (it->from == from && it->to == to) return it->path;
    return -1;
  }

  // After a step, every member holds the piece and passes it on in the next step.
  void carry_to_group(std::int32_t index, const std::vector<std::int32_t>& sorted_members) {
    auto& carriers = pieces_[static_cast<std::size_t>(index)].carriers;
    std::vector<std::int32_t> merged;
    merged.reserve(carriers.size() + sorted_members.size());
    std::set_union(carriers.begin(), carriers.end(), sorted_members.begin(), sorted_members.end(),
                   std::back_inserter(merged));
    carriers = std::move(merged);
  }

  // --- expressions ---------------------------------------------------------------------------
  std::int32_t rank_of(const dsl::Expr& e, const Scope& scope) {
    return static_cast<std::int32_t>(integer(e, scope, -1, 0, n_ - 1, "a rank"));
  }

  std::int64_t integer(const dsl::Expr& e, const Scope& scope, std::int32_t current,
                       std::int64_t lo, std::int64_t hi, const std::string& what) {
    const support::Rational v = number(e, scope, current);
    if (!v.is_integer() || v.num() < lo || v.num() > hi)
      fail(e.pos, what + " must be an integer from " + std::to_string(lo) + " to " +
                      std::to_string(hi) + ", not " + v.to_string());
    return v.num();
  }

  support::Rational number(const dsl::Expr& e, const Scope& scope, std::int32_t current) {
    const Value v = eval(e, scope, current);
    if (v.size() != 1) fail(e.pos, "a tuple (a, b) is only allowed after 'by'");
    return v.front();
  }

  Value eval(const dsl::Expr& e, const Scope& scope, std::int32_t current) {
    spend(1, e.pos);
    switch (e.kind) {
      case dsl::Expr::Kind::number:
        return {e.number};
      case dsl::Expr::Kind::name:
        return {name_value(e, scope, current)};
      case dsl::Expr::Kind::node: {
        const topology::Node& n = topo_.node(node(e.text, e.pos));
        if (n.kind != topology::NodeKind::gpu)
          fail(e.pos, "@" + e.text + " is a " + std::string(to_string(n.kind)) +
                          ", not a gpu: only gpus have ranks");
        return {support::Rational(n.rank)};
      }
      case dsl::Expr::Kind::tuple: {
        Value out;
        for (const dsl::Expr& item : e.args) out.push_back(number(item, scope, current));
        return out;
      }
      case dsl::Expr::Kind::range:
        fail(e.pos, "a range a..b is only allowed in a list of ranks");
      case dsl::Expr::Kind::unary: {
        const support::Rational a = number(e.args[0], scope, current);
        if (e.op == dsl::Op::negate) return {checked(sub(support::Rational(0), a), e.pos)};
        return {support::Rational(a == support::Rational(0) ? 1 : 0)};
      }
      case dsl::Expr::Kind::ternary:
        return eval(
            number(e.args[0], scope, current) != support::Rational(0) ? e.args[1] : e.args[2],
            scope, current);
      case dsl::Expr::Kind::binary:
        return {binary(e, scope, current)};
    }
    fail(e.pos, "internal: unknown expression");
  }

  support::Rational binary(const dsl::Expr& e, const Scope& scope, std::int32_t current) {
    using dsl::Op;
    const support::Rational zero(0);
    const support::Rational a = number(e.args[0], scope, current);
    // && and || leave their right side unevaluated when the left decides.
    if (e.op == Op::logical_and && a == zero) return zero;
    if (e.op == Op::logical_or && a != zero) return support::Rational(1);
    const support::Rational b = number(e.args[1], scope, current);
    auto truth = [](bool x) { return support::Rational(x ? 1 : 0); };
    switch (e.op) {
      case Op::logical_or:
      case Op::logical_and:
        return truth(b != zero);
      case Op::equal:
        return truth(a == b);
      case Op::not_equal:
        return truth(a != b);
      case Op::less:
        return truth(a < b);
      case Op::less_equal:
        return truth(a <= b);
      case Op::greater:
        return truth(a > b);
      case Op::greater_equal:
        return truth(a >= b);
      case Op::plus:
        return checked(add(a, b), e.pos);
      case Op::minus:
        return checked(sub(a, b), e.pos);
      case Op::times:
        return checked(mul(a, b), e.pos);
      case Op::divide:
      case Op::modulo:
        return quotient(e, a, b);
      case Op::negate:
      case Op::logical_not:
        break;
    }
    fail(e.pos, "internal: unary operator '" + std::string(spelling(e.op)) + "' with two operands");
  }

  // a / b, or a % b (non-negative for a positive divisor).
  support::Rational quotient(const dsl::Expr& e, support::Rational a, support::Rational b) const {
    if (b == support::Rational(0)) fail(e.pos, "division by zero");
    if (e.op == dsl::Op::divide) return checked(div(a, b), e.pos);
    if (!a.is_integer() || !b.is_integer()) fail(e.pos, "'%' needs integers");
    const std::int64_t mod = a.num() % b.num();
    return support::Rational(mod != 0 && ((mod < 0) != (b.num() < 0)) ? mod + b.num() : mod);
  }

  support::Rational name_value(const dsl::Expr& e, const Scope& scope, std::int32_t current) {
    if (auto it = scope.vars.find(e.text); it != scope.vars.end()) return it->second;
    if (e.text == "nranks") return support::Rational(n_);
    if (e.text == "nhosts") return support::Rational(nhosts_);
    if (e.text == "nlocal") return support::Rational(nlocal_);
    if (e.text == "rank" || e.text == "host" || e.text == "local") {
      if (current < 0)
        fail(e.pos, "'" + e.text +
                        "' has no value here: it is the member's in 'by' and 'where', and the "
                        "data's source rank's in 'weight'");
      const topology::Node& n = topo_.node(topo_.gpu_of_rank(current));
      return support::Rational(e.text == "rank" ? n.rank : (e.text == "host" ? n.host : n.local));
    }
    fail(e.pos, "unknown name '" + e.text +
                    "' (names: rank, host, local, nranks, nhosts, nlocal, and those bound by let "
                    "or split ... as)");
  }

  const topology::Topology& topo_;
  const std::string& source_;
  const std::string& text_;
  EvalLimits limits_;
  std::int32_t n_ = 0, nhosts_ = 0, nlocal_ = 0, stage_ = -1;
  std::size_t work_ = 0;
  std::int64_t chunks_ = 1;  // per buffer, for the pieces cut so far and the pipeline depth
  std::map<std::string, topology::NodeId> node_by_id_;
  std::map<std::vector<topology::NodeId>, std::int32_t> path_index_;
  std::map<std::pair<std::vector<std::int32_t>, std::vector<topology::LinkId>>,
           topology::TreePacking>
      packings_;  // by group and avoided links
  std::map<std::vector<topology::LinkId>, std::int32_t> avoid_index_;
  std::vector<Piece> pieces_;
  Plan plan_;
};

}  // namespace

Plan evaluate(const dsl::Program& program, const topology::Topology& topology,
              const std::string& source, const std::string& text, const EvalLimits& limits) {
  return Evaluator(topology, source, text, limits).run(program);
}

}  // namespace optiflow::compiler
