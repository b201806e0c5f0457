// Memory on 2 MiB-aligned transparent huge pages where the kernel allows.
//
// Random row gathers over GiBs of embedding weights otherwise miss the TLB on
// nearly every lookup, which production embedding stores avoid; and whether a
// plain allocation happens to get huge pages varies from run to run, which
// shows up as noise in measured costs. Every measurement in embshard puts
// weights (and the buffers the executor streams through) here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace embshard {

class HugeBuffer {
 public:
  explicit HugeBuffer(int64_t bytes);
  ~HugeBuffer();
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  char* data() { return data_; }
  float* floats() { return reinterpret_cast<float*>(data_); }
  size_t size_bytes() const { return bytes_; }

 private:
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace embshard
