// The event queue and the delay line against a reference: the same events, in (time,
// insertion order), for workloads shaped like the simulator's: many events at one instant,
// pushes between pops, times that differ in their lowest bits only, and times far apart.
#include "event_queue.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

namespace optiflow::sim {
namespace {

// (time, sequence) -> payload: a std::map is ordered exactly as the queue must pop.
class Reference {
 public:
  void push(double time, int payload) { events_.emplace(std::pair{time, sequence_++}, payload); }
  double next_time() const { return events_.empty() ? kNever : events_.begin()->first.first; }
  int pop() {
    const int payload = events_.begin()->second;
    events_.erase(events_.begin());
    return payload;
  }
  bool empty() const { return events_.empty(); }

 private:
  std::map<std::pair<double, std::uint64_t>, int> events_;
  std::uint64_t sequence_ = 0;
};

// Pops (`pop_chance` rounds in 21) and pushes at random, each push at or after the last
// popped time, as the simulator does.
template <class Queue = EventQueue<int>>
void run_against_reference(std::uint32_t seed, double (*later)(std::mt19937_64&, double),
                           std::uint64_t pop_chance = 7) {
  std::mt19937_64 random(seed);
  Queue queue;
  Reference reference;
  double now = 0;
  int payload = 0;
  for (int round = 0; round < 20000; ++round) {
    ASSERT_EQ(queue.next_time(), reference.next_time()) << "round " << round;
    if (!reference.empty() && random() % 21 < pop_chance) {
      now = reference.next_time();
      ASSERT_EQ(queue.pop(), reference.pop()) << "round " << round;
      continue;
    }
    const int pushes = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < pushes; ++i) {
      const double time = later(random, now);
      queue.push(time, payload);
      reference.push(time, payload);
      ++payload;
    }
  }
  while (!reference.empty()) {
    ASSERT_EQ(queue.next_time(), reference.next_time());
    ASSERT_EQ(queue.pop(), reference.pop());
  }
  EXPECT_EQ(queue.next_time(), kNever);
}

TEST(EventQueue, PopsInTimeThenInsertionOrderWhenTimesRepeat) {
  // Few distinct times: most events share their instant with others.
  run_against_reference(
      1, [](std::mt19937_64& r, double now) { return now + static_cast<double>(r() % 4); });
}

TEST(EventQueue, PopsInTimeThenInsertionOrderWhenTimesDifferInTheirLastBits) {
  run_against_reference(2, [](std::mt19937_64& r, double now) {
    double t = now;
    for (std::uint64_t steps = r() % 8; steps > 0; --steps) t = std::nextafter(t, kNever);
    return t;
  });
}

TEST(EventQueue, PopsInTimeThenInsertionOrderWhenTimesSpreadWidely) {
  run_against_reference(3, [](std::mt19937_64& r, double now) {
    return now + std::ldexp(static_cast<double>(r() % 1000), static_cast<int>(r() % 40) - 20);
  });
}

TEST(EventQueue, StartsAtTimeZeroAndTreatsNegativeZeroAsZero) {
  EventQueue<int> queue;
  queue.push(-0.0, 1);
  queue.push(0.0, 2);
  EXPECT_EQ(queue.next_time(), 0.0);
  EXPECT_EQ(queue.pop(), 1);
  EXPECT_EQ(queue.pop(), 2);
  EXPECT_EQ(queue.next_time(), kNever);
}

TEST(DelayLine, PopsInTimeThenInsertionOrderWhenEachEventIsAFixedDelayAfterNow) {
  // Slightly more pushes than pops: the line rarely drains.
  run_against_reference<DelayLine<int>>(
      4, [](std::mt19937_64&, double now) { return now + 0.375; }, 14);
}

}  // namespace
}  // namespace optiflow::sim
