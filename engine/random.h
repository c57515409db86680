// Rng: a small deterministic generator (xoshiro256**, seeded by splitmix64)
// with its own normal sampler, so the same seed gives the same weights and
// batch order on every platform and standard library.
#ifndef SMALLEM_ENGINE_RANDOM_H_
#define SMALLEM_ENGINE_RANDOM_H_

#include <cstdint>

namespace smallem {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform();
  // Uniform integer in [0, n).
  uint64_t Below(uint64_t n);
  // Standard normal (Box–Muller; the second value of each pair is kept).
  double Normal();

  // The generator's whole state, so a checkpoint can save it and a resumed
  // run continue the same stream (engine/train/checkpoint.h).
  struct State {
    uint64_t s[4] = {0, 0, 0, 0};
    bool has_spare = false;
    double spare = 0;
  };
  State state() const;
  void set_state(const State& state);

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_RANDOM_H_
