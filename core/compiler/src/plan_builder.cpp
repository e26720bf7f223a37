// Cutting pieces and making transfers, within the limits of the compiled plan.
#include "plan_builder.hpp"

#include <algorithm>
#include <iterator>
#include <span>

namespace optiflow::compiler {
namespace {

// The chunk count the compiled plan needs once `data` is cut into `pipeline` slices: the
// denominators of the slices' ends are those of its begin and of the slice length.
std::optional<std::int64_t> chunks_with(std::int64_t chunks, const Interval& data,
                                        std::int64_t pipeline) {
  const auto length = sub(data.end, data.begin);
  const auto slice = length ? div(*length, support::Rational(pipeline)) : std::nullopt;
  if (!slice) return std::nullopt;
  const auto with_begin = support::checked_lcm(chunks, data.begin.den());
  return with_begin ? support::checked_lcm(*with_begin, slice->den()) : std::nullopt;
}

}  // namespace

PlanBuilder::PlanBuilder(EvalContext& context) : context_(context) {
  plan_.ranks = context.ranks();
  plan_.avoid_sets.emplace_back();
  chunks_ = std::max<std::int64_t>(context.ranks(), 1);
}

std::vector<std::int32_t> PlanBuilder::own_shares() {
  const std::int32_t n = context_.ranks();
  std::vector<std::int32_t> shares;
  for (std::int32_t r = 0; r < n; ++r) {
    Piece piece;
    piece.data = Interval{*support::Rational::make(r, n), *support::Rational::make(r + 1, n)};
    piece.source = r;
    piece.holder.assign(static_cast<std::size_t>(n), kNotHeld);
    piece.holder[static_cast<std::size_t>(r)] = kOwned;
    piece.carriers = {r};
    shares.push_back(new_piece(std::move(piece), {}));
  }
  return shares;
}

void PlanBuilder::require_pieces(std::size_t count, dsl::SourcePos pos) const {
  const std::size_t limit = context_.limits().max_pieces;
  if (count > limit)
    context_.fail(pos,
                  "the program cuts the data into more than " + std::to_string(limit) + " pieces");
}

std::int32_t PlanBuilder::new_piece(Piece piece, dsl::SourcePos pos) {
  require_pieces(pieces_.size() + 1, pos);
  context_.spend(static_cast<std::size_t>(context_.ranks()), pos);
  require_chunks(chunks_with(chunks_, piece.data, plan_.pipeline), pos);
  pieces_.push_back(std::move(piece));
  return static_cast<std::int32_t>(pieces_.size() - 1);
}

std::vector<std::int32_t> PlanBuilder::split_piece(std::int32_t index,
                                                   const std::vector<support::Rational>& weights,
                                                   dsl::SourcePos pos) {
  require_pieces(pieces_.size() + weights.size(), pos);
  support::Rational total(0);
  for (support::Rational w : weights) total = context_.checked(add(total, w), pos);
  const Piece original = pieces_[static_cast<std::size_t>(index)];
  const support::Rational begin = original.data.begin;
  const support::Rational length = context_.checked(sub(original.data.end, begin), pos);
  std::vector<std::int32_t> subs;
  support::Rational cursor = begin, acc(0);
  for (support::Rational w : weights) {
    if (w == support::Rational(0)) continue;
    acc = context_.checked(add(acc, w), pos);
    const support::Rational fraction = context_.checked(div(acc, total), pos);
    const support::Rational end =
        context_.checked(add(begin, context_.checked(mul(length, fraction), pos)), pos);
    Piece part = original;
    part.data = Interval{cursor, end};
    cursor = end;
    subs.push_back(new_piece(std::move(part), pos));
  }
  return subs;
}

// Every piece's data is sent, so the plan will need chunks for it: reject the statement that
// makes the count exceed the limit before anything is allocated for it.
void PlanBuilder::require_chunks(std::optional<std::int64_t> chunks, dsl::SourcePos pos) {
  const std::int64_t limit = context_.limits().max_chunks;
  if (chunks && *chunks <= limit) {
    chunks_ = *chunks;
    return;
  }
  context_.fail(pos, "the program's pieces need " +
                         (chunks ? std::to_string(*chunks) : std::string("more than 2^63")) +
                         " chunks per buffer" + with_pipeline() + " (limit " +
                         std::to_string(limit) +
                         "): use fewer parts, simpler weights or a smaller pipeline");
}

std::string PlanBuilder::with_pipeline() const {
  return plan_.pipeline > 1 ? " with pipeline " + std::to_string(plan_.pipeline) : "";
}

// `made` transfers of the program are this many in the compiled plan: one per pipeline slice,
// per phase of the collective.
void PlanBuilder::require_transfers(std::size_t made, dsl::SourcePos pos) const {
  const EvalLimits& limits = context_.limits();
  if (made * static_cast<std::size_t>(plan_.pipeline) * limits.phases <= limits.max_transfers)
    return;
  std::string counted;
  if (plan_.pipeline > 1)
    counted += " of the " + std::to_string(plan_.pipeline) + " pipeline slices";
  if (limits.phases > 1) counted += " once per phase of the collective";
  context_.fail(pos, "the program makes more than " + std::to_string(limits.max_transfers) +
                         " transfers" + (counted.empty() ? "" : " (counting each" + counted + ")") +
                         ": use fewer parts, a smaller pipeline or a pattern that sends less");
}

void PlanBuilder::begin_step(dsl::SourcePos pos, bool paced) {
  ++stage_;
  plan_.statements.push_back(StatementPos{pos.line, pos.column, paced});
}

void PlanBuilder::send(std::int32_t from, std::int32_t to, std::int32_t index, std::int32_t round,
                       std::int32_t route, const Scope& scope, dsl::SourcePos pos) {
  Piece& piece = pieces_[static_cast<std::size_t>(index)];
  auto& holder = piece.holder;
  if (holder[static_cast<std::size_t>(to)] != kNotHeld) return;
  require_transfers(plan_.transfers.size() + 1, pos);
  context_.spend(1, pos);
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

std::int32_t PlanBuilder::explicit_route_for(std::int32_t from, std::int32_t to,
                                             const Scope& scope) const {
  for (auto it = scope.routes.rbegin(); it != scope.routes.rend(); ++it)
    if (it->from == from && it->to == to) return it->path;
  return -1;
}

void PlanBuilder::carry_to_group(std::int32_t index,
                                 const std::vector<std::int32_t>& sorted_members) {
  auto& carriers = pieces_[static_cast<std::size_t>(index)].carriers;
  std::vector<std::int32_t> merged;
  merged.reserve(carriers.size() + sorted_members.size());
  std::set_union(carriers.begin(), carriers.end(), sorted_members.begin(), sorted_members.end(),
                 std::back_inserter(merged));
  carriers = std::move(merged);
}

void PlanBuilder::carry_by_one(std::int32_t index, const std::vector<std::int32_t>& sorted_members,
                               std::int32_t member) {
  auto& carriers = pieces_[static_cast<std::size_t>(index)].carriers;
  std::erase_if(carriers, [&](std::int32_t c) {
    return std::binary_search(sorted_members.begin(), sorted_members.end(), c);
  });
  carriers.insert(std::upper_bound(carriers.begin(), carriers.end(), member), member);
}

std::int32_t PlanBuilder::intern_path(std::vector<topology::NodeId> path) {
  auto [it, inserted] =
      path_index_.try_emplace(path, static_cast<std::int32_t>(plan_.explicit_routes.size()));
  if (inserted) plan_.explicit_routes.push_back(std::move(path));
  return it->second;
}

std::int32_t PlanBuilder::intern_avoid_set(const std::set<topology::LinkId>& links) {
  std::vector<topology::LinkId> set(links.begin(), links.end());
  auto [it, inserted] =
      avoid_index_.try_emplace(set, static_cast<std::int32_t>(plan_.avoid_sets.size()));
  if (inserted) plan_.avoid_sets.push_back(set);
  return it->second;
}

void PlanBuilder::require_complete(const std::vector<std::int32_t>& active,
                                   dsl::SourcePos end) const {
  for (std::int32_t index : active) {
    const Piece& piece = pieces_[static_cast<std::size_t>(index)];
    for (std::int32_t r = 0; r < context_.ranks(); ++r) {
      if (piece.holder[static_cast<std::size_t>(r)] != kNotHeld) continue;
      const auto missing = std::count(piece.holder.begin(), piece.holder.end(), kNotHeld);
      context_.fail(
          end,
          "the program ends before every rank has all the data: rank " + std::to_string(r) +
              " never receives fraction [" + piece.data.begin.to_string() + ", " +
              piece.data.end.to_string() + ") of the buffer (rank " + std::to_string(piece.source) +
              "'s data), and " + std::to_string(missing - 1) +
              " other ranks lack it too; add a step that spreads it, e.g. 'direct over hosts'");
    }
  }
}

}  // namespace optiflow::compiler
