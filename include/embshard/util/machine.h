// What machine a measurement was taken on.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace embshard {

// {"cpu": model name, "cores": online cores, "hostname": ...}
nlohmann::json machine_info();
std::string cpu_model();

}  // namespace embshard
