#pragma once
// The sampler's random source: xoshiro256** with an explicit 4-word state, so a session can save and
// restore it exactly (SPEC §2.9). Seeded through splitmix64 so nearby seeds give unrelated streams.
#include <array>
#include <cstdint>

namespace strata::sampling {

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) w = splitmix64(x);
  }
  State state() const { return s_; }
  // An all-zero state is the one xoshiro cannot leave; it is replaced by the seed-0 state.
  void set_state(const State& s) {
    if ((s[0] | s[1] | s[2] | s[3]) == 0)
      reseed(0);
    else
      s_ = s;
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  State s_{};
};

}  // namespace strata::sampling
