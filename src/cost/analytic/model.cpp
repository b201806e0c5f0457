// The analytic cost model: calibrated bandwidths and overheads, no training data.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/cost/analytic/model.h"
#include "embshard/cost/analytic/terms.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

class AnalyticComputeModel : public ComputeModel {
 public:
  AnalyticComputeModel(Calibration c, int64_t batch_size, bool forward_only)
      : c_(std::move(c)), batch_size_(batch_size), forward_only_(forward_only) {}

  std::string name() const override { return forward_only_ ? "analytic forward" : "analytic"; }
  int64_t batch_size() const override { return batch_size_; }

  int add_table(const TableFeatures& table) override {
    // Lookups scale with the batch (pooling factor is per sample); the share of
    // distinct rows per lookup is taken from the histograms as is (see
    // estimate_distinct_rows).
    AnalyticSums one;
    one.add(analytic_table(table, batch_size_), batch_size_);
    tables_.push_back(one);
    return static_cast<int>(tables_.size()) - 1;
  }

  double compute_ms(std::span<const int> table_ids) const override {
    if (table_ids.empty()) return 0.0;
    double state[kAnalyticSums] = {};
    for (int id : table_ids) add_to_state(id, state);
    return state_ms(state);
  }

  size_t state_size() const override { return kAnalyticSums; }

  void add_to_state(int table_id, std::span<double> state) const override {
    ES_CHECK(table_id >= 0 && table_id < static_cast<int>(tables_.size()),
             "analytic model: table id {} is not registered ({} tables)", table_id,
             tables_.size());
    double one[kAnalyticSums];
    std::memcpy(one, &tables_[table_id], sizeof one);
    for (size_t i = 0; i < kAnalyticSums; ++i) state[i] += one[i];
  }

  double state_ms(std::span<const double> state) const override {
    AnalyticSums sums;
    std::memcpy(static_cast<void*>(&sums), state.data(), sizeof sums);  // only doubles
    if (sums.tables == 0) return 0.0;
    const AnalyticTerms terms = analytic_terms(sums, c_.cache_bytes);
    const double ms =
        analytic_fwd_ms(terms, c_) + (forward_only_ ? 0.0 : analytic_bwd_ms(terms, c_));
    // Never hand the planner a NaN or inf (inputs are checked, so this is a bug).
    ES_CHECK(std::isfinite(ms) && ms >= 0, "analytic model: predicted {} ms", ms);
    return ms;
  }

 private:
  Calibration c_;
  int64_t batch_size_;
  bool forward_only_;
  std::vector<AnalyticSums> tables_;  // each table's share of a shard's sums
};

class AnalyticCommModel : public CommModel {
 public:
  AnalyticCommModel(Calibration c, int64_t batch_size)
      : c_(std::move(c)), batch_size_(batch_size) {}
  std::string name() const override { return "analytic"; }
  void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
               std::span<double> fwd_ms, std::span<double> bwd_ms) const override {
    analytic_comm_ms(c_, batch_size_, dim_sums, delays_ms, fwd_ms, bwd_ms);
  }
  void collective_ms(const CollectiveLoad& load, std::span<double> fwd_ms,
                     std::span<double> bwd_ms) const override {
    analytic_collective_ms(c_, batch_size_, load, fwd_ms, bwd_ms);
  }
  double floor_ms(double total_dims, int devices) const override {
    return analytic_comm_floor_ms(c_, batch_size_, total_dims, devices);
  }

 private:
  Calibration c_;
  int64_t batch_size_;
};

class ForwardCommModel : public CommModel {
 public:
  explicit ForwardCommModel(std::shared_ptr<const CommModel> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name() + ", forward"; }
  void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
               std::span<double> fwd_ms, std::span<double> bwd_ms) const override {
    inner_->comm_ms(dim_sums, delays_ms, fwd_ms, bwd_ms);
    std::fill(bwd_ms.begin(), bwd_ms.end(), 0.0);
  }
  void collective_ms(const CollectiveLoad& load, std::span<double> fwd_ms,
                     std::span<double> bwd_ms) const override {
    std::vector<double> unused(bwd_ms.size());  // collective_ms adds: bwd_ms stays as it is
    inner_->collective_ms(load, fwd_ms, unused);
  }
  // The inner floor bounds forward + backward, not the forward alone: none.
  bool forward_only() const override { return true; }

 private:
  std::shared_ptr<const CommModel> inner_;
};

}  // namespace

std::shared_ptr<ComputeModel> make_analytic_compute_model(const Calibration& c, int64_t batch_size,
                                                          bool forward_only) {
  return std::make_shared<AnalyticComputeModel>(c, batch_size > 0 ? batch_size : c.batch_size,
                                                forward_only);
}

std::shared_ptr<const CommModel> forward_comm_model(std::shared_ptr<const CommModel> comm) {
  return std::make_shared<ForwardCommModel>(std::move(comm));
}

std::shared_ptr<const CommModel> make_analytic_comm_model(const Calibration& c,
                                                          int64_t batch_size) {
  return std::make_shared<AnalyticCommModel>(c, batch_size > 0 ? batch_size : c.batch_size);
}

std::string analytic_comm_source(const Calibration& c) {
  std::string collectives;
  if (!c.collective_source.empty()) {
    collectives = fmt::format("; collectives {:.0f} us + bytes / {:.1f} GB/s, all-reduce bytes / "
                              "{:.1f} GB/s",
                              c.collective_latency_us, c.collective_gbps, c.allreduce_gbps);
    if (c.collective_fwd_latency_us > 0 || c.index_gbps > 0 || c.reduce_scatter_gbps > 0) {
      collectives += fmt::format(", forward {:.0f} us + bytes / {:.1f} GB/s (index), {:.1f} GB/s "
                                 "(reduce-scatter)",
                                 c.collective_fwd_latency_us, c.index_gbps, c.reduce_scatter_gbps);
    }
    collectives += ", fitted to bench comm --collectives";
    std::vector<std::string> own;
    for (const auto& r : c.collectives_by_ranks) own.push_back(fmt::format("{}x{}", r.ranks, r.batch_size));
    if (!own.empty()) {
      collectives += fmt::format(" (own fits at ranks x batch {})", fmt::join(own, ", "));
    }
  }
  if (c.comm_source == "default") return "analytic, default constants (not measured)" + collectives;
  return fmt::format("analytic, {:.0f} us + bytes / {:.1f} GB/s from {}{}", c.comm_latency_us,
                     c.comm_gbps, std::filesystem::path(c.comm_source).filename().string(),
                     collectives);
}

Bandwidths calibration_bandwidths(const Calibration& c) {
  Bandwidths b;
  if (c.seq_gbps > 0 && c.seq_gbps < kUnboundedGbps) {
    b.memory_gbps = 2 * c.seq_gbps;
    b.memory_source =
        fmt::format("2 x the memcpy of {} GB/s embshard calibrate measured on {}", c.seq_gbps,
                    c.machine_cpu.empty() ? "its machine" : c.machine_cpu);
  }
  if (c.comm_gbps > 0 && c.comm_gbps < kUnboundedGbps) {
    b.link_gbps = c.comm_gbps;
    b.link_source = c.comm_source == "default"
                        ? std::string("the default all-to-all constants")
                        : fmt::format("the all-to-all bandwidth from {}",
                                      std::filesystem::path(c.comm_source).filename().string());
  }
  return b;
}

CostModel make_analytic_cost_model(const Calibration& c, int64_t batch_size, bool forward_only) {
  ModelSource source;
  source.hardware = fmt::format("{} on {}, analytic terms fitted", c.executor, c.machine_cpu);
  source.host_cpu = c.machine_cpu;
  source.min_batch = source.max_batch = c.batch_size;
  source.comm = analytic_comm_source(c);
  source.bandwidths = calibration_bandwidths(c);
  if (forward_only) {
    return {make_analytic_compute_model(c, batch_size, true),
            forward_comm_model(make_analytic_comm_model(c, batch_size)), "analytic, forward",
            source};
  }
  return {make_analytic_compute_model(c, batch_size), make_analytic_comm_model(c, batch_size),
          "analytic", source};
}

}  // namespace embshard
