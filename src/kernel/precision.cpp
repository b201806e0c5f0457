#include "embshard/kernel/precision.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "embshard/util/error.h"
#include "embshard/util/random.h"

namespace embshard {

uint16_t fp32_to_fp16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: infinity
  const int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent >= -14) {  // normal fp16: drop 13 mantissa bits, ties to even
    uint32_t h = (static_cast<uint32_t>(exponent + 15) << 10) | ((abs >> 13) & 0x3ffu);
    const uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
    return sign | static_cast<uint16_t>(h);
  }
  if (exponent < -25) return sign;  // under half the smallest subnormal
  // Subnormal fp16: the value in units of 2^-24, ties to even.
  const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  const int shift = -exponent - 1;  // 14..24: 24-bit mantissa to units of 2^-24
  uint32_t h = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else {  // zero or subnormal: mantissa x 2^-24, exact in fp32
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

namespace {

// The magnitude neighbour of a finite half h (sign-magnitude bits): one unit
// of the last place further from zero or nearer to it.
uint16_t step_away(uint16_t h) { return static_cast<uint16_t>(h + 1); }
uint16_t step_toward_zero(uint16_t h) { return static_cast<uint16_t>(h - 1); }

}  // namespace

uint16_t round_half(DataType type, float x, bool stochastic, uint32_t random) {
  const uint16_t nearest = type == DataType::kBf16 ? fp32_to_bf16(x) : fp32_to_fp16(x);
  if (!stochastic || !std::isfinite(x)) return nearest;
  const float back = half_to_fp32(type, nearest);
  if (back == x || std::isinf(back)) return nearest;
  // The two halves around x: `low` toward zero, `high` away from it.
  const bool nearest_above = std::fabs(back) > std::fabs(x);
  uint16_t low = nearest, high = nearest;
  if (nearest_above) {
    low = (nearest & 0x7fffu) == 0 ? nearest : step_toward_zero(nearest);
  } else {
    high = step_away(nearest);
  }
  const double lo = std::fabs(static_cast<double>(half_to_fp32(type, low)));
  const double hi = std::fabs(static_cast<double>(half_to_fp32(type, high)));
  if (!std::isfinite(hi) || hi <= lo) return nearest;
  const double p_high = (std::fabs(static_cast<double>(x)) - lo) / (hi - lo);
  return static_cast<double>(random) * 0x1p-32 < p_high ? high : low;
}

void widen_halves(DataType type, const uint16_t* in, int n, float* out) {
  int i = 0;
  if (type == DataType::kBf16) {
    for (; i < n; ++i) out[i] = bf16_to_fp32(in[i]);
    return;
  }
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
#endif
  for (; i < n; ++i) out[i] = fp16_to_fp32(in[i]);
}

void narrow_halves(DataType type, const float* in, int n, uint16_t* out) {
  int i = 0;
  if (type == DataType::kBf16) {
    for (; i < n; ++i) out[i] = fp32_to_bf16(in[i]);
    return;
  }
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
#endif
  for (; i < n; ++i) out[i] = fp32_to_fp16(in[i]);
}

uint32_t rounding_random(uint64_t seed, int64_t step, int table, int64_t row, int column) {
  uint64_t h = splitmix64(seed ^ (static_cast<uint64_t>(step) * 0x9e3779b97f4a7c15ull));
  h = splitmix64(h ^ static_cast<uint64_t>(table));
  h = splitmix64(h ^ (static_cast<uint64_t>(row) << 11) ^ static_cast<uint64_t>(column));
  return static_cast<uint32_t>(h >> 32);
}

void quantize_row(DataType type, const float* in, int dim, uint8_t* out) {
  // The range of the finite values (none: 0); NaN takes code 0, infinities
  // the ends.
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int d = 0; d < dim; ++d) {
    if (std::isfinite(in[d])) lo = std::min(lo, in[d]), hi = std::max(hi, in[d]);
  }
  if (lo > hi) lo = hi = 0.0f;
  const int levels = type == DataType::kInt8 ? 255 : 15;
  // int4 keeps its bias and scale in fp16: the codes are computed against
  // the values it keeps (past fp16's range they saturate at +-65504).
  const auto kept = [&](float v) {
    if (type == DataType::kInt8) return v;
    return fp16_to_fp32(fp32_to_fp16(std::clamp(v, -65504.0f, 65504.0f)));
  };
  const float bias = kept(lo);
  const double range = static_cast<double>(hi) - static_cast<double>(bias);
  const float scale = range > 0 ? kept(static_cast<float>(range / levels)) : 1.0f;
  const double inverse = scale > 0 ? 1.0 / static_cast<double>(scale) : 0.0;
  const auto code = [&](int d) {
    if (std::isnan(in[d])) return uint8_t{0};
    const double q = std::nearbyint((static_cast<double>(in[d]) - bias) * inverse);
    return static_cast<uint8_t>(std::clamp(q, 0.0, static_cast<double>(levels)));
  };
  if (type == DataType::kInt8) {
    for (int d = 0; d < dim; ++d) out[d] = code(d);
    std::memcpy(out + dim, &scale, 4);
    std::memcpy(out + dim + 4, &bias, 4);
    return;
  }
  const int bytes = (dim + 1) / 2;
  for (int b = 0; b < bytes; ++b) {  // byte b after reading elements 2b, 2b+1
    const uint8_t high = 2 * b + 1 < dim ? code(2 * b + 1) : uint8_t{0};
    out[b] = static_cast<uint8_t>(code(2 * b) | (high << 4));
  }
  const uint16_t s = fp32_to_fp16(scale), h = fp32_to_fp16(bias);
  std::memcpy(out + bytes, &s, 2);
  std::memcpy(out + bytes + 2, &h, 2);
}

void dequantize_row(DataType type, const uint8_t* in, int dim, float* out) {
  if (type == DataType::kInt8) {
    float scale, bias;
    std::memcpy(&scale, in + dim, 4);
    std::memcpy(&bias, in + dim + 4, 4);
    for (int d = 0; d < dim; ++d) out[d] = static_cast<float>(in[d]) * scale + bias;
    return;
  }
  const int bytes = (dim + 1) / 2;
  uint16_t s, b;
  std::memcpy(&s, in + bytes, 2);
  std::memcpy(&b, in + bytes + 2, 2);
  const float scale = fp16_to_fp32(s), bias = fp16_to_fp32(b);
  for (int d = 0; d < dim; ++d) {
    out[d] = static_cast<float>((in[d / 2] >> ((d & 1) * 4)) & 0xf) * scale + bias;
  }
}

void pack_rows(DataType type, const float* in, int64_t rows, int dim, void* out) {
  const int64_t stride = data_type_row_bytes(type, dim);
  ES_CHECK(static_cast<const void*>(in) != out || stride <= int64_t{4} * dim,
           "pack_rows: a {} row of {} values ({} bytes) is longer than its fp32 row: it cannot "
           "be packed in place",
           data_type_name(type), dim, stride);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * dim;
    uint8_t* to = static_cast<uint8_t*>(out) + r * stride;
    switch (type) {
      case DataType::kFp32:
        std::memcpy(to, row, static_cast<size_t>(dim) * 4);
        break;
      case DataType::kFp16:
      case DataType::kBf16:
        for (int d = 0; d < dim; ++d) {
          const uint16_t h = round_half(type, row[d], false, 0);
          std::memcpy(to + 2 * d, &h, 2);
        }
        break;
      case DataType::kInt8:
      case DataType::kInt4:
        quantize_row(type, row, dim, to);
        break;
    }
  }
}

void unpack_rows(DataType type, const void* in, int64_t rows, int dim, float* out) {
  const int64_t stride = data_type_row_bytes(type, dim);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* from = static_cast<const uint8_t*>(in) + r * stride;
    float* row = out + r * dim;
    switch (type) {
      case DataType::kFp32:
        std::memcpy(row, from, static_cast<size_t>(dim) * 4);
        break;
      case DataType::kFp16:
      case DataType::kBf16:
        for (int d = 0; d < dim; ++d) {
          uint16_t h;
          std::memcpy(&h, from + 2 * d, 2);
          row[d] = half_to_fp32(type, h);
        }
        break;
      case DataType::kInt8:
      case DataType::kInt4:
        dequantize_row(type, from, dim, row);
        break;
    }
  }
}

}  // namespace embshard
