#include "pool.h"

#include <algorithm>
#include <chrono>
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
// A worker that has seen no new job for this long goes to sleep. Within one inference the
// caller's next parallel step comes a few microseconds to a few hundred after the last
// (it runs the small steps alone meanwhile), so the workers stay awake through a model's
// run and waking one (a futex call, tens of microseconds under a hypervisor) is paid once
// per run, not per step; an idle model still costs no CPU a moment after its run.
constexpr auto kWorkerSpinTime = std::chrono::microseconds(300);
constexpr int kSpinsPerClockRead = 64;
constexpr int kCallerSpins = 2000;  // then the caller yields its time slice while it waits
constexpr uint64_t kMask20 = (1u << 20) - 1;
// The contention fallback (pool.h): judged on runs of at least this many parallel steps,
// it lasts from kMinBackoff, doubling while the workers stay late, up to kMaxBackoff.
constexpr size_t kMinJudgedSteps = 4;
constexpr auto kMinBackoff = std::chrono::milliseconds(4);
constexpr auto kMaxBackoff = std::chrono::milliseconds(512);
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

size_t ThreadPool::drain(uint64_t job, bool from_back) {
  size_t ran = 0;
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t front = (c >> 20) & kMask20, back = c & kMask20;
    if ((c >> 40) != job || front >= back) return ran;
    const uint64_t claimed = from_back ? c - 1 : c + (uint64_t{1} << 20);
    if (!claim_.compare_exchange_weak(c, claimed, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Claimed a task of `job`: the job cannot end (nor fn_ change) before it is done.
    try {
      (*fn_)(static_cast<size_t>(from_back ? back - 1 : front));
    } catch (...) {
      failed_.store(true);
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
    ++ran;
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t job = claim_.load(std::memory_order_acquire) >> 40;
    const auto sleep_at = std::chrono::steady_clock::now() + kWorkerSpinTime;
    for (int spins = 1; job == seen; ++spins) {
      EDGEINF_PAUSE();
      job = claim_.load(std::memory_order_acquire) >> 40;
      if (spins % kSpinsPerClockRead == 0 && std::chrono::steady_clock::now() >= sleep_at) break;
    }
    if (job == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] { return stop_ || (claim_.load() >> 40) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      if (stop_) return;
      job = claim_.load(std::memory_order_acquire) >> 40;
    }
    seen = job;
    drain(job, true);
  }
}

void ThreadPool::begin_run(bool adaptive) {
  parallel_steps_ = joined_steps_ = steps_before_join_ = 0;
  alone_ = adaptive && !workers_.empty() && std::chrono::steady_clock::now() < alone_until_;
  if (alone_) runs_alone_.fetch_add(1, std::memory_order_relaxed);
}

void ThreadPool::end_run() {
  if (alone_ || parallel_steps_ < kMinJudgedSteps) return;
  // Judged from the first step a worker took part in: a worker asleep at the start of a run
  // (the last one ended a while ago) takes the time of a wake-up to join.
  if (joined_steps_ > 0 && 2 * joined_steps_ >= parallel_steps_ - steps_before_join_) {
    backoff_ = {};
    return;
  }
  using Duration = std::chrono::steady_clock::duration;
  backoff_ = backoff_ == Duration{} ? Duration(kMinBackoff) : std::min<Duration>(2 * backoff_, kMaxBackoff);
  alone_until_ = std::chrono::steady_clock::now() + backoff_;
}

void ThreadPool::run(size_t n, const std::function<void(size_t)>& fn) {
  if (workers_.empty() || n <= 1 || alone_) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  if (n > kMaxTasks) throw std::invalid_argument("ThreadPool::run: too many tasks");
  job_ = (job_ + 1) & ((uint64_t{1} << 24) - 1);
  if (job_ == 0) job_ = 1;  // 0 is the idle state the workers start from
  fn_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  failed_.store(false, std::memory_order_relaxed);
  claim_.store(pack(job_, 0, n), std::memory_order_seq_cst);
  // A worker about to sleep counts itself under the mutex before its last check of the
  // claim word, so either it sees the new job or the caller sees it counted and wakes it
  // (taking the mutex orders the notify after its wait began).
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    wake_.notify_all();
  }
  const size_t mine = drain(job_, false);
  ++parallel_steps_;
  if (mine < n) {
    if (joined_steps_ == 0) steps_before_join_ = parallel_steps_ - 1;
    ++joined_steps_;
  }
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
