// Policy directories: manifest.json + one checksummed weight file per
// network, in the neural cost models' weight format (model_file.h), so that
// one reader checks every weight file embshard writes.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/ranges.h>

#include "embshard/cost/cost_model.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/search/policy.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"

namespace embshard {
namespace {

using nlohmann::json;

const char* kHeadNames[kCostHeads] = {"compute", "fwd_comm", "bwd_comm", "overall"};

// A GRU cell's two linear maps stored as one-layer MLPs.
Mlp one_layer(const DenseLayer& l) {
  Mlp m;
  m.layers.push_back(l);
  m.layers.back().relu = false;
  return m;
}

void check_sizes(bool ok, const std::string& path, const std::string& what) {
  ES_CHECK(ok, "{}: the {} networks do not fit together (retrain the policy)", path, what);
}

}  // namespace

void save_policy(const PolicyNets& nets, const std::string& dir) {
  std::filesystem::create_directories(dir);
  json networks;
  networks["policy_table"] = mlp_entry(dir, "policy_table.bin", nets.policy_table);
  networks["policy_logit"] = mlp_entry(dir, "policy_logit.bin", nets.policy_logit);
  if (nets.kind == PolicyKind::kDreamShard) {
    networks["cost_table"] = mlp_entry(dir, "cost_table.bin", nets.cost_table);
    for (int h = 0; h < kCostHeads; ++h) {
      networks[std::string("cost_") + kHeadNames[h]] = {
          {"mlp", mlp_entry(dir, std::string("cost_") + kHeadNames[h] + ".bin", nets.cost_head[h])},
          {"target", {{"mean", nets.target_mean[h]}, {"std", nets.target_std[h]}}}};
    }
  } else {
    networks["gru_ih"] = mlp_entry(dir, "gru_ih.bin", one_layer(nets.gru.ih));
    networks["gru_hh"] = mlp_entry(dir, "gru_hh.bin", one_layer(nets.gru.hh));
  }
  json manifest = nets.info;
  manifest["format"] = kPolicyFormat;
  manifest["version"] = kPolicyVersion;
  manifest["policy"] = policy_kind_name(nets.kind);
  manifest["features"] = policy_feature_names();
  manifest["device_features"] = policy_device_feature_names(nets.kind);
  manifest["normaliser"] = normaliser_json(nets.features);
  manifest["networks"] = networks;
  write_file_atomic((std::filesystem::path(dir) / "manifest.json").string(),
                    manifest.dump(2) + "\n");
}

PolicyNets load_policy(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  const json m =
      read_manifest(dir, "policy", "embshard train-policy", kPolicyFormat, kPolicyVersion);
  PolicyNets nets;
  const auto strings = [&](const char* pointer) {
    return json_field(m, pointer, JsonKind::kStrings, path).get<std::vector<std::string>>();
  };
  const std::string kind = json_field(m, "/policy", JsonKind::kString, path).get<std::string>();
  const std::vector<std::string>& kinds = policy_kind_names();
  ES_CHECK(std::find(kinds.begin(), kinds.end(), kind) != kinds.end(),
           "{}: field 'policy' is '{}', expected one of {}", path, kind,
           fmt::join(kinds, ", "));
  nets.kind = parse_policy_kind(kind);
  const auto names = strings("/features");
  ES_CHECK(names == policy_feature_names(),
           "{}: the policy was trained on {} table features, this embshard computes {} "
           "(features differ: retrain the policy)",
           path, names.size(), policy_feature_names().size());
  const auto device_names = strings("/device_features");
  ES_CHECK(device_names == policy_device_feature_names(nets.kind),
           "{}: the policy was trained on {} device features, this embshard computes {} "
           "(features differ: retrain the policy)",
           path, device_names.size(), policy_device_feature_names(nets.kind).size());
  const size_t nf = policy_feature_names().size();
  const size_t nd = device_names.size();
  nets.features = normaliser_from(m, "/normaliser", nf, path);
  const auto mlp = [&](const std::string& name) {
    return mlp_from(dir, m, "/networks/" + name, path);
  };
  nets.policy_table = mlp("policy_table");
  nets.policy_logit = mlp("policy_logit");
  const int E = nets.policy_table.out();
  check_sizes(nets.policy_table.in() == static_cast<int>(nf), path, "policy table");
  if (nets.kind == PolicyKind::kDreamShard) {
    nets.cost_table = mlp("cost_table");
    check_sizes(nets.cost_table.in() == static_cast<int>(nf), path, "cost table");
    for (int h = 0; h < kCostHeads; ++h) {
      const std::string head = std::string("cost_") + kHeadNames[h];
      nets.cost_head[h] = mlp(head + "/mlp");
      const auto number = [&](const char* key) {
        return json_field(m, "/networks/" + head + "/target/" + key, JsonKind::kNumber, path)
            .get<double>();
      };
      nets.target_mean[h] = number("mean");
      nets.target_std[h] = number("std");
      ES_CHECK(std::isfinite(nets.target_mean[h]) && std::isfinite(nets.target_std[h]) &&
                   nets.target_std[h] > 0,
               "{}: cost head '{}' has target mean {} and std {}", path, kHeadNames[h],
               nets.target_mean[h], nets.target_std[h]);
      check_sizes(nets.cost_head[h].in() == nets.cost_table.out() && nets.cost_head[h].out() == 1,
                  path, std::string("cost ") + kHeadNames[h]);
    }
  } else {
    const Mlp ih = mlp("gru_ih"), hh = mlp("gru_hh");
    check_sizes(ih.layers.size() == 1 && hh.layers.size() == 1, path, "GRU");
    nets.gru.ih = ih.layers[0];
    nets.gru.hh = hh.layers[0];
    const int H = nets.gru.hidden();
    check_sizes(nets.gru.ih.in == E + static_cast<int>(nd) && nets.gru.ih.out == 3 * H &&
                    nets.gru.hh.out == 3 * H && H <= Mlp::kMaxWidth,
                path, "GRU");
  }
  check_sizes(nets.policy_logit.in() == E + static_cast<int>(nd) + nets.context_size() &&
                  nets.policy_logit.out() == 1,
              path, "policy logit");
  nets.info = m;
  nets.prepare();
  return nets;
}

std::string shipped_policy_dir(PolicyKind kind) {
  return (std::filesystem::path(shipped_models_dir()) / "policies" / policy_kind_name(kind))
      .string();
}

}  // namespace embshard
