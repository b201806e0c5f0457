// Training the neural cost models with libtorch.
//
// Targets are log milliseconds, standardised: an error on logs is a relative
// error, which is what MAPE and the planner's comparisons care about. The loss
// is Huber (squared near 0, absolute beyond kHuberDelta): timings on a shared
// machine have heavy upper tails (a run preempted by another process), which
// a squared loss would chase.
// Determinism: torch::manual_seed before any module is built, one intra-op
// thread by default, and minibatch orders from a seeded std::mt19937_64.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "embshard/cost/neural/train.h"
#include "embshard/cost/neural/features.h"
#include "embshard/cost/neural/fit.h"
#include "embshard/cost/neural/model.h"
#include "embshard/util/reporter.h"
#include "embshard/util/error.h"
#include "embshard/util/machine.h"
#include "embshard/cost/neural/torch_common.h"

namespace embshard {
namespace {

using namespace torch_impl;
using nlohmann::json;

constexpr double kHuberDelta = 0.1;  // in standardised log ms
constexpr double kFineTuneLearningRate = 1e-3;  // Adam's, for fit --fine-tune

torch::Tensor robust_loss(const torch::Tensor& predicted, const torch::Tensor& target) {
  return torch::huber_loss(predicted, target, at::Reduction::Mean, kHuberDelta);
}

// Mean and 1/std per feature over the rows (std floored: constant features stay
// finite), clamped at kFeatureClamp.
Normaliser fit_normaliser(const std::vector<float>& rows, int features) {
  Normaliser n;
  n.clamp = kFeatureClamp;
  n.mean.assign(features, 0.0f);
  n.scale.assign(features, 1.0f);
  const size_t count = rows.size() / features;
  for (int f = 0; f < features; ++f) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < count; ++i) sum += rows[i * features + f];
    const double mean = count ? sum / count : 0;
    for (size_t i = 0; i < count; ++i) sq += std::pow(rows[i * features + f] - mean, 2);
    const double std = count ? std::sqrt(sq / count) : 1;
    n.mean[f] = static_cast<float>(mean);
    n.scale[f] = static_cast<float>(std > 1e-6 ? 1.0 / std : 1.0);
  }
  return n;
}

std::pair<double, double> fit_target(const std::vector<double>& log_ms) {
  double mean = std::accumulate(log_ms.begin(), log_ms.end(), 0.0) / log_ms.size(), sq = 0;
  for (double v : log_ms) sq += (v - mean) * (v - mean);
  const double std = std::sqrt(sq / log_ms.size());
  return {mean, std > 1e-6 ? std : 1.0};
}

// The generic loop: minibatches of item indexes, Adam, early stopping on
// the validation loss with the best parameters restored at the end.
struct Fit {
  std::function<torch::Tensor(const std::vector<int>&)> loss;  // mean loss of a batch
  std::vector<torch::Tensor> parameters;
  std::vector<int> train, val;
};

struct FitOutcome {
  int epochs = 0, best_epoch = 0;
  double best_val_loss = 0;
};

// Copies `from` into `to`, tensor by tensor.
void copy_all(std::vector<torch::Tensor>& to, const std::vector<torch::Tensor>& from) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.detach().clone());
  return out;
}

FitOutcome fit(Fit& job, const TrainOptions& o, const std::string& what, uint64_t seed) {
  Reporter& reporter = o.reporter != nullptr ? *o.reporter : silent_reporter();
  torch::optim::Adam optimizer(job.parameters,
                               torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay));
  std::mt19937_64 rng(seed);
  std::vector<torch::Tensor> best = clones(job.parameters);
  // The weights' moving average (Polyak averaging): with noisy targets the
  // last steps' weights scatter around the minimum, and their average sits
  // nearer it. The average is what is validated, kept and shipped.
  const bool averaging = o.weight_average > 0;
  std::vector<torch::Tensor> average, current;
  if (averaging) {
    average = clones(job.parameters);
    current = clones(job.parameters);
  }
  int64_t steps = 0;
  FitOutcome r;
  r.best_val_loss = INFINITY;
  std::vector<int> order = job.train;
  auto last_print = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= o.max_epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double train_loss = 0;
    for (size_t at = 0; at < order.size(); at += o.batch) {
      const std::vector<int> batch(order.begin() + at,
                                   order.begin() + std::min(order.size(), at + o.batch));
      optimizer.zero_grad();
      torch::Tensor loss = job.loss(batch);
      loss.backward();
      optimizer.step();
      train_loss += loss.item<double>() * batch.size();
      if (averaging) {
        // Warm start: early on the average spans the steps taken so far.
        ++steps;
        const double decay = std::min(o.weight_average, (1.0 + steps) / (10.0 + steps));
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < average.size(); ++i) {
          average[i].mul_(decay).add_(job.parameters[i].detach(), 1 - decay);
        }
      }
    }
    train_loss /= order.size();
    double val_loss;
    {
      torch::NoGradGuard no_grad;
      if (averaging) {
        copy_all(current, job.parameters);
        copy_all(job.parameters, average);
      }
      val_loss = job.loss(job.val).item<double>();
    }
    r.epochs = epoch;
    const bool better = val_loss < r.best_val_loss;
    if (better) {
      r.best_val_loss = val_loss;
      r.best_epoch = epoch;
      copy_all(best, job.parameters);
    }
    if (averaging) copy_all(job.parameters, current);
    const auto now = std::chrono::steady_clock::now();
    if (epoch == 1 || now - last_print > std::chrono::seconds(2)) {
      reporter.note(fmt::format(
          "train {}: epoch {}: train loss {:.5f}, val loss {:.5f} (best {:.5f} at epoch {})",
          what, epoch, train_loss, val_loss, r.best_val_loss, r.best_epoch));
      last_print = now;
    }
    if (epoch - r.best_epoch >= o.patience) break;
  }
  copy_all(job.parameters, best);
  reporter.note(fmt::format("train {}: stopped after {} epochs; best val loss {:.5f} at epoch {}",
                            what, r.epochs, r.best_val_loss, r.best_epoch));
  return r;
}

std::vector<torch::Tensor> all_parameters(std::initializer_list<torch::nn::Module*> modules) {
  std::vector<torch::Tensor> out;
  for (auto* m : modules) {
    for (auto& p : m->parameters()) out.push_back(p);
  }
  return out;
}

// ---- compute ----

struct ComputeTensors {
  torch::Tensor rows;          // [tables of all records, features], normalised
  std::vector<int64_t> first;  // per record: its first row; first[r+1] ends it
  torch::Tensor target;        // [records], standardised log ms
};

ComputeTensors compute_tensors(const ComputeData& data, ComputeNet& net, const ComputeSplit& s) {
  const int nf = net.inputs().size();
  std::vector<float> rows, train_rows;
  std::vector<int64_t> first = {0};
  std::vector<float> x(nf);
  std::vector<char> in_train(data.records.size(), 0);
  for (int i : s.train) in_train[i] = 1;
  std::vector<double> train_log_ms;
  for (size_t r = 0; r < data.records.size(); ++r) {
    for (const TableFeatures& t : data.records[r].tables) {
      compute_raw_features(t, data.records[r].batch, x.data(), net.inputs());
      rows.insert(rows.end(), x.begin(), x.end());
      if (in_train[r]) train_rows.insert(train_rows.end(), x.begin(), x.end());
    }
    first.push_back(static_cast<int64_t>(rows.size() / nf));
    if (in_train[r]) train_log_ms.push_back(std::log(data.records[r].ms));
  }
  net.features = fit_normaliser(train_rows, nf);
  std::tie(net.target_mean, net.target_std) = fit_target(train_log_ms);
  for (size_t i = 0; i < rows.size(); i += nf) net.features.apply(rows.data() + i);
  std::vector<float> target;
  for (const ComputeRecord& r : data.records) {
    target.push_back(static_cast<float>((std::log(r.ms) - net.target_mean) / net.target_std));
  }
  return {to_tensor(rows, nf), first, torch::tensor(target)};
}

torch::Tensor compute_forward(TorchMlp& table, TorchMlp& head, const ComputeTensors& t,
                              const std::vector<int>& records) {
  std::vector<int64_t> idx, seg;
  for (size_t b = 0; b < records.size(); ++b) {
    for (int64_t row = t.first[records[b]]; row < t.first[records[b] + 1]; ++row) {
      idx.push_back(row);
      seg.push_back(static_cast<int64_t>(b));
    }
  }
  const torch::Tensor emb = table->forward(t.rows.index_select(0, torch::tensor(idx)))
                                .clamp(-kTableLogClamp, kTableLogClamp)
                                .exp();
  const torch::Tensor sums = torch::zeros({static_cast<int64_t>(records.size()), emb.size(1)})
                                 .index_add(0, torch::tensor(seg), emb);
  return head->forward(torch::log(sums)).squeeze(1);
}

FitOutcome train_compute(const ComputeData& data, const ComputeSplit& split,
                         const TrainOptions& o, ComputeNet& net) {
  net.reuse_tail_bin = o.reuse_tail_bin;
  net.data_type_feature = true;
  const ComputeTensors t = compute_tensors(data, net, split);
  const int nf = net.inputs().size();
  TorchMlp table(std::vector<int>{nf, o.hidden, o.hidden, o.embed}, /*relu_last=*/false);
  TorchMlp head(std::vector<int>{o.embed, o.hidden, o.hidden, 1}, /*relu_last=*/false);
  Fit job;
  job.parameters = all_parameters({table.ptr().get(), head.ptr().get()});
  job.train = split.train;
  job.val = split.val;
  job.loss = [&](const std::vector<int>& records) {
    std::vector<int64_t> ids(records.begin(), records.end());
    const torch::Tensor y = t.target.index_select(0, torch::tensor(ids));
    return robust_loss(compute_forward(table, head, t, records), y);
  };
  const FitOutcome r = fit(job, o, "compute", o.seed + 11);
  net.table = export_mlp(table);
  net.head = export_mlp(head);
  return r;
}

// ---- communication ----

struct CommRows {
  std::vector<float> x;  // fwd features (the bwd ones are the prefix)
  std::vector<double> fwd, bwd;
  std::vector<int> item;  // per row: index into the split's item list
};

CommRows comm_rows(const std::vector<CommData>& files,
                   const std::vector<std::pair<int, int>>& items) {
  const int nf = static_cast<int>(comm_fwd_feature_names().size());
  CommRows rows;
  std::vector<float> x(nf);
  for (size_t i = 0; i < items.size(); ++i) {
    const CommData& f = files[items[i].first];
    const CommRecord& r = f.records[items[i].second];
    for (int d = 0; d < f.num_devices; ++d) {
      comm_raw_features(r.dim_sums, r.delays_ms, d, f.batch_size, x.data());
      rows.x.insert(rows.x.end(), x.begin(), x.end());
      // The forward network learns the transfer; the wait is added (see
      // comm_wait_ms).
      rows.fwd.push_back(std::max(kMinTransferMs, r.fwd_ms[d] - comm_wait_ms(r.delays_ms, d)));
      rows.bwd.push_back(r.bwd_ms[d]);
      rows.item.push_back(static_cast<int>(i));
    }
  }
  return rows;
}

// One direction: features [n, nf] sliced to the first `nf` columns.
FitOutcome train_comm_net(const CommRows& train, const CommRows& val, bool forward, int nf,
                          const TrainOptions& o, CommNet& net) {
  const int all = static_cast<int>(comm_fwd_feature_names().size());
  auto slice = [&](const CommRows& rows) {
    std::vector<float> x;
    for (size_t i = 0; i < rows.x.size(); i += all) x.insert(x.end(), &rows.x[i], &rows.x[i] + nf);
    return x;
  };
  std::vector<float> xt = slice(train), xv = slice(val);
  net.features = fit_normaliser(xt, nf);
  for (size_t i = 0; i < xt.size(); i += nf) net.features.apply(&xt[i]);
  for (size_t i = 0; i < xv.size(); i += nf) net.features.apply(&xv[i]);
  std::vector<double> log_t;
  for (double v : forward ? train.fwd : train.bwd) log_t.push_back(std::log(v));
  std::tie(net.target_mean, net.target_std) = fit_target(log_t);
  auto targets = [&](const CommRows& rows) {
    std::vector<float> y;
    for (double v : forward ? rows.fwd : rows.bwd) {
      y.push_back(static_cast<float>((std::log(v) - net.target_mean) / net.target_std));
    }
    return torch::tensor(y);
  };
  // One tensor of train rows then val rows; items index into it.
  const torch::Tensor x = torch::cat({to_tensor(xt, nf), to_tensor(xv, nf)});
  const torch::Tensor y = torch::cat({targets(train), targets(val)});
  TorchMlp mlp(std::vector<int>{nf, o.hidden, o.hidden, 1}, /*relu_last=*/false);
  Fit job;
  job.parameters = all_parameters({mlp.ptr().get()});
  job.train.resize(xt.size() / nf);
  std::iota(job.train.begin(), job.train.end(), 0);
  job.val.resize(xv.size() / nf);
  std::iota(job.val.begin(), job.val.end(), static_cast<int>(xt.size() / nf));
  job.loss = [&](const std::vector<int>& rows) {
    const torch::Tensor idx = torch::tensor(std::vector<int64_t>(rows.begin(), rows.end()));
    return robust_loss(mlp->forward(x.index_select(0, idx)).squeeze(1), y.index_select(0, idx));
  };
  const FitOutcome r =
      fit(job, o, forward ? "comm fwd" : "comm bwd", o.seed + (forward ? 23 : 37));
  net.mlp = export_mlp(mlp);
  return r;
}

}  // namespace

void fine_tune_fitted_model(FitResult& r, const FineTuneOptions& o, Reporter& reporter) {
  check_fine_tune_options(o);
  NeuralModel& model = r.model;
  ComputeNet& net = model.compute;
  const int nf = net.inputs().size();
  // The fit records through the model's own path: features at the network's
  // batch, normalised as trained; the target is what the head must output
  // for the record's measured ms, given the batch scaling around it.
  std::vector<float> rows, x(nf), target;
  std::vector<int64_t> first = {0};
  for (size_t k = 0; k < r.fit_idx.size(); ++k) {
    const ComputeRecord& rec = r.data.records[r.fit_idx[k]];
    const BatchFit bf = fit_batch(model.batch_size, model.max_batch_size, rec.batch);
    for (const TableFeatures& t : rec.tables) {
      compute_raw_features(t, bf.network_batch, x.data(), net.inputs());
      net.features.apply(x.data());
      rows.insert(rows.end(), x.begin(), x.end());
    }
    first.push_back(static_cast<int64_t>(rows.size() / nf));
    const double log_ms = std::log(rec.ms / (bf.scale * batch_factor(model, rec.batch)));
    target.push_back(static_cast<float>((log_ms - net.target_mean) / net.target_std));
  }
  TorchMlp table = import_mlp(net.table), head = import_mlp(net.head);
  std::vector<torch::Tensor> params;
  for (TorchMlp* m : {&table, &head}) {
    (*m)->train();
    for (auto& p : (*m)->parameters()) params.push_back(p);
  }
  std::vector<torch::Tensor> anchors;
  for (const auto& p : params) anchors.push_back(p.detach().clone());
  const ComputeTensors t{to_tensor(rows, nf), first, torch::tensor(target)};
  std::vector<int> all(r.fit_idx.size());
  std::iota(all.begin(), all.end(), 0);
  torch::optim::Adam optimizer(params, torch::optim::AdamOptions(kFineTuneLearningRate));
  double loss_first = 0, loss_last = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    optimizer.zero_grad();
    torch::Tensor fit_loss = robust_loss(compute_forward(table, head, t, all), t.target);
    torch::Tensor loss = fit_loss;
    for (size_t i = 0; i < params.size(); ++i) {
      loss = loss + o.anchor * (params[i] - anchors[i]).pow(2).sum();
    }
    loss.backward();
    optimizer.step();
    if (epoch == 1) loss_first = fit_loss.item<double>();
    loss_last = fit_loss.item<double>();
  }
  net.table = export_mlp(table);
  net.head = export_mlp(head);
  r.after = test_accuracy(model, r.data, r.test_idx);
  r.pieces_after = test_accuracy(model, r.data, r.piece_test_idx);
  model.info["fitted"]["test_pieces"]["mape_after_pct"] = r.pieces_after.mape_pct;
  model.info["fitted"]["fine_tune"] = {{"epochs", o.epochs},
                                       {"learning_rate", kFineTuneLearningRate},
                                       {"anchor", o.anchor},
                                       {"fit_loss_first", loss_first},
                                       {"fit_loss_last", loss_last},
                                       {"test_mape_plane_pct", r.plane.mape_pct}};
  model.info["fitted"]["test_mape_after_pct"] = r.after.mape_pct;
  reporter.note(fmt::format("fit: fine-tuned the networks on {} records ({} epochs, fit loss "
                            "{:.5f} -> {:.5f}); test MAPE {:.2f}% after the plane -> {:.2f}%",
                            all.size(), o.epochs, loss_first, loss_last, r.plane.mape_pct,
                            r.after.mape_pct));
}

namespace {

// Before libtorch sees them: its own errors are stack traces, and a batch of
// 0 never finishes an epoch.
void check_train_options(const TrainOptions& o) {
  ES_CHECK(o.max_epochs >= 1 && o.patience >= 1 && o.batch >= 1,
           "train: --epochs {}, --patience {}, --batch {}: each must be at least 1", o.max_epochs,
           o.patience, o.batch);
  ES_CHECK(std::isfinite(o.lr) && o.lr > 0, "train: --lr {} must be > 0", o.lr);
  ES_CHECK(o.weight_average >= 0 && o.weight_average < 1,
           "train: --weight-average {} must be in [0, 1)", o.weight_average);
  // Not a command-line option: TrainOptions' own.
  ES_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
           "train: the weight decay {} must be >= 0", o.weight_decay);
  ES_CHECK(o.hidden >= 1 && o.hidden <= Mlp::kMaxWidth && o.embed >= 1 &&
               o.embed <= Mlp::kMaxWidth && o.threads >= 1,
           "train: --hidden {} and --embed {} must be in 1..{}, --threads {} at least 1",
           o.hidden, o.embed, Mlp::kMaxWidth, o.threads);
  ES_CHECK(o.reuse_tail_bin >= 0 && o.reuse_tail_bin <= kNoReuseTail,
           "train: --reuse-tail-bin {} must be in 0..{} (0: by the data's executor; {}: nothing "
           "merged)",
           o.reuse_tail_bin, kNoReuseTail, kNoReuseTail);
}

// --reuse-tail-bin 0: by where the data were measured. A GPU's backward sums
// each row's lookups in one warp, so the hottest rows set its time and the
// whole histogram counts; on a CPU the tail past kDefaultReuseTailBin merged.
int reuse_tail_bin_for(const TrainOptions& o, const ComputeData& compute) {
  if (o.reuse_tail_bin > 0) return o.reuse_tail_bin;
  const std::string executor = compute.header.value("executor", std::string("cpu"));
  return executor.rfind("cuda", 0) == 0 ? kNoReuseTail : kDefaultReuseTailBin;
}

ComputeData load_training_compute(const TrainOptions& o, Reporter& reporter) {
  std::vector<ComputeData> files;
  for (const std::string& path : o.compute_paths) {
    LoadOptions lo;
    lo.raw = o.raw_ground_truth;
    files.push_back(load_compute_data(path, lo));
    report_problems(path, files.back().problems, reporter);
  }
  return merge_compute_data(std::move(files));
}

}  // namespace

TrainResult train_neural_model(const TrainOptions& options) {
  check_train_options(options);
  torch::manual_seed(options.seed);
  torch::set_num_threads(options.threads);
  TrainResult result;
  NeuralModel& model = result.model;
  Reporter& reporter = options.reporter != nullptr ? *options.reporter : silent_reporter();
  ES_CHECK(!options.compute_paths.empty(), "train: no compute data (--compute FILE)");
  const ComputeData compute = load_training_compute(options, reporter);
  TrainOptions o = options;
  o.reuse_tail_bin = reuse_tail_bin_for(options, compute);
  model.batch_size = compute.batch_size;
  model.max_batch_size = compute.max_batch_size;
  const ComputeSplit split =
      split_compute_records(compute, o.seed, o.holdout_tables, o.val_share, o.test_share);
  const FitOutcome cr = train_compute(compute, split, o, model.compute);
  result.notes.push_back(fmt::format(
      "compute: {} records ({} skipped as bad); {} of the pool's tables held out; split train {} "
      "/ val {} / test {} / unseen-tables {} ({} records mixing held-out and seen tables unused)",
      compute.records.size() + compute.problems.size(), compute.problems.size(),
      split.holdout_pool_ids.size(), split.train.size(), split.val.size(), split.test.size(),
      split.unseen.size(), split.dropped_mixed));
  result.notes.push_back(
      fmt::format("compute: stopped at epoch {}, best validation loss {:.5f} "
                  "at epoch {}",
                  cr.epochs, cr.best_val_loss, cr.best_epoch));
  std::vector<CommData> comm;
  CommSplit comm_split;
  if (!o.comm_paths.empty()) {
    for (const std::string& path : o.comm_paths) {
      LoadOptions lo;
      lo.raw = o.raw_ground_truth;
      comm.push_back(load_comm_data(path, lo));
      report_problems(path, comm.back().problems, reporter);
      ES_CHECK(comm.back().normalized == compute.normalized,
               "{} holds {} ground truth but the compute data {}: one model must not mix them",
               path, ground_truth_label(comm.back().normalized),
               ground_truth_label(compute.normalized));
    }
    model.has_comm = true;
    model.comm_batch_size = comm.front().batch_size;
    model.comm_max_batch_size = comm.front().batch_size;
    for (const CommData& f : comm) {
      model.comm_batch_size = std::min(model.comm_batch_size, f.batch_size);
      model.comm_max_batch_size = std::max(model.comm_max_batch_size, f.batch_size);
    }
    comm_split = split_comm_records(comm, o.seed, o.val_share, o.test_share);
    for (const CommData& f : comm) {
      for (const CommRecord& r : f.records) {
        for (double d : r.delays_ms) model.comm_max_delay_ms = std::max(model.comm_max_delay_ms, d);
      }
    }
    const CommRows train = comm_rows(comm, comm_split.train), val = comm_rows(comm, comm_split.val);
    const int nb = static_cast<int>(comm_bwd_feature_names().size());
    const int nf = static_cast<int>(comm_fwd_feature_names().size());
    const FitOutcome fr = train_comm_net(train, val, true, nf, o, model.comm_fwd);
    const FitOutcome br = train_comm_net(train, val, false, nb, o, model.comm_bwd);
    result.notes.push_back(fmt::format(
        "comm: {} files, split train {} / val {} / test {} records; fwd stopped at epoch {} "
        "(best {}), bwd at {} (best {})",
        comm.size(), comm_split.train.size(), comm_split.val.size(), comm_split.test.size(),
        fr.epochs, fr.best_epoch, br.epochs, br.best_epoch));
  }
  evaluate_trained_model(o, compute, split, comm, comm_split, result);
  return result;
}

}  // namespace embshard
