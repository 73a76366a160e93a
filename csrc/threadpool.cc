#include "threadpool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace edgeinf {
namespace {

constexpr size_t kMaxWorkers = 63;

// The tasks of one parallel_for call. Threads claim indices from `next`; the caller waits
// until `finished` reaches `count`.
struct Batch {
  const std::function<void(size_t)>* task = nullptr;
  size_t count = 0;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  size_t helpers_wanted = 0;  // workers that may still join (guarded by the pool's mutex)

  std::mutex mu;
  std::condition_variable done;
  size_t finished = 0;
  std::exception_ptr error;

  // Claims and runs tasks until none is left. Never throws.
  void work() {
    size_t ran = 0;
    std::exception_ptr first;
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count; ++ran) {
      if (failed.load(std::memory_order_relaxed)) continue;  // skip the rest after an error
      try {
        (*task)(i);
      } catch (...) {
        if (!first) first = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
    if (ran == 0 && !first) return;
    std::lock_guard<std::mutex> lock(mu);
    if (first && !error) error = first;
    finished += ran;
    if (finished == count) done.notify_all();
  }
};

class Pool {
 public:
  Pool() {
    const size_t hardware = std::max<unsigned>(1, std::thread::hardware_concurrency());
    const size_t wanted = std::min(hardware - 1, kMaxWorkers);
    for (size_t i = 0; i < wanted; ++i) {
      try {
        workers_.emplace_back([this] { loop(); });
      } catch (const std::exception&) {
        break;  // the system refused a thread (or its memory): the caller covers for the missing ones
      }
    }
  }

  size_t workers() const { return workers_.size(); }

  void submit(const std::shared_ptr<Batch>& batch) {
    const bool one = batch->helpers_wanted == 1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(batch);
    }
    if (one) {
      wake_.notify_one();
    } else {
      wake_.notify_all();
    }
  }

  void withdraw(const std::shared_ptr<Batch>& batch) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.erase(std::remove(queue_.begin(), queue_.end(), batch), queue_.end());
  }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<Batch> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        batch = queue_.front();
        if (--batch->helpers_wanted == 0) queue_.pop_front();
      }
      batch->work();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Batch>> queue_;
};

// The process's pool, created on first use. A child process after fork() has none of its
// parent's threads (and maybe a mutex locked by one of them): it gets a pool of its own.
Pool& pool() {
  static std::mutex create_mu;
  static std::atomic<Pool*> current{nullptr};
  static std::atomic<pid_t> owner{0};
  const pid_t pid = getpid();
  Pool* p = current.load(std::memory_order_acquire);
  if (p != nullptr && owner.load(std::memory_order_relaxed) == pid) return *p;
  std::lock_guard<std::mutex> lock(create_mu);
  p = current.load(std::memory_order_acquire);
  if (p == nullptr || owner.load(std::memory_order_relaxed) != pid) {
    // Never deleted: joining workers at static destruction could wait on threads the
    // runtime already stopped; the process's exit ends them.
    p = new Pool();
    owner.store(pid, std::memory_order_relaxed);
    current.store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

size_t pool_threads() { return pool().workers() + 1; }

void parallel_for(size_t count, size_t max_threads, const std::function<void(size_t)>& task) {
  if (count == 0) return;
  const size_t helpers = count > 1 && max_threads > 1 ? std::min({count, max_threads, pool_threads()}) - 1 : 0;
  if (helpers == 0) {
    for (size_t i = 0; i < count; ++i) task(i);
    return;
  }
  auto batch = std::make_shared<Batch>();
  batch->task = &task;
  batch->count = count;
  batch->helpers_wanted = helpers;
  Pool& p = pool();
  p.submit(batch);
  batch->work();
  {
    std::unique_lock<std::mutex> lock(batch->mu);
    batch->done.wait(lock, [&] { return batch->finished == count; });
  }
  p.withdraw(batch);  // workers that did not get to it need not take it any more
  if (batch->error) std::rethrow_exception(batch->error);
}

}  // namespace edgeinf
