// The one worker pool: runs body(0..count-1) on up to `threads` threads (0 = all cores).
// Workers take indices in turn, so results written by index do not depend on the thread
// count. An exception thrown by a body is carried to the caller: after every worker has
// stopped, the one from the lowest index is rethrown (the same one whatever the scheduling).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace optiflow::support {

inline unsigned worker_count(unsigned threads) {
  return threads ? threads : std::max(1u, std::thread::hardware_concurrency());
}

template <typename Body>
void parallel_for(std::size_t count, unsigned threads, Body&& body) {
  std::vector<std::exception_ptr> errors(count);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < count; i = next++) {
      try {
        body(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < worker_count(threads) && t < count; ++t) pool.emplace_back(work);
    work();
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace optiflow::support
