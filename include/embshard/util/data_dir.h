// Where the data that ships with embshard lives at run time: the folder (the
// "data root") holding models/ (what planning loads) and data/published/ (the
// published statistics synth calibrates to). It is a source checkout, or an
// install's <prefix>/share/embshard. It is found at run time, never through a
// path compiled in, so that an install still works after it is moved:
//
//   1. the environment variable EMBSHARD_DATA_DIR, when set;
//   2. the file `embshard-data-dir` beside the binary or shared object holding
//      the library's code (the build writes it there, naming the source root):
//      its first line is the root, absolute or relative to that folder;
//   3. <that folder>/../share/embshard, when it holds models/ (an install).
//
// Nothing found is an Error naming each place tried. `--model DIR` and
// `--calibration FILE` still win over the shipped models, and a cost model
// read from them needs no data root (cost/registry.cpp).
#pragma once

#include <string>

namespace embshard {

// The environment variable naming the data root ahead of everything else.
inline constexpr const char* kDataDirEnv = "EMBSHARD_DATA_DIR";
// The file beside a binary naming its data root (one line).
inline constexpr const char* kDataDirFile = "embshard-data-dir";

// The data root for this process (see above); throws when none resolves.
std::string data_root();

// data_root() with its inputs as parameters: `env_value` the environment
// variable's value ("": unset), `anchor_dir` the folder of the binary holding
// the library ("": unknown). A root named by the variable or the file must
// hold models/. Returns the root as an absolute, normalised path.
std::string resolve_data_root(const std::string& env_value, const std::string& anchor_dir);

// The folder of the binary or shared object holding the library's code: the
// executable for a program linked with the static library, the module for a
// Python extension. Symbolic links resolved; "" when the system cannot say.
std::string library_dir();

}  // namespace embshard
