// `embshard calibrate`: times a handful of probe shards on the real executor
// and fits the analytic model's coefficients by non-negative least squares
// (over analytic/terms.h's terms); fits the all-to-all constants from a
// `bench comm` file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/cost/analytic/calibration.h"

namespace embshard {

class Reporter;

struct CalibrateOptions {
  std::string out_path;  // required when a calibration is written (never the shipped one by default)
  std::string comm_path;  // a `bench comm` file to fit alpha/beta from ("" = defaults)
  int threads = 1;
  bool thread_cpu_time = false;  // ExecutorOptions::thread_cpu_time
  int64_t batch_size = 4096;
  bool quick = false;     // smaller probes and fewer repeats (tests)
  uint64_t seed = 1;
};

// Measures the probes, fits, and returns the calibration; the probes' figures
// go to `reporter`.
Calibration run_calibration(const CalibrateOptions& options, Reporter& reporter);
// Measures forward-only probes of fp16, bf16, int8 and int4 tables and fits
// each type's conversion cost (Calibration::fwd_convert_ns) into `c`, whose
// other coefficients it takes as they are (run_calibration calls it last).
void fit_conversions(const CalibrateOptions& options, Calibration& c, Reporter& reporter);
// Fits comm_latency_us / comm_gbps from a `bench comm` file into `c`.
void fit_comm_from_file(const std::string& path, Calibration& c, Reporter& reporter);
// Fits the collectives' constants (the backward's collective_latency_us,
// collective_gbps, allreduce_gbps; the forward's collective_fwd_latency_us,
// index_gbps, reduce_scatter_gbps) from `bench comm --collectives` files into
// `c`: to every file together, and to the files of each rank count and batch
// alone (collectives_by_ranks).
void fit_collectives_from_files(const std::vector<std::string>& paths, Calibration& c,
                                Reporter& reporter);

}  // namespace embshard
