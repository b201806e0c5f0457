#include "embshard/util/huge_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "embshard/util/error.h"

namespace embshard {

HugeBuffer::HugeBuffer(int64_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  bytes_ = (static_cast<size_t>(std::max<int64_t>(bytes, 1)) + kHuge - 1) / kHuge * kHuge;
  data_ = static_cast<char*>(std::aligned_alloc(kHuge, bytes_));
  ES_CHECK(data_ != nullptr, "cannot allocate {} bytes", bytes_);
  ::madvise(data_, bytes_, MADV_HUGEPAGE);  // advisory: failure only costs speed
}

HugeBuffer::~HugeBuffer() { std::free(data_); }

}  // namespace embshard
