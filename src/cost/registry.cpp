// The one registry of cost models: created by name, never by static
// initialisation, so that the list below is the whole truth.
#include <fmt/ranges.h>

#include "embshard/cost/cost_model.h"
#include "embshard/util/error.h"

namespace embshard {

TableFeatures table_features(const TableSpec& spec, int dim) {
  ES_CHECK(dim > 0, "table_features: table '{}' at dim {}, must be positive", spec.name, dim);
  TableFeatures f;
  f.rows = spec.rows;
  f.dim = dim;
  f.pooling_factor = spec.pooling_factor;
  f.row_reuse = spec.row_reuse;
  f.lookup_reuse = spec.lookup_reuse;
  return f;
}

void CostModel::add_to_state(int, std::span<double>) const {
  ES_THROW("cost model '{}' has no incremental state (state_size() is 0)", name());
}

double CostModel::state_ms(std::span<const double>) const {
  ES_THROW("cost model '{}' has no incremental state (state_size() is 0)", name());
}

const std::vector<std::string>& cost_model_names() {
  static const std::vector<std::string> names = {"analytic", "neural", "measured"};
  return names;
}

std::string shipped_models_dir() { return EMBSHARD_MODELS_DIR; }

std::unique_ptr<CostModel> create_cost_model(const std::string& name,
                                             const CostModelOptions& options) {
  CostModelOptions o = options;
  if (o.model_dir.empty()) o.model_dir = shipped_models_dir() + "/neural";
  if (o.calibration.empty()) o.calibration = shipped_models_dir() + "/analytic.json";
  if (name == "analytic") return make_analytic_cost_model(o);
  if (name == "neural") return make_neural_cost_model(o);
  if (name == "measured") return make_measured_cost_model(o);
  ES_THROW("unknown cost model '{}': valid names are {}", name,
           fmt::join(cost_model_names(), ", "));
}

}  // namespace embshard
