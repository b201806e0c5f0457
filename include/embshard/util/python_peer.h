// Running embshard's Python modules under the Python that imports TorchRec:
// the peers that measure TorchRec's own planner and FBGEMM's kernels beside
// embshard's (scripts/install_torchrec.sh makes that Python).
#pragma once

#include <string>
#include <vector>

namespace embshard {

// The environment variable naming the Python that imports torchrec.
inline constexpr const char* kTorchrecPythonEnv = "EMBSHARD_TORCHREC_PYTHON";

// That Python: the variable when set, else <data root>/.venv-torchrec/bin/python
// when it exists; else an Error naming both and scripts/install_torchrec.sh.
std::string torchrec_python();

// Runs `python -m module args...` under torchrec_python(), with the data
// root's python/ folder (a source checkout's embshard package) ahead on
// PYTHONPATH, its stdout and stderr to a log file. Throws an Error naming
// `what`, the exit status and the log's last lines when it fails.
void run_python_module(const std::string& module, const std::vector<std::string>& args,
                       const std::string& what);

}  // namespace embshard
