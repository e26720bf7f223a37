// The simulator's time-ordered queue: events by (time, insertion order), so that runs are
// deterministic. Symmetric schedules produce many events at one instant (every rank's step of
// a round arrives at once), so events with equal times share a bucket, a FIFO; a 4-ary heap
// orders the buckets by (time, creation). An event joins the bucket of its time when that is one
// of the last few buckets created, which keeps insertion order: a bucket created later has later
// events only, and one created earlier with the same time is drained before it.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <limits>
#include <queue>
#include <vector>

namespace optiflow::sim {

constexpr double kNever = std::numeric_limits<double>::infinity();

template <class Payload>
class EventQueue {
 public:
  /// The earliest event's time; kNever when there is none.
  double next_time() const { return heap_.empty() ? kNever : heap_.front().time; }

  void push(double time, Payload payload) {
    for (const Recent& r : recent_) {
      if (r.bucket == kNone) break;
      Bucket& b = buckets_[r.bucket];
      if (b.sequence == r.sequence && b.time == time) {
        b.payloads.push_back(payload);
        return;
      }
    }
    const std::uint32_t bucket = new_bucket(time, payload);
    std::copy_backward(recent_.begin(), recent_.end() - 1, recent_.end());
    recent_[0] = Recent{bucket, buckets_[bucket].sequence};
    push_heap(Entry{time, buckets_[bucket].sequence, bucket});
  }

  /// Removes and returns the earliest event; the queue must not be empty.
  Payload pop() {
    const std::uint32_t bucket = heap_.front().bucket;
    Bucket& b = buckets_[bucket];
    const Payload payload = b.payloads[b.next++];
    if (b.next == b.payloads.size()) {
      b.payloads.clear();
      b.next = 0;
      b.sequence = kNone;
      free_.push_back(bucket);
      pop_heap();
    }
    return payload;
  }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::size_t kArity = 4;

  struct Bucket {
    double time = 0;
    std::uint32_t sequence = kNone;  // its creation; kNone once drained
    std::vector<Payload> payloads;
    std::size_t next = 0;  // the first not yet popped
  };
  struct Entry {
    double time;
    std::uint32_t sequence;  // a run creates fewer than 2^32 - 1 buckets
    std::uint32_t bucket;
  };
  struct Recent {
    std::uint32_t bucket = kNone;
    std::uint32_t sequence = kNone;
  };

  static bool earlier(const Entry& a, const Entry& b) {
    return a.time < b.time || (a.time == b.time && a.sequence < b.sequence);
  }

  std::uint32_t new_bucket(double time, Payload payload) {
    std::uint32_t bucket;
    if (free_.empty()) {
      bucket = static_cast<std::uint32_t>(buckets_.size());
      buckets_.emplace_back();
    } else {
      bucket = free_.back();
      free_.pop_back();
    }
    Bucket& b = buckets_[bucket];
    b.time = time;
    b.sequence = sequence_++;
    b.payloads.push_back(payload);
    return bucket;
  }

  void push_heap(const Entry& entry) {
    std::size_t i = heap_.size();
    heap_.push_back(entry);
    while (i > 0) {
      const std::size_t parent = (i - 1) / kArity;
      if (!earlier(entry, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = entry;
  }

  void pop_heap() {
    const Entry last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return;
    std::size_t i = 0;
    while (true) {
      const std::size_t first = kArity * i + 1;
      if (first >= n) break;
      std::size_t child = first;
      for (std::size_t c = first + 1; c < std::min(first + kArity, n); ++c)
        if (earlier(heap_[c], heap_[child])) child = c;
      if (!earlier(heap_[child], last)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = last;
  }

  std::vector<Entry> heap_;
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> free_;
  std::array<Recent, 4> recent_{};  // the last buckets created, newest first
  std::uint32_t sequence_ = 0;
};

/// Events pushed in order of their times (each a constant delay after a time that only moves
/// forward): a FIFO is then already in (time, insertion) order, and costs no heap.
template <class Payload>
class DelayLine {
 public:
  /// The earliest event's time; kNever when there is none.
  double next_time() const { return events_.empty() ? kNever : events_.front().time; }

  void push(double time, Payload payload) {
    assert(events_.empty() || time >= events_.back().time);
    events_.push(Event{time, payload});
  }

  /// Removes and returns the earliest event; the line must not be empty.
  Payload pop() {
    const Payload payload = events_.front().payload;
    events_.pop();
    return payload;
  }

 private:
  struct Event {
    double time;
    Payload payload;
  };
  std::queue<Event> events_;
};

}  // namespace optiflow::sim
