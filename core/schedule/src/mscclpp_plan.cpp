// MSCCL++ execution-plan JSON: export and the import of what the export writes.
#include "optiflow/schedule/mscclpp_plan.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "optiflow/schedule/flat_schedule.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"

namespace optiflow::schedule {
namespace {

using Json = nlohmann::ordered_json;

bool reduces_received(StepKind kind) {
  return kind == StepKind::recv_reduce_copy || kind == StepKind::recv_reduce_send ||
         kind == StepKind::recv_reduce_copy_send;
}

Json local_chunk(BufferKind buffer, std::int64_t index, std::int64_t size) {
  return Json{{"type", std::string(to_string(buffer))}, {"index", index}, {"size", size}};
}

Json channel_op(const char* name, int channel) {
  return Json{{"name", name}, {"channel_ids", {channel}}, {"channel_type", "memory"}};
}

// What the whole plan needs to know about every rank before writing any of them.
struct PlanContext {
  const FlatSchedule& flat;
  std::vector<std::vector<std::uint32_t>> rank_connections;  // per rank, sorted
  std::vector<int> send_channel, recv_channel;               // per connection, on each end
  std::vector<std::int64_t> staging;                         // per step (reducing receives)
  std::vector<std::int64_t> staging_total;                   // per rank
  std::vector<std::vector<int>> acquire, release;            // semaphore ids per step
  std::vector<int> semaphores;                               // per rank

  explicit PlanContext(const FlatSchedule& f) : flat(f) {
    const Schedule& s = flat.schedule();
    const auto connections = flat.connections();
    std::vector<std::uint32_t> order(connections.size());
    std::iota(order.begin(), order.end(), 0u);
    // Both ends list the connections between two ranks in one order, which is how MSCCL++
    // pairs the k-th channel of rank a to b with the k-th channel of b to a.
    std::ranges::sort(order, {}, [&](std::uint32_t c) {
      return std::tuple(connections[c].src, connections[c].dst, connections[c].channel);
    });
    rank_connections.resize(static_cast<std::size_t>(s.ranks));
    send_channel.assign(connections.size(), -1);
    recv_channel.assign(connections.size(), -1);
    for (std::uint32_t c : order) {
      auto& at_src = rank_connections[static_cast<std::size_t>(connections[c].src)];
      send_channel[c] = static_cast<int>(at_src.size());
      at_src.push_back(c);
      auto& at_dst = rank_connections[static_cast<std::size_t>(connections[c].dst)];
      recv_channel[c] = static_cast<int>(at_dst.size());
      at_dst.push_back(c);
    }
    staging.assign(flat.step_count(), -1);
    staging_total.assign(static_cast<std::size_t>(s.ranks), 0);
    acquire.resize(flat.step_count());
    release.resize(flat.step_count());
    semaphores.assign(static_cast<std::size_t>(s.ranks), 0);
    for (StepId id = 0; id < flat.step_count(); ++id) {
      const auto rank = static_cast<std::size_t>(flat.rank_of(id));
      if (reduces_received(flat.step(id).kind)) {
        staging[id] = s.programs[rank].scratch_chunks + staging_total[rank];
        staging_total[rank] += flat.step(id).count;
      }
      for (StepId dep : flat.deps(id)) {
        const int semaphore = semaphores[rank]++;
        acquire[id].push_back(semaphore);
        release[dep].push_back(semaphore);
      }
    }
  }
};

// One thread block's JSON; its channel and remote-buffer lists are local, as ops index them.
class BlockWriter {
 public:
  BlockWriter(const PlanContext& context, std::map<std::pair<int, std::string>, int>& remote,
              BlockId block)
      : context_(context), flat_(context.flat), remote_(remote), block_(flat_.blocks()[block]) {}

  Json write() {
    const ThreadBlock& tb = flat_.schedule()
                                .programs[static_cast<std::size_t>(block_.rank)]
                                .tbs[static_cast<std::size_t>(block_.index)];
    Json ops = Json::array(), step_starts = Json::array();
    for (StepId id = block_.first; id < block_.end; ++id) {
      step_starts.push_back(ops.size());
      add_step(ops, id);
    }
    Json channel_ids = Json::array(), buffer_ids = Json::array();
    for (int channel : channels_) channel_ids.push_back(channel);
    for (int buffer : buffers_) buffer_ids.push_back(buffer);
    return Json{{"id", block_.index},
                {"ops", ops},
                {"channels", {{{"channel_type", "memory"}, {"channel_ids", channel_ids}}}},
                {"remote_buffer_refs",
                 {{{"access_channel_type", "memory"}, {"remote_buffer_ids", buffer_ids}}}},
                {"channel", tb.channel},
                {"step_starts", step_starts}};
  }

 private:
  static int local(std::vector<int>& list, int id) {
    const auto it = std::ranges::find(list, id);
    if (it != list.end()) return static_cast<int>(it - list.begin());
    list.push_back(id);
    return static_cast<int>(list.size()) - 1;
  }

  void add_step(Json& ops, StepId id) {
    if (!context_.acquire[id].empty())
      ops.push_back({{"name", "sem_acquire"}, {"semaphore_ids", context_.acquire[id]}});
    const Step& step = flat_.step(id);
    const std::int64_t stage = context_.staging[id];
    if (step_receives(step.kind))
      ops.push_back(
          channel_op("wait", local(channels_, context_.recv_channel[block_.recv_connection])));
    switch (step.kind) {
      case StepKind::send:
        put(ops, id, local_chunk(step.src_buf, step.src_off, step.count));
        break;
      case StepKind::recv_copy_send:
        put(ops, id, local_chunk(step.dst_buf, step.dst_off, step.count));
        break;
      case StepKind::recv_reduce_copy:
      case StepKind::recv_reduce_copy_send:
        ops.push_back(reduce(local_chunk(step.src_buf, step.src_off, step.count),
                             local_chunk(BufferKind::scratch, stage, step.count),
                             local_chunk(step.dst_buf, step.dst_off, step.count)));
        if (step.kind == StepKind::recv_reduce_copy_send)
          put(ops, id, local_chunk(step.dst_buf, step.dst_off, step.count));
        break;
      case StepKind::recv_reduce_send:
        ops.push_back(reduce(local_chunk(step.src_buf, step.src_off, step.count),
                             local_chunk(BufferKind::scratch, stage, step.count),
                             local_chunk(BufferKind::scratch, stage, step.count)));
        put(ops, id, local_chunk(BufferKind::scratch, stage, step.count));
        break;
      case StepKind::copy:
        ops.push_back({{"name", "copy"},
                       {"src_buff", {local_chunk(step.src_buf, step.src_off, step.count)}},
                       {"dst_buff", {local_chunk(step.dst_buf, step.dst_off, step.count)}}});
        break;
      case StepKind::reduce:
        ops.push_back(reduce(local_chunk(step.dst_buf, step.dst_off, step.count),
                             local_chunk(step.src_buf, step.src_off, step.count),
                             local_chunk(step.dst_buf, step.dst_off, step.count)));
        break;
      case StepKind::nop:
        ops.push_back({{"name", "nop"}});
        break;
      case StepKind::recv:
        break;
    }
    if (!context_.release[id].empty())
      ops.push_back({{"name", "sem_release"}, {"semaphore_ids", context_.release[id]}});
  }

  static Json reduce(Json a, Json b, Json into) {
    return {{"name", "reduce"}, {"src_buff", {a, b}}, {"dst_buff", {into}}, {"reduce_op", "sum"}};
  }

  // Into the receiver's destination, or its staging region when the receive reduces.
  void put(Json& ops, StepId id, Json from) {
    const StepId receive = flat_.matching_receive(id);
    const Step& target = flat_.step(receive);
    const bool staged = reduces_received(target.kind);
    const BufferKind buffer = staged ? BufferKind::scratch : target.dst_buf;
    const std::int64_t index = staged ? context_.staging[receive] : target.dst_off;
    const int peer = flat_.rank_of(receive);
    const auto key = std::pair(peer, std::string(to_string(buffer)));
    const auto [it, added] = remote_.try_emplace(key, static_cast<int>(remote_.size()));
    const int channel = local(channels_, context_.send_channel[block_.send_connection]);
    ops.push_back({{"name", "put"},
                   {"src_buff", {from}},
                   {"dst_buff",
                    {{{"buffer_id", local(buffers_, it->second)},
                      {"index", index},
                      {"size", flat_.step(id).count}}}},
                   {"channel_ids", {channel}},
                   {"channel_type", "memory"}});
    ops.push_back(channel_op("signal", channel));
  }

  const PlanContext& context_;
  const FlatSchedule& flat_;
  std::map<std::pair<int, std::string>, int>& remote_;
  const FlatBlock& block_;
  std::vector<int> channels_, buffers_;
};

}  // namespace

std::string write_mscclpp_plan(const Schedule& schedule) {
  const FlatSchedule flat(schedule);
  const PlanContext context(flat);
  Json gpus = Json::array();
  for (std::int32_t rank = 0; rank < schedule.ranks; ++rank) {
    const RankProgram& program = schedule.programs[static_cast<std::size_t>(rank)];
    std::map<std::pair<int, std::string>, int> remote;
    Json blocks = Json::array();
    for (BlockId b = flat.first_block()[static_cast<std::size_t>(rank)];
         b < flat.first_block()[static_cast<std::size_t>(rank) + 1]; ++b)
      blocks.push_back(BlockWriter(context, remote, b).write());
    Json connected = Json::array();
    for (std::uint32_t c : context.rank_connections[static_cast<std::size_t>(rank)])
      connected.push_back(flat.connections()[c].src == rank ? flat.connections()[c].dst
                                                            : flat.connections()[c].src);
    std::vector<std::pair<int, std::pair<int, std::string>>> by_id;
    for (const auto& [key, id] : remote) by_id.emplace_back(id, key);
    std::ranges::sort(by_id);
    Json buffers = Json::array();
    for (const auto& [id, key] : by_id)
      buffers.push_back(
          {{"rank", key.first}, {"type", key.second}, {"access_channel_types", {"memory"}}});
    Json semaphores = Json::array();
    for (int i = 0; i < context.semaphores[static_cast<std::size_t>(rank)]; ++i)
      semaphores.push_back({{"init_value", 0}});
    gpus.push_back({{"id", rank},
                    {"input_chunks", program.input_chunks},
                    {"output_chunks", program.output_chunks},
                    {"scratch_chunks", program.scratch_chunks +
                                           context.staging_total[static_cast<std::size_t>(rank)]},
                    {"threadblocks", blocks},
                    {"channels", {{{"channel_type", "memory"}, {"connected_to", connected}}}},
                    {"remote_buffers", buffers},
                    {"semaphores", semaphores}});
  }
  const Json plan{{"name", schedule.name},
                  {"collective", std::string(support::to_string(schedule.collective))},
                  {"protocol", schedule.protocol},
                  {"inplace", schedule.inplace},
                  {"gpus", gpus},
                  {"num_threads_per_block", 1024},
                  {"use_double_scratch_buffer", false},
                  {"buffer_alignment", 16},
                  {"min_message_size", 0},
                  {"max_message_size", std::numeric_limits<std::uint64_t>::max()}};
  return plan.dump(2) + "\n";
}

}  // namespace optiflow::schedule

namespace optiflow::schedule {
namespace {

using Plain = nlohmann::json;

// A field that must hold a whole number of type T but holds something else (1e308 where an
// index goes): nlohmann would convert it with undefined behaviour.
struct NotAWholeNumber : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
T whole(const Plain& value) {
  if (value.is_number_unsigned()) {
    if (const auto v = value.get<std::uint64_t>(); std::in_range<T>(v)) return static_cast<T>(v);
  } else if (value.is_number_integer()) {
    if (const auto v = value.get<std::int64_t>(); std::in_range<T>(v)) return static_cast<T>(v);
  }
  throw NotAWholeNumber(value.dump());
}

[[noreturn]] void bad_plan(const std::string& source, const std::string& field,
                           const std::string& message) {
  throw support::InputError(support::SourceLocation{source, 0, 0, field}, message);
}

BufferKind buffer_of(const Plain& chunk, const std::string& source, const std::string& field) {
  const auto kind = buffer_kind_from_string(chunk.at("type").get<std::string>());
  if (!kind) bad_plan(source, field + ".type", "not a buffer (i, o or s)");
  return *kind;
}

// The plan's messages on one connection, in order: the puts that send them and the receiving
// steps that take them, so a receive that stores in place learns its destination.
struct Message {
  BufferKind buffer = BufferKind::output;
  std::int32_t index = 0, size = 0;
};
using ConnectionKey = std::tuple<std::int32_t, std::int32_t, std::int32_t>;

class PlanReader {
 public:
  PlanReader(const Plain& plan, const std::string& source) : plan_(plan), source_(source) {}

  /// Where the reader is (`gpus[1].threadblocks[0].ops[3]`): the field an error names.
  const std::string& where() const { return where_; }

  Schedule read() {
    Schedule s;
    s.name = plan_.value("name", Plain()).is_string() ? plan_.at("name").get<std::string>() : "";
    const auto collective =
        support::collective_from_string(plan_.at("collective").get<std::string>());
    if (!collective) bad_plan(source_, "collective", "unknown collective");
    s.collective = *collective;
    s.protocol = plan_.at("protocol").get<std::string>();
    s.inplace = plan_.at("inplace").get<bool>();
    const Plain& gpus = plan_.at("gpus");
    s.ranks = static_cast<std::int32_t>(gpus.size());
    s.programs.resize(gpus.size());
    acquires_.resize(gpus.size());
    releases_.resize(gpus.size());
    for (std::size_t r = 0; r < gpus.size(); ++r) {
      where_ = "gpus[" + std::to_string(r) + "]";
      read_gpu(gpus[r], static_cast<std::int32_t>(r), s);
    }
    where_.clear();
    resolve(s);
    for (const RankProgram& program : s.programs)
      s.chunks = std::max(
          {s.chunks, s.collective == support::Collective::all_gather ? 0 : program.input_chunks,
           s.collective == support::Collective::reduce_scatter ? 0 : program.output_chunks});
    return s;
  }

 private:
  void read_gpu(const Plain& gpu, std::int32_t rank, Schedule& s) {
    RankProgram& program = s.programs[static_cast<std::size_t>(rank)];
    program.input_chunks = whole<std::int32_t>(gpu.at("input_chunks"));
    program.output_chunks = whole<std::int32_t>(gpu.at("output_chunks"));
    program.scratch_chunks = whole<std::int32_t>(gpu.at("scratch_chunks"));
    std::vector<std::int32_t> peers;
    for (const Plain& channel : gpu.at("channels"))
      for (const Plain& peer : channel.at("connected_to"))
        peers.push_back(whole<std::int32_t>(peer));
    std::vector<std::pair<std::int32_t, BufferKind>> remote;
    for (const Plain& buffer : gpu.at("remote_buffers"))
      remote.emplace_back(whole<std::int32_t>(buffer.at("rank")),
                          buffer_of(buffer, source_, "remote_buffers"));
    const std::string gpu_at = where_;
    for (const Plain& tb : gpu.at("threadblocks")) {
      where_ = gpu_at + ".threadblocks[" + std::to_string(program.tbs.size()) + "]";
      read_block(tb, rank, peers, remote, program);
    }
  }

  // A thread block being read: where its ops send and receive, and its steps so far.
  struct Block {
    std::int32_t rank = 0, index = 0;  ///< its rank, and its index among the rank's blocks
    ThreadBlock tb;
    const std::vector<std::int32_t>& peers;
    const std::vector<std::pair<std::int32_t, BufferKind>>& remote;
    std::vector<std::int32_t> channels, buffers;

    std::int32_t peer_of(const Plain& op) const {
      return peers.at(
          static_cast<std::size_t>(channels.at(whole<std::size_t>(op.at("channel_ids").at(0)))));
    }
  };

  void read_block(const Plain& json_tb, std::int32_t rank, const std::vector<std::int32_t>& peers,
                  const std::vector<std::pair<std::int32_t, BufferKind>>& remote,
                  RankProgram& program) {
    Block block{rank, static_cast<std::int32_t>(program.tbs.size()), {}, peers, remote, {}, {}};
    block.tb.channel = json_tb.contains("channel") ? whole<std::int32_t>(json_tb.at("channel")) : 0;
    for (const Plain& group : json_tb.at("channels"))
      for (const Plain& id : group.at("channel_ids"))
        block.channels.push_back(whole<std::int32_t>(id));
    for (const Plain& group : json_tb.at("remote_buffer_refs"))
      for (const Plain& id : group.at("remote_buffer_ids"))
        block.buffers.push_back(whole<std::int32_t>(id));
    const Plain& ops = json_tb.at("ops");
    const std::vector<std::size_t> starts = step_starts(json_tb, ops.size());
    std::vector<int> acquire;
    std::size_t next_start = 1;
    const std::string block_at = where_;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      where_ = block_at + ".ops[" + std::to_string(i) + "]";
      const std::string name = ops[i].at("name").get<std::string>();
      while (next_start < starts.size() && starts[next_start] <= i) ++next_start;
      const std::size_t limit = next_start < starts.size() ? starts[next_start] : ops.size();
      if (name == "sem_acquire") {
        for (const Plain& id : ops[i].at("semaphore_ids")) acquire.push_back(whole<int>(id));
      } else if (name == "sem_release") {
        for (const Plain& id : ops[i].at("semaphore_ids"))
          releases_[static_cast<std::size_t>(rank)][whole<int>(id)] =
              StepRef{block.index, static_cast<std::int32_t>(block.tb.steps.size()) - 1};
      } else {
        block.tb.steps.push_back(read_step(ops, i, limit, block));
        acquires_[static_cast<std::size_t>(rank)].push_back(std::move(acquire));
        acquire.clear();
      }
    }
    program.tbs.push_back(std::move(block.tb));
  }

  // Where each step's ops begin: "wait, put, signal" is one rcs or an r and an s.
  std::vector<std::size_t> step_starts(const Plain& json_tb, std::size_t op_count) const {
    std::vector<std::size_t> starts;
    for (const Plain& start : json_tb.value("step_starts", Plain::array())) {
      starts.push_back(whole<std::size_t>(start));
      if (starts.back() > op_count || (starts.size() > 1 && starts.back() < starts.end()[-2]))
        bad_plan(source_, where_ + ".step_starts",
                 "must rise, each at most the number of ops (" + std::to_string(op_count) + ")");
    }
    starts.push_back(op_count);
    return starts;
  }

  // The step that begins at ops[i], which takes the ops it folds in (a wait's reduce and put,
  // a put's signal) by advancing i; `limit` is where the next step begins.
  Step read_step(const Plain& ops, std::size_t& i, std::size_t limit, Block& block) {
    const Plain& op = ops[i];
    const std::string name = op.at("name").get<std::string>();
    const auto next_is = [&](const char* what) {
      return i + 1 < limit && ops[i + 1].at("name") == what;
    };
    Step step;
    const Plain* reduce = nullptr;
    const Plain* put = nullptr;
    if (name == "wait") {
      block.tb.recv_peer = block.peer_of(op);
      if (next_is("reduce")) reduce = &ops[++i];
      if (next_is("put")) put = &ops[++i];
      step.kind = received_kind(reduce, put);
      receives_[{block.tb.recv_peer, block.rank, block.tb.channel}].push_back(
          {block.rank, block.index, static_cast<std::int32_t>(block.tb.steps.size())});
    } else if (name == "put") {
      put = &op;
      step.kind = StepKind::send;
    } else if (name == "copy" || name == "reduce") {
      step.kind = name == "copy" ? StepKind::copy : StepKind::reduce;
      const Plain& src = op.at("src_buff").at(name == "copy" ? 0 : 1);
      set(step, src, op.at("dst_buff").at(0));
    } else if (name == "nop") {
      step.kind = StepKind::nop;
    } else {
      bad_plan(source_, "ops", "op '" + name + "' is not one the export writes");
    }
    if (reduce) read_reduce(*reduce, block.rank, step);
    if (put) {
      read_put(*put, block, step);
      if (i + 1 < ops.size() && ops[i + 1].at("name") == "signal") ++i;
    }
    return step;
  }

  static StepKind received_kind(const Plain* reduce, const Plain* put) {
    if (reduce == nullptr) return put ? StepKind::recv_copy_send : StepKind::recv;
    if (!put) return StepKind::recv_reduce_copy;
    return reduce->at("dst_buff").at(0) == reduce->at("src_buff").at(1)
               ? StepKind::recv_reduce_send
               : StepKind::recv_reduce_copy_send;
  }

  void read_reduce(const Plain& reduce, std::int32_t rank, Step& step) {
    const Plain& src = reduce.at("src_buff").at(0);
    set(step, src, reduce.at("dst_buff").at(0));
    if (step.kind == StepKind::recv_reduce_send)
      step.dst_buf = BufferKind::output, step.dst_off = 0;
    staged_[static_cast<std::size_t>(rank)] += step.count;
  }

  void read_put(const Plain& put, Block& block, Step& step) {
    block.tb.send_peer = block.peer_of(put);
    const Plain& from = put.at("src_buff").at(0);
    const Plain& to = put.at("dst_buff").at(0);
    if (step.kind == StepKind::send) {
      step.src_buf = buffer_of(from, source_, "src_buff");
      step.src_off = whole<std::int32_t>(from.at("index"));
    } else if (step.kind == StepKind::recv_copy_send) {
      step.dst_buf = buffer_of(from, source_, "src_buff");
      step.dst_off = whole<std::int32_t>(from.at("index"));
    }
    step.count = whole<std::int32_t>(to.at("size"));
    const auto& target = block.remote.at(
        static_cast<std::size_t>(block.buffers.at(whole<std::size_t>(to.at("buffer_id")))));
    sent_[{block.rank, block.tb.send_peer, block.tb.channel}].push_back(
        Message{target.second, whole<std::int32_t>(to.at("index")), step.count});
  }

  static void set(Step& step, const Plain& src, const Plain& dst) {
    step.src_buf = *buffer_kind_from_string(src.at("type").get<std::string>());
    step.src_off = whole<std::int32_t>(src.at("index"));
    step.dst_buf = *buffer_kind_from_string(dst.at("type").get<std::string>());
    step.dst_off = whole<std::int32_t>(dst.at("index"));
    step.count = whole<std::int32_t>(src.at("size"));
  }

  void resolve(Schedule& s) {
    // Dependencies: in step order per rank, as acquires_ was filled.
    for (std::size_t r = 0; r < s.programs.size(); ++r) {
      std::size_t next = 0;
      for (ThreadBlock& tb : s.programs[r].tbs)
        for (Step& step : tb.steps)
          for (int semaphore : acquires_[r][next++])
            step.deps.push_back(releases_[r].at(semaphore));
      s.programs[r].scratch_chunks -= staged_[r];
    }
    // Receives that store in place take their destination from the put that feeds them.
    for (const auto& [key, receives] : receives_) {
      const auto& messages = sent_[key];
      for (std::size_t k = 0; k < receives.size() && k < messages.size(); ++k) {
        const auto [rank, tb, index] = receives[k];
        Step& step = s.programs[static_cast<std::size_t>(rank)]
                         .tbs[static_cast<std::size_t>(tb)]
                         .steps[static_cast<std::size_t>(index)];
        if (step.kind != StepKind::recv && step.kind != StepKind::recv_copy_send) continue;
        step.dst_buf = messages[k].buffer;
        step.dst_off = messages[k].index;
        step.count = messages[k].size;
      }
    }
  }

  const Plain& plan_;
  const std::string& source_;
  std::string where_;
  std::vector<std::vector<std::vector<int>>> acquires_;  // per rank, per step in order
  std::vector<std::map<int, StepRef>> releases_;
  std::map<std::size_t, std::int32_t> staged_;
  std::map<ConnectionKey, std::vector<Message>> sent_;
  std::map<ConnectionKey, std::vector<std::tuple<std::int32_t, std::int32_t, std::int32_t>>>
      receives_;
};

}  // namespace

Schedule parse_mscclpp_plan(std::string_view text, const std::string& source) {
  const Plain plan = support::parse_json_text(text, source);
  PlanReader reader(plan, source);
  try {
    return reader.read();
  } catch (const nlohmann::json::exception& e) {
    bad_plan(source, reader.where(),
             std::string("not an execution plan this exporter wrote: ") + e.what());
  } catch (const NotAWholeNumber& e) {
    bad_plan(source, reader.where(),
             std::string("expected a whole number in range, not ") + e.what());
  } catch (const std::out_of_range&) {
    bad_plan(source, reader.where(),
             "refers to a channel, peer, buffer or semaphore that the plan does not define");
  }
}

}  // namespace optiflow::schedule
