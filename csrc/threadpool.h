// One pool of worker threads for the whole process, shared by every kernel that splits its
// work (the image pipeline's output rows, later the int8 engine): a kernel never starts a
// thread per call. The pool is created on first use with one worker per extra hardware
// thread; when the system refuses a thread it keeps the workers it got (possibly none) and
// the calling thread does the rest.
#pragma once

#include <cstddef>
#include <functional>

namespace edgeinf {

// Runs task(i) for every i in [0, count) on at most `max_threads` threads, the calling thread
// included, and returns when all have returned. Calls may come from several threads at once
// and may nest: the caller always works on its own tasks, so a busy pool only slows it down.
// An exception thrown by a task never escapes a worker: the first one is rethrown here, after
// every task has finished or been skipped.
void parallel_for(size_t count, size_t max_threads, const std::function<void(size_t)>& task);

// Threads a parallel_for can use at most: the pool's workers plus the caller.
size_t pool_threads();

}  // namespace edgeinf
