// libtorch modules of the neural cost models, and libtorch's forward of a
// saved model: the reference that the torch-free fast path is tested and
// benchmarked against.
#include <cmath>

#include "embshard/cost/neural/reference.h"
#include "embshard/cost/neural/features.h"
#include "embshard/cost/neural/model.h"
#include "embshard/util/error.h"
#include "embshard/cost/neural/torch_common.h"

namespace embshard {
namespace torch_impl {

TorchMlpImpl::TorchMlpImpl(const std::vector<int>& sizes, bool relu_last) {
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    layers.push_back(
        register_module("fc" + std::to_string(i), torch::nn::Linear(sizes[i], sizes[i + 1])));
    relu.push_back(i + 2 < sizes.size() || relu_last);
  }
}

torch::Tensor TorchMlpImpl::forward(torch::Tensor x) {
  for (size_t i = 0; i < layers.size(); ++i) {
    x = layers[i]->forward(x);
    if (relu[i]) x = torch::relu(x);
  }
  return x;
}

Mlp export_mlp(TorchMlp& module) {
  Mlp mlp;
  for (size_t i = 0; i < module->layers.size(); ++i) {
    const torch::Tensor w = module->layers[i]->weight.detach().contiguous().to(torch::kFloat32);
    const torch::Tensor b = module->layers[i]->bias.detach().contiguous().to(torch::kFloat32);
    DenseLayer layer;
    layer.out = static_cast<int>(w.size(0));
    layer.in = static_cast<int>(w.size(1));
    layer.relu = module->relu[i];
    layer.weight.assign(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
    layer.bias.assign(b.data_ptr<float>(), b.data_ptr<float>() + b.numel());
    mlp.layers.push_back(std::move(layer));
  }
  return mlp;
}

TorchMlp import_mlp(const Mlp& mlp) {
  TorchMlp module(mlp.sizes(), !mlp.layers.empty() && mlp.layers.back().relu);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < mlp.layers.size(); ++i) {
    const DenseLayer& l = mlp.layers[i];
    ES_CHECK(module->relu[i] == l.relu,
             "import_mlp: layer {} has ReLU {} where the structure "
             "allows only the last layer to differ",
             i, l.relu);
    std::vector<float> w = l.weight, b = l.bias;  // from_blob needs non-const storage
    module->layers[i]->weight.copy_(torch::from_blob(w.data(), {l.out, l.in}));
    module->layers[i]->bias.copy_(torch::from_blob(b.data(), {l.out}));
  }
  module->eval();
  return module;
}

torch::Tensor to_tensor(const std::vector<float>& rows, int features) {
  const int64_t n = static_cast<int64_t>(rows.size()) / features;
  return torch::from_blob(const_cast<float*>(rows.data()), {n, features}).clone();
}

}  // namespace torch_impl

using namespace torch_impl;

struct TorchComputeReference::Impl {
  NeuralModel model;
  TorchMlp table{nullptr}, head{nullptr};
  std::vector<float> rows;  // normalised features of the added tables
  torch::Tensor features;   // the same as a tensor, rebuilt lazily
  int num_features = 0;
};

TorchComputeReference::TorchComputeReference(const NeuralModel& model)
    : impl_(std::make_unique<Impl>()) {
  impl_->model = model;
  impl_->table = import_mlp(model.compute.table);
  impl_->head = import_mlp(model.compute.head);
  impl_->num_features = impl_->model.compute.inputs().size();
}

TorchComputeReference::~TorchComputeReference() = default;

int64_t TorchComputeReference::batch_size() const { return impl_->model.batch_size; }

int TorchComputeReference::add_table(const TableFeatures& table) {
  const size_t at = impl_->rows.size();
  impl_->rows.resize(at + impl_->num_features);
  compute_raw_features(table, impl_->model.batch_size, impl_->rows.data() + at,  // its smallest
                       impl_->model.compute.inputs());
  impl_->model.compute.features.apply(impl_->rows.data() + at);
  impl_->features = to_tensor(impl_->rows, impl_->num_features);
  return static_cast<int>(at / impl_->num_features);
}

double TorchComputeReference::compute_ms(std::span<const int> table_ids) const {
  if (table_ids.empty()) return 0.0;
  torch::NoGradGuard no_grad;
  std::vector<int64_t> ids(table_ids.begin(), table_ids.end());
  const torch::Tensor x = impl_->features.index_select(
      0, torch::from_blob(ids.data(), {static_cast<int64_t>(ids.size())}, torch::kInt64));
  const torch::Tensor pooled =
      impl_->table->forward(x).clamp(-kTableLogClamp, kTableLogClamp).exp().sum(0, true).log();
  const double y = impl_->head->forward(pooled).item<float>();
  const ComputeNet& net = impl_->model.compute;
  return output_to_ms(y, net.target_mean, net.target_std, "compute (torch)");
}

void torch_comm_ms(const NeuralModel& model, std::span<const double> dim_sums,
                   std::span<const double> delays_ms, std::span<double> fwd_ms,
                   std::span<double> bwd_ms) {
  ES_CHECK(model.has_comm, "torch_comm_ms: the model has no communication networks");
  torch::NoGradGuard no_grad;
  TorchMlp fwd = import_mlp(model.comm_fwd.mlp), bwd = import_mlp(model.comm_bwd.mlp);
  const int nf = static_cast<int>(comm_fwd_feature_names().size());
  const int nb = static_cast<int>(comm_bwd_feature_names().size());
  const std::vector<double> seen = comm_network_delays(model, delays_ms);
  for (size_t d = 0; d < dim_sums.size(); ++d) {
    std::vector<float> x(nf), xb(nb);
    comm_raw_features(dim_sums, seen, static_cast<int>(d), model.comm_batch_size, x.data());
    std::copy(x.begin(), x.begin() + nb, xb.begin());
    model.comm_fwd.features.apply(x.data());
    model.comm_bwd.features.apply(xb.data());
    fwd_ms[d] = comm_wait_ms(delays_ms, d) +
                output_to_ms(fwd->forward(to_tensor(x, nf)).item<float>(),
                             model.comm_fwd.target_mean, model.comm_fwd.target_std, "comm fwd");
    bwd_ms[d] = output_to_ms(bwd->forward(to_tensor(xb, nb)).item<float>(),
                             model.comm_bwd.target_mean, model.comm_bwd.target_std, "comm bwd");
  }
}

}  // namespace embshard
