#include "pool.h"

#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EDGEINF_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define EDGEINF_PAUSE() asm volatile("yield")
#else
#define EDGEINF_PAUSE() ((void)0)
#endif

namespace edgeinf::engine {

namespace {
// A few microseconds before a worker sleeps. Longer spinning keeps the worker on a CPU
// that the thread with the work needs when other jobs share the machine: on a loaded
// 2-core host, 20000 spins made a model on two threads 1.7-1.9x slower than with 200
// (waking a sleeping worker costs a few microseconds per step instead).
constexpr int kWorkerSpins = 200;
constexpr int kCallerSpins = 2000;   // then the caller yields its time slice while it waits
constexpr uint64_t kMask20 = (1u << 20) - 1;
}  // namespace

ThreadPool::ThreadPool(size_t threads) {
  for (size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(uint64_t job) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t tasks = (c >> 20) & kMask20, next = c & kMask20;
    if ((c >> 40) != job || next >= tasks) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Claimed task `next` of `job`: the job cannot end (nor fn_ change) before it is done.
    try {
      (*fn_)(static_cast<size_t>(next));
    } catch (...) {
      failed_.store(true);
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t job = claim_.load(std::memory_order_acquire) >> 40;
    for (int spins = 0; job == seen && spins < kWorkerSpins; ++spins) {
      EDGEINF_PAUSE();
      job = claim_.load(std::memory_order_acquire) >> 40;
    }
    if (job == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || (claim_.load() >> 40) != seen; });
      if (stop_) return;
      job = claim_.load(std::memory_order_acquire) >> 40;
    }
    seen = job;
    drain(job);
  }
}

void ThreadPool::run(size_t n, const std::function<void(size_t)>& fn) {
  if (workers_.empty() || n <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  if (n > kMaxTasks) throw std::invalid_argument("ThreadPool::run: too many tasks");
  job_ = (job_ + 1) & ((uint64_t{1} << 24) - 1);
  if (job_ == 0) job_ = 1;  // 0 is the idle state the workers start from
  fn_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  failed_.store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);  // orders the claim word with a sleeping worker's check
    claim_.store(pack(job_, n, 0), std::memory_order_release);
  }
  wake_.notify_all();
  drain(job_);
  for (int spins = 0; done_.load(std::memory_order_acquire) != n; ++spins) {
    if (spins < kCallerSpins) {
      EDGEINF_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
  if (failed_.load()) throw std::runtime_error("an engine task failed");
}

}  // namespace edgeinf::engine
