// Per-table data types (TorchRec's names, lower case): what a table's weights
// are stored as, and so its bytes per row.
//
//   fp32, fp16, bf16: one value per element; trained (fp32 accumulation, fp32
//                     optimizer state).
//   int8:             one byte per element, then an fp32 scale and bias per
//                     row (8 bytes); forward only (inference).
//   int4:             two elements per byte (low nibble first), then an fp16
//                     scale and bias per row (4 bytes); forward only.
//
// A quantized row holds round((x - bias) / scale) with scale = (max - min) /
// (2^bits - 1) and bias = min over the row, and reads back q * scale + bias.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embshard {

enum class DataType : uint8_t { kFp32, kFp16, kBf16, kInt8, kInt4 };

// "fp32", "fp16", "bf16", "int8", "int4" (the order of DataType).
const std::vector<std::string>& data_type_names();
const std::string& data_type_name(DataType type);
// Accepts the names above in any case, and TorchRec's DataType names
// ("FP16", "DataType.FP16"). Error naming `where`, the value and the valid
// names otherwise (int2 and the like are refused by name).
DataType parse_data_type(const std::string& name, const std::string& where);

// Whether a table of this type can be trained (has a backward and update).
inline bool data_type_trains(DataType type) { return type <= DataType::kBf16; }

// The bytes of one stored row of `cols` elements, its row-wise scale and
// bias included.
inline int64_t data_type_row_bytes(DataType type, int64_t cols) {
  switch (type) {
    case DataType::kFp32:
      return cols * 4;
    case DataType::kFp16:
    case DataType::kBf16:
      return cols * 2;
    case DataType::kInt8:
      return cols + 8;
    case DataType::kInt4:
      return (cols + 1) / 2 + 4;
  }
  return cols * 4;
}

}  // namespace embshard
