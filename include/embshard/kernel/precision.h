// Conversions between fp32 and the stored data types (workload/data_type.h),
// shared by the optimized and the reference kernels so that both round alike.
//
// fp16 and bf16 round to nearest, ties to even (as the F16C and AVX-512 BF16
// instructions do); NaN stays NaN, overflow becomes infinity. Stochastic
// rounding picks the neighbour above or below |x| with a probability
// proportional to closeness, from a 32-bit random number the caller derives
// from (seed, step, table, row, column) with rounding_random(), so that every
// kernel draws the same number for the same element.
//
// Quantized rows (int8, int4) are laid out as data_type.h says: the codes,
// then the row's scale and bias (fp32 for int8, fp16 for int4). The range is
// that of the row's finite values; NaN takes code 0, infinities the ends.
#pragma once

#include <cstdint>
#include <cstring>

#include "embshard/workload/data_type.h"

namespace embshard {

uint16_t fp32_to_fp16(float x);
float fp16_to_fp32(uint16_t h);

inline uint16_t fp32_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>(bits >> 16);
}

inline float bf16_to_fp32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// fp16 or bf16 (`type`) bits of x, rounded to nearest even or, with
// `stochastic`, stochastically with `random` (uniform 32 bits).
uint16_t round_half(DataType type, float x, bool stochastic, uint32_t random);
inline float half_to_fp32(DataType type, uint16_t h) {
  return type == DataType::kBf16 ? bf16_to_fp32(h) : fp16_to_fp32(h);
}

// `n` halves (fp16 or bf16) to fp32, and fp32 to halves rounded to nearest
// even: the same values as the scalar functions above, eight at a time with
// F16C where the build has it (the optimized kernels' row loads and stores).
void widen_halves(DataType type, const uint16_t* in, int n, float* out);
void narrow_halves(DataType type, const float* in, int n, uint16_t* out);

// The random bits stochastic rounding uses for one element of one update.
uint32_t rounding_random(uint64_t seed, int64_t step, int table, int64_t row, int column);

// One row of `dim` fp32 values quantized into `out` (data_type_row_bytes(type,
// dim) bytes), and read back. `type` is int8 or int4.
void quantize_row(DataType type, const float* in, int dim, uint8_t* out);
void dequantize_row(DataType type, const uint8_t* in, int dim, float* out);

// `rows` rows of fp32 values stored as `type` into `out`
// (rows x data_type_row_bytes(type, dim) bytes), and back. pack_rows may
// write over its input (`out` == `in`) where a stored row is no longer than
// its fp32 row (every type but int8 of dim <= 2 and int4 of dim 1; Error
// otherwise): each byte is written after the values it covers are read.
void pack_rows(DataType type, const float* in, int64_t rows, int dim, void* out);
void unpack_rows(DataType type, const void* in, int64_t rows, int dim, float* out);

}  // namespace embshard
