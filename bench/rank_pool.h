// A pool of rank threads for benchmarks: each thread owns one rank's state for the whole
// benchmark, and run() executes one task on every rank at once and waits for all of them.
// Timing the dispatch from the benchmark thread measures a collective the way a user sees
// it: from the moment all ranks start until the slowest one is done.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace parity::bench {

class RankPool {
 public:
  explicit RankPool(int64_t world_size) : world_size_(world_size) {
    for (int64_t rank = 0; rank < world_size; ++rank) {
      threads_.emplace_back([this, rank] { serve(rank); });
    }
  }
  ~RankPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& thread : threads_) thread.join();
  }
  RankPool(const RankPool&) = delete;
  RankPool& operator=(const RankPool&) = delete;

  int64_t world_size() const { return world_size_; }

  // Runs task(rank) on every rank; rethrows the first exception a rank raised.
  void run(const std::function<void(int64_t rank)>& task) {
    std::unique_lock<std::mutex> lock(mutex_);
    task_ = &task;
    pending_ = world_size_;
    error_ = nullptr;
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [this] { return pending_ == 0; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void serve(int64_t rank) {
    uint64_t seen = 0;
    while (true) {
      const std::function<void(int64_t)>* task = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stopping_) return;
        task = task_;
      }
      std::exception_ptr error;
      try {
        (*task)(rank);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_.notify_one();
    }
  }

  int64_t world_size_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace parity::bench
