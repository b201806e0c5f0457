// Neural model directories: manifest.json + one weight file per network.
//
// Weight file (little-endian, as written by x86/ARM hosts):
//   "ESNNWTS\0"  u32 version (1)  u32 layers
//   per layer: u32 in, u32 out, u32 relu, f32 weight[out*in] (row-major), f32 bias[out]
//   u32 CRC-32 (zlib) of every byte before it
// The manifest carries the rest (features, normalisation, targets, sizes and
// each weight file's CRC) and is written last, so a directory whose manifest
// exists was completely written.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "embshard/cost/cost_model.h"
#include "embshard/cost/neural/features.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"

namespace embshard {
namespace {

using nlohmann::json;
constexpr char kWeightMagic[8] = {'E', 'S', 'N', 'N', 'W', 'T', 'S', '\0'};
constexpr uint32_t kWeightVersion = 1;

// The CRC-32 of any byte string followed by its own CRC-32 (little-endian).
constexpr uint32_t kCrcResidue = 0x2144df1c;

uint32_t crc32_of(const void* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, bytes, chunk);
    bytes += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

std::string encode_mlp(const Mlp& mlp) {
  std::string out(kWeightMagic, sizeof(kWeightMagic));
  put(out, kWeightVersion);
  put(out, static_cast<uint32_t>(mlp.layers.size()));
  for (const DenseLayer& l : mlp.layers) {
    put(out, static_cast<uint32_t>(l.in));
    put(out, static_cast<uint32_t>(l.out));
    put(out, static_cast<uint32_t>(l.relu ? 1 : 0));
    out.append(reinterpret_cast<const char*>(l.weight.data()), l.weight.size() * sizeof(float));
    out.append(reinterpret_cast<const char*>(l.bias.data()), l.bias.size() * sizeof(float));
  }
  put(out, crc32_of(out.data(), out.size()));
  return out;
}

// Reads sequentially from a weight file; every overrun names the file.
class Reader {
 public:
  Reader(const std::string& path, const std::string& bytes) : path_(path), bytes_(bytes) {}
  template <typename T>
  T get(const char* what) {
    T value;
    take(&value, sizeof(T), what);
    return value;
  }
  void take(void* out, size_t size, const char* what) {
    ES_CHECK(pos_ + size <= bytes_.size(), "{}: truncated weight file (reading {} at byte {})",
             path_, what, pos_);
    std::memcpy(out, bytes_.data() + pos_, size);
    pos_ += size;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& path_;
  const std::string& bytes_;
  size_t pos_ = 0;
};

Mlp decode_mlp(const std::string& path, const std::vector<int>& expected_sizes) {
  const std::string bytes = read_file(path);
  ES_CHECK(bytes.size() >= sizeof(kWeightMagic) + 12 &&
               std::memcmp(bytes.data(), kWeightMagic, sizeof(kWeightMagic)) == 0,
           "{}: not an embshard weight file (bad magic)", path);
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  ES_CHECK(crc32_of(bytes.data(), bytes.size() - 4) == stored_crc,
           "{}: checksum mismatch: the weight file is corrupted", path);
  Reader r(path, bytes);
  char magic[8];
  r.take(magic, 8, "magic");
  const auto version = r.get<uint32_t>("version");
  ES_CHECK(version == kWeightVersion, "{}: weight file version {}, this embshard reads {}", path,
           version, kWeightVersion);
  const auto layers = r.get<uint32_t>("layer count");
  // In size_t: a count of 2^32 - 1 must not wrap to the size of an empty list.
  ES_CHECK(size_t{layers} + 1 == expected_sizes.size(), "{}: {} layers, the manifest says {}",
           path, layers, expected_sizes.size() - 1);
  Mlp mlp;
  for (uint32_t l = 0; l < layers; ++l) {
    DenseLayer layer;
    layer.in = static_cast<int>(r.get<uint32_t>("layer in"));
    layer.out = static_cast<int>(r.get<uint32_t>("layer out"));
    layer.relu = r.get<uint32_t>("layer relu") != 0;
    ES_CHECK(layer.in == expected_sizes[l] && layer.out == expected_sizes[l + 1],
             "{}: layer {} is {}x{}, the manifest says {}x{}", path, l, layer.in, layer.out,
             expected_sizes[l], expected_sizes[l + 1]);
    ES_CHECK(layer.in >= 1 && layer.out >= 1 && layer.out <= Mlp::kMaxWidth &&
                 layer.in <= Mlp::kMaxWidth,
             "{}: layer {} is {}x{}, outside 1..{}", path, l, layer.in, layer.out, Mlp::kMaxWidth);
    layer.weight.resize(static_cast<size_t>(layer.in) * layer.out);
    layer.bias.resize(layer.out);
    r.take(layer.weight.data(), layer.weight.size() * sizeof(float), "weights");
    r.take(layer.bias.data(), layer.bias.size() * sizeof(float), "biases");
    for (float v : layer.weight)
      ES_CHECK(std::isfinite(v), "{}: non-finite weight in layer {}", path, l);
    for (float v : layer.bias)
      ES_CHECK(std::isfinite(v), "{}: non-finite bias in layer {}", path, l);
    mlp.layers.push_back(std::move(layer));
  }
  ES_CHECK(r.pos() + 4 == bytes.size(), "{}: {} trailing bytes after the last layer", path,
           bytes.size() - r.pos() - 4);
  return mlp;
}

}  // namespace

json normaliser_json(const Normaliser& n) {
  json j = {{"mean", n.mean}, {"scale", n.scale}};
  if (n.clamp > 0) j["clamp"] = n.clamp;  // absent: a model from before the clamp
  return j;
}

Normaliser normaliser_from(const json& manifest, const std::string& pointer, size_t features,
                           const std::string& where) {
  Normaliser n;
  n.mean =
      json_field(manifest, pointer + "/mean", JsonKind::kNumbers, where).get<std::vector<float>>();
  n.scale =
      json_field(manifest, pointer + "/scale", JsonKind::kNumbers, where).get<std::vector<float>>();
  ES_CHECK(n.mean.size() == features && n.scale.size() == features,
           "{}: normalisation has {} means and {} scales, expected {} (one per feature)", where,
           n.mean.size(), n.scale.size(), features);
  for (size_t i = 0; i < features; ++i) {
    ES_CHECK(std::isfinite(n.mean[i]) && std::isfinite(n.scale[i]) && n.scale[i] > 0,
             "{}: normalisation of feature {} is mean {} and scale {}, expected finite, scale > 0",
             where, i, n.mean[i], n.scale[i]);
  }
  if (const json* clamp = json_optional(manifest, pointer + "/clamp", JsonKind::kNumber, where)) {
    n.clamp = clamp->get<float>();
    ES_CHECK(std::isfinite(n.clamp) && n.clamp > 0, "{}: field '{}/clamp' is {}, expected > 0",
             where, pointer, clamp->dump());
  }
  return n;
}

json mlp_entry(const std::string& dir, const std::string& file, const Mlp& mlp) {
  const std::string bytes = encode_mlp(mlp);
  write_file_atomic((std::filesystem::path(dir) / file).string(), bytes);
  // The weights' CRC (the file's own trailer), not the whole file's: a file
  // that ends in its CRC always has the same whole-file CRC (kCrcResidue).
  return {{"file", file}, {"sizes", mlp.sizes()}, {"crc32", crc32_of(bytes.data(), bytes.size() - 4)}};
}

Mlp mlp_from(const std::string& dir, const json& manifest, const std::string& pointer,
             const std::string& manifest_path) {
  const auto field = [&](const char* key, JsonKind kind) -> const json& {
    return json_field(manifest, pointer + "/" + key, kind, manifest_path);
  };
  const std::string path =
      (std::filesystem::path(dir) / field("file", JsonKind::kString).get<std::string>()).string();
  ES_CHECK(file_exists(path), "{}: weight file missing (named by {})", path, manifest_path);
  // Checked as counts, before they narrow to int: a network has an input and
  // an output, each 1..kMaxWidth wide.
  const json& sizes_field = field("sizes", JsonKind::kCounts);
  ES_CHECK(sizes_field.size() >= 2 &&
               std::all_of(sizes_field.begin(), sizes_field.end(),
                           [](const json& n) {
                             return n.get<int64_t>() >= 1 && n.get<int64_t>() <= Mlp::kMaxWidth;
                           }),
           "{}: field '{}/sizes' is {}, expected two or more sizes in 1..{}", manifest_path,
           pointer, json_shown(sizes_field), Mlp::kMaxWidth);
  // decode_mlp checks the trailer.
  Mlp mlp = decode_mlp(path, sizes_field.get<std::vector<int>>());
  const std::string bytes = read_file(path);
  // Older manifests hold the whole file's CRC, the residue every intact file
  // has: they still load, but cannot tell a replaced file.
  const uint32_t expected = field("crc32", JsonKind::kCount).get<uint32_t>();
  ES_CHECK(expected == kCrcResidue || crc32_of(bytes.data(), bytes.size() - 4) == expected,
           "{}: weights differ from those {} names (CRC {:08x}, expected {:08x}): the file was "
           "replaced or edited",
           path, manifest_path, crc32_of(bytes.data(), bytes.size() - 4), expected);
  return mlp;
}

namespace {

// A network's target (standardised log ms): a finite mean within e^+-50 ms
// and a positive std (a bad one predicts absurd costs with no error).
void read_target(const json& manifest, const std::string& net, const std::string& path,
                 const char* which, double& mean, double& std) {
  mean = json_field(manifest, net + "/target/mean", JsonKind::kNumber, path).get<double>();
  std = json_field(manifest, net + "/target/std", JsonKind::kNumber, path).get<double>();
  ES_CHECK(std::isfinite(mean) && std::abs(mean) <= 50 && std::isfinite(std) && std > 0 && std <= 50,
           "{}: the {} network's target is mean {} and std {}, expected |mean| <= 50 and 0 < std "
           "<= 50 (log ms)",
           path, which, mean, std);
}

void check_names(const json& manifest, const std::string& net,
                 const std::vector<std::string>& expected, const std::string& path,
                 const char* which) {
  const auto names = json_field(manifest, net + "/features", JsonKind::kStrings, path)
                         .get<std::vector<std::string>>();
  if (names == expected) return;
  size_t i = 0;
  while (i < names.size() && i < expected.size() && names[i] == expected[i]) ++i;
  ES_THROW("{}: the {} network has {} features, this embshard computes {}; feature {} is {} in "
           "the manifest but {} here (features differ: retrain the model)",
           path, which, names.size(), expected.size(), i,
           i < names.size() ? "'" + names[i] + "'" : std::string("missing"),
           i < expected.size() ? "'" + expected[i] + "'" : std::string("absent"));
}

}  // namespace

uint32_t file_crc32(const std::string& path) {
  const std::string bytes = read_file(path);
  return crc32_of(bytes.data(), bytes.size());
}

void save_neural_model(const NeuralModel& m, const std::string& dir) {
  std::filesystem::create_directories(dir);
  json nets;
  nets["compute"] = {{"features", m.compute.inputs().names()},
                     {"pooling", "sum_exp_log"},  // log(sum over tables of exp(table_mlp))
                     {"reuse_tail_bin", m.compute.reuse_tail_bin},
                     {"normaliser", normaliser_json(m.compute.features)},
                     {"table_mlp", mlp_entry(dir, "compute_table.bin", m.compute.table)},
                     {"head_mlp", mlp_entry(dir, "compute_head.bin", m.compute.head)},
                     {"target", {{"mean", m.compute.target_mean}, {"std", m.compute.target_std}}}};
  const auto comm = [&](const CommNet& net, const char* file, const auto& names) {
    return json{{"features", names},
                {"normaliser", normaliser_json(net.features)},
                {"mlp", mlp_entry(dir, file, net.mlp)},
                {"target", {{"mean", net.target_mean}, {"std", net.target_std}}}};
  };
  if (m.has_comm) {
    nets["comm_fwd"] = comm(m.comm_fwd, "comm_fwd.bin", comm_fwd_feature_names());
    nets["comm_bwd"] = comm(m.comm_bwd, "comm_bwd.bin", comm_bwd_feature_names());
  }
  json manifest = m.info;
  manifest["format"] = kManifestFormat;
  manifest["version"] = kManifestVersion;
  manifest["batch_size"] = m.batch_size;
  manifest["max_batch_size"] = m.max_batch_size;
  manifest["comm_batch_size"] = m.comm_batch_size;
  manifest["comm_max_batch_size"] = m.comm_max_batch_size;
  manifest["comm_max_delay_ms"] = m.comm_max_delay_ms;
  manifest["batch_correction"] = m.batch_correction;
  manifest["networks"] = nets;
  write_file_atomic((std::filesystem::path(dir) / kManifestFile).string(), manifest.dump(2) + "\n");
}

NeuralModel load_neural_model(const std::string& given) {
  // A model set (plan --model's kind: neural/ beside a calibration) reads as its neural/.
  const std::string dir = given.empty() ? given : neural_model_dir(given);
  const std::string path = (std::filesystem::path(dir) / kManifestFile).string();
  const json manifest =
      read_manifest(dir, "model", "embshard train", kManifestFormat, kManifestVersion);
  NeuralModel m;
  const auto count = [&](const char* pointer) {
    return json_field(manifest, pointer, JsonKind::kCount, path).get<int64_t>();
  };
  m.batch_size = count("/batch_size");
  m.max_batch_size = count("/max_batch_size");
  m.comm_batch_size = count("/comm_batch_size");
  m.comm_max_batch_size = count("/comm_max_batch_size");
  const json* correction = json_optional(manifest, "/batch_correction", JsonKind::kNumber, path);
  m.batch_correction = correction ? correction->get<double>() : 0.0;
  ES_CHECK(std::isfinite(m.batch_correction) && std::abs(m.batch_correction) < 4,
           "{}: batch_correction is {}, must be a number in (-4, 4)", path, m.batch_correction);
  const std::string c = "/networks/compute";
  // Networks trained before the data-type feature name one feature fewer.
  const ComputeFeatureSet untyped{kNoReuseTail, false};
  m.compute.data_type_feature = json_field(manifest, c + "/features", JsonKind::kStrings, path)
                                    .get<std::vector<std::string>>() != untyped.names();
  check_names(manifest, c, m.compute.inputs().names(), path, "compute");
  const std::string pooling = json_field(manifest, c + "/pooling", JsonKind::kString, path);
  ES_CHECK(pooling == "sum_exp_log",
           "{}: compute pooling '{}', this embshard implements 'sum_exp_log'", path, pooling);
  if (const json* tail = json_optional(manifest, c + "/reuse_tail_bin", JsonKind::kCount, path)) {
    const int64_t bin = tail->get<int64_t>();
    ES_CHECK(bin >= 1 && bin <= kNoReuseTail, "{}: {}/reuse_tail_bin is {}, must be 1 .. {}", path,
             c, bin, kNoReuseTail);
    m.compute.reuse_tail_bin = static_cast<int>(bin);
  }
  m.compute.features =
      normaliser_from(manifest, c + "/normaliser", m.compute.inputs().size(), path);
  m.compute.table = mlp_from(dir, manifest, c + "/table_mlp", path);
  m.compute.head = mlp_from(dir, manifest, c + "/head_mlp", path);
  read_target(manifest, c, path, "compute", m.compute.target_mean, m.compute.target_std);
  ES_CHECK(m.compute.table.in() == m.compute.inputs().size() &&
               m.compute.table.out() == m.compute.head.in() && m.compute.head.out() == 1,
           "{}: compute networks do not fit together (sizes {} -> {} -> {} -> 1)", path,
           m.compute.table.in(), m.compute.table.out(), m.compute.head.in());
  m.has_comm = json_optional(manifest, "/networks/comm_fwd", JsonKind::kObject, path) != nullptr;
  const auto comm = [&](const char* key, const std::vector<std::string>& names, CommNet& net) {
    const std::string j = std::string("/networks/") + key;
    check_names(manifest, j, names, path, key);
    net.features = normaliser_from(manifest, j + "/normaliser", names.size(), path);
    net.mlp = mlp_from(dir, manifest, j + "/mlp", path);
    read_target(manifest, j, path, key, net.target_mean, net.target_std);
    ES_CHECK(net.mlp.in() == static_cast<int>(names.size()) && net.mlp.out() == 1,
             "{}: the {} network is {} -> {}, expected {} -> 1", path, key, net.mlp.in(),
             net.mlp.out(), names.size());
  };
  if (m.has_comm) {
    comm("comm_fwd", comm_fwd_feature_names(), m.comm_fwd);
    comm("comm_bwd", comm_bwd_feature_names(), m.comm_bwd);
    m.comm_max_delay_ms =
        json_field(manifest, "/comm_max_delay_ms", JsonKind::kNumber, path).get<double>();
    ES_CHECK(std::isfinite(m.comm_max_delay_ms) && m.comm_max_delay_ms >= 0,
             "{}: comm_max_delay_ms is {}, must be a finite number >= 0", path,
             m.comm_max_delay_ms);
  }
  ES_CHECK(m.batch_size > 0 && m.max_batch_size >= m.batch_size,
           "{}: batch_size {} / max_batch_size {} invalid", path, m.batch_size, m.max_batch_size);
  ES_CHECK(!m.has_comm || (m.comm_batch_size > 0 && m.comm_max_batch_size >= m.comm_batch_size),
           "{}: comm_batch_size {} / comm_max_batch_size {} invalid", path, m.comm_batch_size,
           m.comm_max_batch_size);
  if (json_optional(manifest, "/memory", JsonKind::kObject, path) != nullptr) {
    m.copy_gbps = json_field(manifest, "/memory/copy_gbps", JsonKind::kNumber, path).get<double>();
    ES_CHECK(std::isfinite(m.copy_gbps) && m.copy_gbps > 0 && m.copy_gbps < 1e6,
             "{}: memory/copy_gbps is {}, must be a number of GB/s in (0, 1e6)", path, m.copy_gbps);
    m.copy_source = json_field(manifest, "/memory/source", JsonKind::kString, path);
  }
  m.info = manifest;
  return m;
}

}  // namespace embshard
