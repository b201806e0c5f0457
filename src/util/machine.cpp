#include "embshard/util/machine.h"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

namespace embshard {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

nlohmann::json machine_info() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return {{"cpu", cpu_model()},
          {"cores", std::thread::hardware_concurrency()},
          {"hostname", std::string(host)}};
}

}  // namespace embshard
