// The int8 engine's executable form of a whole .tflite graph: one arena holding every
// activation, and a list of steps (one per fused operator) that run the csrc/kernels
// on fixed addresses inside it.
//
// A Program is built once by edgeinf.engine (which plans the graph in Python: fusion,
// tensor lifetimes, arena offsets, quantization parameters) and then run() executes the
// whole graph without returning to Python. The arena never moves, so steps keep raw
// pointers into it and the model's inputs and outputs are plain views of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pool.h"

namespace edgeinf::engine {

// One operator of the graph, bound to its tensors' places in the arena. Steps with enough
// work split it over the pool's threads.
class Step {
 public:
  virtual ~Step() = default;
  virtual void run(ThreadPool& pool) const = 0;
  virtual const char* name() const = 0;
};

class Program {
 public:
  static constexpr size_t kAlignment = 64;

  // Throws std::invalid_argument when arena_bytes exceeds kMaxArenaBytes or threads is
  // outside [1, kMaxThreads].
  Program(size_t arena_bytes, size_t threads);

  uint8_t* arena() { return arena_.get(); }
  size_t arena_bytes() const { return arena_bytes_; }

  // The arena bytes [offset, offset + bytes), checked to lie inside it (std::invalid_argument).
  uint8_t* span(size_t offset, size_t bytes, const char* what);

  void add(std::unique_ptr<Step> step) { steps_.push_back(std::move(step)); }
  size_t size() const { return steps_.size(); }
  const Step& step(size_t i) const { return *steps_.at(i); }

  // Runs every step in order. Steps only throw on programming errors (inputs are fixed
  // at build time), so no exception is expected here.
  void run() const;

  // Runs the whole program `runs` times, timing each step: the median seconds of each
  // step, in program order. For finding the slow layers of a model; run() pays nothing.
  std::vector<double> profile(size_t runs) const;

  size_t threads() const { return pool_->size(); }
  // Runs made on the calling thread alone because the workers were not getting the CPU
  // (pool.h).
  size_t runs_alone() const { return pool_->runs_alone(); }

  static constexpr size_t kMaxArenaBytes = size_t{1} << 32;
  static constexpr size_t kMaxThreads = 256;

 private:
  struct FreeAligned {
    void operator()(uint8_t* p) const;
  };
  size_t arena_bytes_;
  std::unique_ptr<uint8_t, FreeAligned> arena_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace edgeinf::engine
