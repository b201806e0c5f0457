// The neural models' MLPs, inferred without libtorch (the planner's path).
#include "embshard/cost/neural/mlp.h"

#include <algorithm>
#include <cmath>

namespace embshard {

float table_exp(float x) { return std::exp(std::clamp(x, -kTableLogClamp, kTableLogClamp)); }

std::vector<int> Mlp::sizes() const {
  std::vector<int> s;
  if (layers.empty()) return s;
  s.push_back(layers.front().in);
  for (const DenseLayer& l : layers) s.push_back(l.out);
  return s;
}

namespace {

// out[o0 .. o0+B) = bias + sum_i in[i] * W^T[i, o0 .. o0+B): two sets of B
// accumulators (even and odd inputs) that the compiler keeps in vector
// registers for the whole loop over inputs, twice the independent chains of
// one set to hide the FMA latency.
template <int B>
void dense_block(const DenseLayer& layer, const float* in, int o0, float* out) {
  float even[B], odd[B];
  for (int o = 0; o < B; ++o) even[o] = layer.bias[o0 + o], odd[o] = 0.0f;
  const size_t stride = static_cast<size_t>(layer.out);
  const float* w = layer.weight_t.data() + o0;
  int i = 0;
  for (; i + 2 <= layer.in; i += 2, w += 2 * stride) {
    const float x0 = in[i], x1 = in[i + 1];
    for (int o = 0; o < B; ++o) {
      even[o] += w[o] * x0;
      odd[o] += w[stride + o] * x1;
    }
  }
  if (i < layer.in) {
    for (int o = 0; o < B; ++o) even[o] += w[o] * in[i];
  }
  for (int o = 0; o < B; ++o) {
    const float v = even[o] + odd[o];
    out[o0 + o] = layer.relu ? std::max(v, 0.0f) : v;
  }
}

// out[o] = bias + W[o, :] . in: eight partial sums, so that the loop
// vectorises without reassociating one long chain of adds.
void dense_dot(const DenseLayer& layer, const float* in, int o, float* out) {
  const float* w = layer.weight.data() + static_cast<size_t>(o) * layer.in;
  float part[8] = {};
  int i = 0;
  for (; i + 8 <= layer.in; i += 8) {
    for (int k = 0; k < 8; ++k) part[k] += w[i + k] * in[i + k];
  }
  float acc = layer.bias[o];
  for (; i < layer.in; ++i) acc += w[i] * in[i];
  for (float p : part) acc += p;
  out[o] = layer.relu ? std::max(acc, 0.0f) : acc;
}

}  // namespace

void Mlp::forward(const float* x, float* y) const {
  float buffers[2][kMaxWidth];
  const float* in = x;
  for (size_t l = 0; l < layers.size(); ++l) {
    const DenseLayer& layer = layers[l];
    float* out = l + 1 == layers.size() ? y : buffers[l % 2];
    if (layer.weight_t.size() == layer.weight.size()) {
      // Blocks of 64 (eight independent vector chains hide the FMA latency),
      // 32 and 8 outputs, then dot products over the inputs (float
      // accumulation, like torch).
      int o = 0;
      for (; o + 64 <= layer.out; o += 64) dense_block<64>(layer, in, o, out);
      for (; o + 32 <= layer.out; o += 32) dense_block<32>(layer, in, o, out);
      for (; o + 8 <= layer.out; o += 8) dense_block<8>(layer, in, o, out);
      for (; o < layer.out; ++o) dense_dot(layer, in, o, out);
      in = out;
      continue;
    }
    // The reference: row-major weights, double accumulation.
    for (int o = 0; o < layer.out; ++o) {
      const float* w = layer.weight.data() + static_cast<size_t>(o) * layer.in;
      double acc = layer.bias[o];
      for (int i = 0; i < layer.in; ++i) acc += static_cast<double>(w[i]) * in[i];
      out[o] = layer.relu && acc < 0 ? 0.0f : static_cast<float>(acc);
    }
    in = out;
  }
}

void Mlp::prepare() {
  for (DenseLayer& l : layers) {
    l.weight_t.resize(l.weight.size());
    for (size_t o = 0; o < static_cast<size_t>(l.out); ++o) {
      for (size_t i = 0; i < static_cast<size_t>(l.in); ++i) {
        l.weight_t[i * l.out + o] = l.weight[o * l.in + i];
      }
    }
  }
}

void Normaliser::apply(float* x) const {
  for (size_t i = 0; i < mean.size(); ++i) x[i] = (x[i] - mean[i]) * scale[i];
  if (clamp > 0) {
    for (size_t i = 0; i < mean.size(); ++i) x[i] = std::clamp(x[i], -clamp, clamp);
  }
}

}  // namespace embshard
