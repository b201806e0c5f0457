// libtorch modules of the neural cost models and their conversion to and
// from the plain weights of neural_model.h. Included only by *_torch.cpp.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "embshard/cost/neural/model_file.h"

namespace embshard::torch_impl {

// Linear layers with ReLU after each hidden layer, and after the last when
// `relu_last`.
struct TorchMlpImpl : torch::nn::Module {
  TorchMlpImpl(const std::vector<int>& sizes, bool relu_last);
  torch::Tensor forward(torch::Tensor x);
  std::vector<torch::nn::Linear> layers;
  std::vector<bool> relu;
};
TORCH_MODULE(TorchMlp);

Mlp export_mlp(TorchMlp& module);
TorchMlp import_mlp(const Mlp& mlp);

// Rows of normalised features as a [n, features] float tensor.
torch::Tensor to_tensor(const std::vector<float>& rows, int features);

}  // namespace embshard::torch_impl
