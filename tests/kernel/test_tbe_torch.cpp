// The TBE kernels (optimized and reference) against libtorch: embedding_bag
// forward, autograd backward, and the optimizer step written with tensor ops
// on the dense gradient (only rows that occur in the batch are updated).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "embshard/kernel/tbe.h"
#include "kernel/tbe_test_util.h"

namespace embshard {
namespace {

using testing::make_problem;
using testing::Problem;
using testing::TableShape;

torch::Tensor to_tensor(const std::vector<float>& v, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32).clone();
}

torch::Tensor to_tensor(const std::vector<int64_t>& v) {
  return torch::from_blob(const_cast<int64_t*>(v.data()), {static_cast<int64_t>(v.size())},
                          torch::kInt64)
      .clone();
}

void expect_allclose(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const bool close = torch::allclose(got, want, /*rtol=*/1e-4, /*atol=*/1e-5);
  EXPECT_TRUE(close) << what << ": max abs diff "
                     << (got - want).abs().max().item<float>();
}

struct TorchResult {
  torch::Tensor output;
  std::vector<torch::Tensor> weights, momentum;  // after one optimizer step
};

// libtorch's answer: forward, autograd backward, optimizer step by hand.
TorchResult torch_step(const Problem& p, const OptimizerConfig& opt) {
  TorchResult r;
  std::vector<torch::Tensor> params, parts;
  const int64_t mode = p.pooling == PoolingMode::kMean ? 1 : 0;
  for (size_t t = 0; t < p.shapes.size(); ++t) {
    const TableShape& s = p.shapes[t];
    torch::Tensor w = to_tensor(p.weights[t], {s.rows, s.dim}).requires_grad_(true);
    torch::Tensor psw;
    if (s.weighted) {
      psw = to_tensor(p.per_sample_weights[t], {static_cast<int64_t>(p.indices[t].size())});
    }
    parts.push_back(std::get<0>(torch::embedding_bag(w, to_tensor(p.indices[t]),
                                                     to_tensor(p.offsets[t]), false, mode,
                                                     /*sparse=*/false, psw, true)));
    params.push_back(w);
  }
  r.output = torch::cat(parts, 1);
  r.output.backward(to_tensor(p.grad_output, {p.batch_size, r.output.size(1)}));
  torch::NoGradGuard no_grad;
  for (size_t t = 0; t < p.shapes.size(); ++t) {
    const torch::Tensor w = params[t].detach(), g = params[t].grad();
    const torch::Tensor m = to_tensor(p.momentum[t], {p.shapes[t].rows});
    if (opt.type == OptimizerType::kSgd) {
      r.weights.push_back(w - opt.learning_rate * g);
      r.momentum.push_back(m);
      continue;
    }
    const torch::Tensor touched =
        torch::bincount(to_tensor(p.indices[t]), {}, p.shapes[t].rows) > 0;
    const torch::Tensor m_new = torch::where(touched, m + g.pow(2).mean(1), m);
    const torch::Tensor step = opt.learning_rate / (m_new.sqrt() + opt.eps);
    r.weights.push_back(torch::where(touched.unsqueeze(1), w - step.unsqueeze(1) * g, w));
    r.momentum.push_back(m_new);
  }
  return r;
}

void check_against_torch(const Problem& p, const OptimizerConfig& opt, const std::string& what) {
  const TorchResult want = torch_step(p, opt);
  const int64_t total_dim = want.output.size(1);
  for (int impl = 0; impl < 3; ++impl) {  // reference, optimized x1, optimized x2
    const std::string name = what + (impl == 0 ? " ref" : " threads " + std::to_string(impl));
    Problem::State state = p.initial_state();
    const FusedBatch batch = p.batch(state);
    std::vector<float> out(p.batch_size * total_dim);
    TbeWorkspace ws;
    const Status fs = impl == 0 ? tbe_forward_ref(batch, out.data())
                                : tbe_forward(batch, out.data(), impl);
    ASSERT_TRUE(fs.ok()) << fs.message();
    expect_allclose(to_tensor(out, {p.batch_size, total_dim}), want.output, name + " forward");
    const Status bs = impl == 0
                          ? tbe_backward_update_ref(batch, p.grad_output.data(), opt)
                          : tbe_backward_update(batch, p.grad_output.data(), opt, impl, ws);
    ASSERT_TRUE(bs.ok()) << bs.message();
    for (size_t t = 0; t < p.shapes.size(); ++t) {
      const std::string tn = name + " table " + std::to_string(t);
      expect_allclose(to_tensor(state.weights[t], {p.shapes[t].rows, p.shapes[t].dim}),
                      want.weights[t], tn + " weights");
      expect_allclose(to_tensor(state.momentum[t], {p.shapes[t].rows}), want.momentum[t],
                      tn + " momentum");
    }
  }
}

std::vector<TableShape> shapes(bool weighted) {
  return {TableShape{1, 3, 4, false, 0.3},          TableShape{500, 64, 20, weighted, 0.05},
          TableShape{20000, 16, 12, false, 0.2},    TableShape{7, 129, 6, weighted, 0.5},
          TableShape{3000, 128, 30, weighted, 0.0}, TableShape{40, 1024, 3, false, 0.1},
          TableShape{800, 17, 5, weighted, 0.1}};
}

TEST(TbeTorch, SumPoolingMatchesLibtorch) {
  for (bool weighted : {false, true}) {
    const Problem p = make_problem(shapes(weighted), 96, PoolingMode::kSum, weighted ? 21 : 22);
    for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kRowWiseAdagrad}) {
      const OptimizerConfig opt{type, 0.05f, 1e-8f};
      check_against_torch(p, opt, std::string(weighted ? "weighted " : "") +
                                      (type == OptimizerType::kSgd ? "sgd" : "adagrad"));
    }
  }
}

TEST(TbeTorch, MeanPoolingMatchesLibtorch) {
  const Problem p = make_problem(shapes(false), 96, PoolingMode::kMean, 23);
  for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kRowWiseAdagrad}) {
    const OptimizerConfig opt{type, 0.05f, 1e-8f};
    check_against_torch(p, opt, type == OptimizerType::kSgd ? "mean sgd" : "mean adagrad");
  }
}

}  // namespace
}  // namespace embshard
