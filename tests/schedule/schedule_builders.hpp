// Builders for hand-made schedules, shared by the schedule suite's tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/schedule/verifier.hpp"

namespace optiflow::schedule::testing_support {

constexpr BufferKind kIn = BufferKind::input;
constexpr BufferKind kOut = BufferKind::output;

inline int mod(int value, int n) {
  return ((value % n) + n) % n;
}

// A one-chunk step. (Builders rather than designated initializers: GCC 12 warns about the
// members those leave out.)
inline Step step(StepKind kind, BufferKind src, int src_off, BufferKind dst, int dst_off) {
  Step result;
  result.kind = kind;
  result.src_buf = src;
  result.src_off = src_off;
  result.dst_buf = dst;
  result.dst_off = dst_off;
  result.count = 1;
  return result;
}

inline Step send(BufferKind buffer, int offset, std::vector<StepRef> deps = {}) {
  Step result = step(StepKind::send, buffer, offset, kOut, 0);
  result.deps = std::move(deps);
  return result;
}

inline Step recv(BufferKind buffer, int offset) {
  return step(StepKind::recv, kOut, 0, buffer, offset);
}

inline Step nop(std::vector<StepRef> deps) {
  Step result;
  result.deps = std::move(deps);
  return result;
}

inline ThreadBlock block(int send_peer, int recv_peer) {
  ThreadBlock tb;
  tb.send_peer = send_peer;
  tb.recv_peer = recv_peer;
  return tb;
}

inline Schedule header(support::Collective collective, int ranks, bool inplace) {
  Schedule schedule;
  schedule.collective = collective;
  schedule.ranks = ranks;
  schedule.chunks = ranks;
  schedule.inplace = inplace;
  return schedule;
}

inline RankProgram buffers(int input_chunks, int output_chunks, std::vector<ThreadBlock> tbs = {}) {
  RankProgram program;
  program.input_chunks = input_chunks;
  program.output_chunks = output_chunks;
  program.tbs = std::move(tbs);
  return program;
}

// Ring All-Gather with chunks = ranks: rank r's tb 0 sends to r+1, its tb 1 receives from r-1,
// and the k-th forward send depends on the (k-1)-th receive. Out of place, tb 1 first copies
// the rank's input into its output slice.
inline Schedule ring_all_gather(int ranks, bool inplace = true) {
  Schedule schedule = header(support::Collective::all_gather, ranks, inplace);
  const int first_recv = inplace ? 0 : 1;
  for (int r = 0; r < ranks; ++r) {
    ThreadBlock sender = block(mod(r + 1, ranks), -1);
    ThreadBlock receiver = block(-1, mod(r - 1, ranks));
    if (!inplace) receiver.steps.push_back(step(StepKind::copy, kIn, 0, kOut, r));
    for (int k = 0; k + 1 < ranks; ++k) {
      if (k == 0)
        sender.steps.push_back(send(inplace ? kOut : kIn, inplace ? r : 0));
      else
        sender.steps.push_back(send(kOut, mod(r - k, ranks), {{1, first_recv + k - 1}}));
      receiver.steps.push_back(recv(kOut, mod(r - 1 - k, ranks)));
    }
    schedule.programs.push_back(
        buffers(inplace ? 0 : 1, ranks, {std::move(sender), std::move(receiver)}));
  }
  return schedule;
}

inline ::testing::AssertionResult has_error(const VerifyResult& result, std::string_view text) {
  for (const std::string& error : result.errors)
    if (error.find(text) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no error contains \"" << text << "\"; the errors:\n"
                                       << result.summary();
}

}  // namespace optiflow::schedule::testing_support
