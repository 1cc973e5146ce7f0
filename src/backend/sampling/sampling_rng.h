// SamplingRng: one request's random stream, SplitMix64 over a single 64-bit
// state, with uniforms made from its bits by integer arithmetic alone, so a
// seed gives the same draws on every platform and compiler.
#pragma once

#include <cstdint>
#include <optional>

namespace folio {

class SamplingRng {
 public:
  // A seeded request's stream. The seed is mixed first, so that nearby seeds
  // (0, 1, 2, ...) start far apart in the generator's cycle.
  static SamplingRng from_seed(std::int64_t seed) {
    return SamplingRng(mix(static_cast<std::uint64_t>(seed)));
  }
  // The stream of a request: from its seed when it has one, otherwise from a
  // counter the caller supplies (e.g. the engine's request count), so that
  // unseeded requests differ from each other without any global state.
  static SamplingRng for_request(std::optional<std::int64_t> seed, std::uint64_t unseeded_counter) {
    if (seed) return from_seed(*seed);
    return SamplingRng(mix(unseeded_counter ^ kUnseededDomain));
  }
  // Resumes a stream saved with state().
  static SamplingRng from_state(std::uint64_t state) { return SamplingRng(state); }

  std::uint64_t state() const { return state_; }

  // The next 64 random bits.
  std::uint64_t next_u64() {
    state_ += kGamma;
    return mix(state_);
  }

  // A uniform double in [0, 1): the top 53 bits over 2^53, exact in binary64.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Moves on as `draws` calls of next_u64 (or uniform) would: the stream a
  // device's row starts from, and where the host resumes after it.
  void skip(std::uint64_t draws) { state_ += draws * kGamma; }

  bool operator==(const SamplingRng&) const = default;

 private:
  explicit SamplingRng(std::uint64_t state) : state_(state) {}

  // SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
  // generators", OOPSLA 2014): the state advances by the odd constant
  // 2^64 / golden ratio, and each state is hashed by Stafford's "Mix13"
  // finaliser (shifts 30, 27, 31 and the two multipliers below).
  static constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  static constexpr std::uint64_t kMix1 = 0xBF58476D1CE4E5B9ull;
  static constexpr std::uint64_t kMix2 = 0x94D049BB133111EBull;
  // Arbitrary odd constant that keeps unseeded counters apart from seeds.
  static constexpr std::uint64_t kUnseededDomain = 0xD1B54A32D192ED03ull;

  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * kMix1;
    z = (z ^ (z >> 27)) * kMix2;
    return z ^ (z >> 31);
  }

  std::uint64_t state_;
};

}  // namespace folio
