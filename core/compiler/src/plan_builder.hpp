// The plan as evaluation builds it: the pieces the data is cut into, who holds and carries
// each, and the transfers that move them, each checked against the limits before it is made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "eval_context.hpp"
#include "optiflow/compiler/plan.hpp"

namespace optiflow::compiler {

/// Piece::holder values other than the index of the transfer that delivered the piece.
inline constexpr std::int32_t kNotHeld = -2;
inline constexpr std::int32_t kOwned = -1;

/// A contiguous part of one rank's share, and who holds and who carries it.
struct Piece {
  Interval data;
  std::int32_t source = 0;             ///< the rank whose share it is part of
  std::vector<std::int32_t> holder;    ///< per rank: kNotHeld, kOwned or the delivering transfer
  std::vector<std::int32_t> carriers;  ///< ranks that pass it on in the next step, ascending
};

/// Pieces and transfers of the plan being built. A piece or transfer that would take the
/// compiled plan past EvalLimits (pieces, chunks per buffer, transfers) is an error located at
/// the statement that makes it, raised before the memory is spent.
class PlanBuilder {
 public:
  explicit PlanBuilder(EvalContext& context);

  /// The pipeline depth the limits count slices with (the program's final one).
  void set_pipeline(std::int32_t depth) { plan_.pipeline = depth; }
  void set_channels(std::int32_t count) { plan_.channels = count; }
  void set_protocol(std::optional<topology::Protocol> protocol) { plan_.protocol = protocol; }
  Plan take() { return std::move(plan_); }

  /// One piece per rank: its whole share, held (owned) and carried by it alone.
  std::vector<std::int32_t> own_shares();
  const Piece& piece(std::int32_t index) const { return pieces_[static_cast<std::size_t>(index)]; }
  std::size_t piece_count() const { return pieces_.size(); }
  /// Fails at `pos` unless the plan may have `count` pieces.
  void require_pieces(std::size_t count, dsl::SourcePos pos) const;
  /// Cuts piece `index` in proportion to the positive weights, in order; returns the new pieces.
  std::vector<std::int32_t> split_piece(std::int32_t index,
                                        const std::vector<support::Rational>& weights,
                                        dsl::SourcePos pos);

  /// Opens the transfers of the step at `pos`; `paced` steps keep their order (pack).
  void begin_step(dsl::SourcePos pos, bool paced);
  /// Piece `index` from rank `from` to rank `to` unless `to` already holds it, after what
  /// delivered it to `from`. `route`: an explicit route's index, or -1 for the scope's route
  /// rules (else the compiler's routing).
  void send(std::int32_t from, std::int32_t to, std::int32_t index, std::int32_t round,
            std::int32_t route, const Scope& scope, dsl::SourcePos pos);
  /// After a step, every member holds the piece and passes it on in the next step.
  void carry_to_group(std::int32_t index, const std::vector<std::int32_t>& sorted_members);
  /// Of the group `sorted_members`, only `member` carries piece `index` on (scatter).
  void carry_by_one(std::int32_t index, const std::vector<std::int32_t>& sorted_members,
                    std::int32_t member);

  /// The index of `path` among the plan's explicit routes (added once).
  std::int32_t intern_path(std::vector<topology::NodeId> path);
  /// The index of `links` among the plan's avoided-link sets (added once).
  std::int32_t intern_avoid_set(const std::set<topology::LinkId>& links);

  /// Every rank must end up with every active piece: fails at `end` saying which data is
  /// missing where.
  void require_complete(const std::vector<std::int32_t>& active, dsl::SourcePos end) const;

 private:
  std::int32_t new_piece(Piece piece, dsl::SourcePos pos);
  void require_chunks(std::optional<std::int64_t> chunks, dsl::SourcePos pos);
  void require_transfers(std::size_t made, dsl::SourcePos pos) const;
  std::string with_pipeline() const;
  std::int32_t explicit_route_for(std::int32_t from, std::int32_t to, const Scope& scope) const;

  EvalContext& context_;
  Plan plan_;
  std::vector<Piece> pieces_;
  std::int32_t stage_ = -1;
  std::int64_t chunks_ = 1;  // per buffer, for the pieces cut so far and the pipeline depth
  std::map<std::vector<topology::NodeId>, std::int32_t> path_index_;
  std::map<std::vector<topology::LinkId>, std::int32_t> avoid_index_;
};

}  // namespace optiflow::compiler
