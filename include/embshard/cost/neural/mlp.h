// Small MLPs for the neural cost models, inferred without libtorch: dense
// layers, feature normalisation and the float helpers the fast path needs.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace embshard {

// y = W x + b, then ReLU if `relu`. `weight` is out x in, row-major
// (torch::nn::Linear's layout), so weights copy to and from torch unchanged.
struct DenseLayer {
  int in = 0, out = 0;
  bool relu = true;
  std::vector<float> weight, bias;
  std::vector<float> weight_t;  // in x out: filled by Mlp::prepare for the fast loop
};

struct Mlp {
  std::vector<DenseLayer> layers;
  int in() const { return layers.empty() ? 0 : layers.front().in; }
  int out() const { return layers.empty() ? 0 : layers.back().out; }
  std::vector<int> sizes() const;  // in, hidden..., out
  // y = mlp(x). Activations live on the stack (widths <= kMaxWidth), so
  // forward allocates nothing and is safe to call from many threads.
  static constexpr int kMaxWidth = 512;
  void forward(const float* x, float* y) const;
  // Transposes the weights so that forward's inner loop runs over outputs
  // (contiguous, vectorised); forward falls back to the row-major loop
  // (double accumulation) for layers not prepared.
  void prepare();
};

// x' = (x - mean) * scale, per feature; scale = 1 / std of the training set;
// then, if clamp > 0, x' is clamped to +-clamp, so that a feature far outside
// the training set (a row piece's reuse all in a bin whole tables rarely
// fill, where 1 / std is in the thousands) cannot drive the network out of
// any range it was trained on. Models trained before the clamp have 0.
struct Normaliser {
  std::vector<float> mean, scale;
  float clamp = 0;
  void apply(float* x) const;
};
// The clamp training gives every normaliser it fits, in standard deviations.
constexpr float kFeatureClamp = 6.0f;

// The per-table outputs are clamped to +-kTableLogClamp before exp, so that
// sums stay finite in float.
constexpr float kTableLogClamp = 30.0f;
float table_exp(float x);
// Natural log of a positive normal float, branch-free so that a loop over an
// array vectorises (std::log does not): x = m 2^e with m in [sqrt(1/2),
// sqrt(2)), log m = 2 atanh(t), t = (m - 1) / (m + 1), |t| < 0.172, by its
// series to t^9 (truncation < 1e-9). Within a few float ulps of std::log.
// Inline, so that the callers' loops vectorise.
inline float log_positive(float x) {
  // Subtracting the bits of sqrt(1/2) puts the exponent k of x / sqrt(1/2)
  // in the top bits; x / 2^k is then in [sqrt(1/2), sqrt(2)). Integer ops
  // only, so that loops over arrays vectorise.
  constexpr uint32_t kSqrtHalf = 0x3f3504f3u;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t offset = bits - kSqrtHalf;
  const int32_t k = static_cast<int32_t>(offset) >> 23;
  const float m = std::bit_cast<float>(bits - (offset & 0xff800000u));
  const float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
  const float series =
      t * (2.0f + t2 * (2.0f / 3 + t2 * (2.0f / 5 + t2 * (2.0f / 7 + t2 * (2.0f / 9)))));
  return series + static_cast<float>(k) * 0.693147181f;
}

}  // namespace embshard
