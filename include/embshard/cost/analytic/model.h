// The analytic cost model: calibrated bandwidths and overheads, no training
// data (analytic/terms.h has the formulae).
#pragma once

#include <cstdint>
#include <memory>

#include "embshard/cost/analytic/calibration.h"
#include "embshard/cost/cost_model.h"

namespace embshard {

// The models from a calibration already in memory (batch 0: the
// calibration's batch). create_compute_model("analytic", ...) loads the file.
// `forward_only`: the forward's terms alone (inference steps).
std::shared_ptr<ComputeModel> make_analytic_compute_model(const Calibration& c, int64_t batch_size,
                                                          bool forward_only = false);
std::shared_ptr<const CommModel> make_analytic_comm_model(const Calibration& c,
                                                          int64_t batch_size);
CostModel make_analytic_cost_model(const Calibration& c, int64_t batch_size,
                                   bool forward_only = false);
// `comm` with every backward zero: an inference step's exchanges.
std::shared_ptr<const CommModel> forward_comm_model(std::shared_ptr<const CommModel> comm);
// Where a calibration's all-to-all constants come from, for ModelSource::comm.
std::string analytic_comm_source(const Calibration& c);
// A calibration's bandwidths for physical floors: memory twice its memcpy
// (bytes read plus written; 0 where it measured none), the link its all-to-all
// bandwidth. A neural set's memory figure is its manifest's instead.
Bandwidths calibration_bandwidths(const Calibration& c);

}  // namespace embshard
