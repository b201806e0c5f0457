// The neural models' MLPs, inferred without libtorch (the planner's path).
#include "embshard/cost/neural/mlp.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX__)
#include <immintrin.h>
#endif

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

// The inputs that are not zero, as bit masks (bit j of word w: input
// 64 w + j): a ReLU layer's outputs are mostly zero (in the shipped compute
// head, over a 1,000 x 64 search: 83% after its first layer, 89% after its
// second), and a zero input adds nothing to any output.
struct NonZero {
  static constexpr int kWords = (Mlp::kMaxWidth + 63) / 64;
  uint64_t words[kWords] = {};
  bool dense = false;  // over half the inputs non-zero: the blocks take them all
  NonZero(const float* in, int n) {
    int i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
      const uint64_t m =
          _mm512_cmp_ps_mask(_mm512_loadu_ps(in + i), _mm512_setzero_ps(), _CMP_NEQ_UQ);
      words[i / 64] |= m << (i % 64);
    }
#elif defined(__AVX__)
    for (; i + 8 <= n; i += 8) {
      const __m256 ne = _mm256_cmp_ps(_mm256_loadu_ps(in + i), _mm256_setzero_ps(), _CMP_NEQ_UQ);
      words[i / 64] |= static_cast<uint64_t>(_mm256_movemask_ps(ne)) << (i % 64);
    }
#endif
    for (; i < n; ++i) words[i / 64] |= uint64_t{in[i] != 0.0f} << (i % 64);
    int count = 0;
    for (const uint64_t w : words) count += std::popcount(w);
    dense = 2 * count > n;
  }
};

// Float vectors of L lanes (GCC/Clang vector extensions), so that the
// accumulators stay in registers: over inputs picked by mask, GCC's loop
// vectoriser kept them in memory. Blocks use the widest the target has. (GCC
// drops the attribute on an alias template; a typedef in a class template
// keeps it.)
template <int L>
struct VecOf {
  typedef float type __attribute__((vector_size(L * sizeof(float))));
};
template <int L>
using Vec = typename VecOf<L>::type;
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif

template <int L>
Vec<L> load(const float* p) {
  Vec<L> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// out[o0 .. o0+B) = bias + sum_i in[i] * W^T[i, o0 .. o0+B) over the non-zero
// inputs: two sets of B / L vector accumulators (even and odd inputs),
// twice the independent chains of one set to hide the FMA latency. Each set
// adds its inputs in ascending order, as a loop over every input would:
// skipping a zero changes no bit (a product with a zero factor adds nothing).
template <int B>
void dense_block(const DenseLayer& layer, const float* in, const NonZero& nz, int o0, float* out) {
  constexpr int L = std::min(B, kLanes), V = B / L;
  static_assert(B % L == 0 && sizeof(Vec<L>) == L * sizeof(float));
  Vec<L> even[V], odd[V];
  for (int v = 0; v < V; ++v) even[v] = load<L>(layer.bias.data() + o0 + v * L), odd[v] = Vec<L>{};
  const size_t stride = static_cast<size_t>(layer.out);
  const float* w = layer.weight_t.data() + o0;
  const auto add = [&](Vec<L>* acc, int i) {
    const float x = in[i];
    const float* wi = w + i * stride;
    for (int v = 0; v < V; ++v) acc[v] += load<L>(wi + v * L) * x;
  };
  if (nz.dense) {
    // Every input in turn: a loop the branch predictor knows.
    int i = 0;
    for (; i + 2 <= layer.in; i += 2) add(even, i), add(odd, i + 1);
    if (i < layer.in) add(even, i);
  } else {
    constexpr uint64_t kEven = 0x5555555555555555ull;
    for (int word = 0; word * 64 < layer.in; ++word) {
      uint64_t evens = nz.words[word] & kEven, odds = nz.words[word] & ~kEven;
      const int base = word * 64;
      for (; evens != 0 && odds != 0; evens &= evens - 1, odds &= odds - 1) {
        add(even, base + std::countr_zero(evens));
        add(odd, base + std::countr_zero(odds));
      }
      for (; evens != 0; evens &= evens - 1) add(even, base + std::countr_zero(evens));
      for (; odds != 0; odds &= odds - 1) add(odd, base + std::countr_zero(odds));
    }
  }
  for (int v = 0; v < V; ++v) {
    Vec<L> sum = even[v] + odd[v];
    if (layer.relu) sum = sum < 0.0f ? 0.0f : sum;  // std::max(sum, 0.0f), lane by lane
    std::memcpy(out + o0 + v * L, &sum, sizeof sum);
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
      // 32 and 8 outputs over the non-zero inputs, then dot products over
      // the inputs (float accumulation, like torch).
      int o = 0;
      if (layer.out >= 8) {  // the masks serve the blocks alone
        const NonZero nz(in, layer.in);
        for (; o + 64 <= layer.out; o += 64) dense_block<64>(layer, in, nz, o, out);
        for (; o + 32 <= layer.out; o += 32) dense_block<32>(layer, in, nz, o, out);
        for (; o + 8 <= layer.out; o += 8) dense_block<8>(layer, in, nz, o, out);
      }
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
