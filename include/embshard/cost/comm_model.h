// Communication models: what the all-to-alls of a placement cost.
//
// Model parallelism sends every device's pooled embeddings to the devices that
// own the samples (forward) and their gradients back (backward). What a device
// pays depends on the dim sums of all devices and, forward, on how long it
// waits for the last device to finish its compute (the straggler effect).
#pragma once

#include <span>
#include <string>

namespace embshard {

class CommModel {
 public:
  virtual ~CommModel() = default;
  virtual std::string name() const = 0;
  // Per-device all-to-all ms. dim_sums[d]: sum of the dims placed on device d;
  // delays_ms[d]: how much later than the fastest device d starts its forward
  // all-to-all. Outputs have one entry per device.
  virtual void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
                       std::span<double> fwd_ms, std::span<double> bwd_ms) const = 0;
};

}  // namespace embshard
