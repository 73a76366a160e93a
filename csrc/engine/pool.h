// The engine's worker threads: created once with the Program, reused by every run().
//
// run(n, fn) calls fn(0) .. fn(n - 1) spread over the workers and the calling thread and
// returns when all are done. Tasks are claimed one at a time, so the caller never waits
// for a worker that has not started (on a loaded machine it simply runs every task
// itself); it only waits for tasks a worker has claimed. The caller claims from the first
// task on, the workers from the last one back: steps split their output rows in order, so
// on two threads each keeps making the same part of one layer after another, and finds
// the part of the previous layer it reads in its own core's cache. Between jobs the workers spin
// for a few hundred microseconds (a model's parallel steps follow each other closely),
// then sleep on a condition variable, so an idle model costs no CPU; the caller takes the
// mutex and notifies only when a worker sleeps. A task that throws is caught
// in the worker (nothing reaches std::terminate) and run() reports it.
//
// A run whose workers rarely get the CPU (other processes keep the cores busy) is slower
// than the caller alone: the workers spin and are woken at the cost of the caller's own
// time, and it ends up making nearly every task itself. So a program brackets each run
// with begin_run() / end_run(), and when the workers took part in none of a run's parallel
// steps, or in fewer than half of those from the first they took part in, the runs of the
// next few milliseconds (doubling while it lasts, up to half a second) go to the caller
// alone; the workers then sleep. The first run after that tries them again.
//
// Why not the process-wide pool of csrc/threadpool.h: that one serves any caller on any
// thread (image pipelines, several models at once) through a queue of batches under a
// mutex, each call allocating its batch and waking workers by condition variable; it has
// as many workers as the machine has cores, not the model's num_threads. A model runs
// 50-130 steps per call, a few to a few hundred microseconds each, so the engine keeps
// workers of its own that spin on one atomic word between steps and number exactly
// num_threads - 1.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace edgeinf::engine {

class ThreadPool {
 public:
  // `threads` counts the caller: 1 means no worker at all.
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Throws std::runtime_error when a task threw.
  void run(size_t n, const std::function<void(size_t)>& fn);

  // Around each whole run of a program (see above). Without them, run() always uses the
  // workers. begin_run(false) uses them whatever the runs before found.
  void begin_run(bool adaptive = true);
  void end_run();
  // Runs made by the caller alone because the workers were not getting the CPU.
  size_t runs_alone() const { return runs_alone_.load(std::memory_order_relaxed); }

  static constexpr size_t kMaxTasks = (1 << 20) - 1;  // task indices fit the claim word's 20 bits

 private:
  void work();
  // Claims and runs tasks of job `job`, the first unclaimed one each time or (from_back)
  // the last, until none is left. Returns how many it ran.
  size_t drain(uint64_t job, bool from_back);

  // The claim word: job number (upper 24 bits), then the unclaimed tasks [front, back)
  // (20 bits each).
  static uint64_t pack(uint64_t job, uint64_t front, uint64_t back) { return job << 40 | front << 20 | back; }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> claim_{0};
  std::atomic<size_t> done_{0};
  std::atomic<bool> failed_{false};
  std::atomic<int> sleepers_{0};                     // workers asleep on wake_ or about to be
  const std::function<void(size_t)>* fn_ = nullptr;  // written before the job's claim word
  uint64_t job_ = 0;                                 // the caller's job counter
  bool stop_ = false;

  // The caller's contention fallback (begin_run / end_run); only the caller touches these.
  bool alone_ = false;                                   // this run makes every task itself
  size_t parallel_steps_ = 0, joined_steps_ = 0;         // this run's, and those workers took part in
  size_t steps_before_join_ = 0;                         // parallel steps before the first joined one
  std::chrono::steady_clock::time_point alone_until_{};  // runs before this go to the caller alone
  std::chrono::steady_clock::duration backoff_{};        // how long the next fallback lasts
  std::atomic<size_t> runs_alone_{0};                    // atomic: read from other threads
};

}  // namespace edgeinf::engine
