# Precompiled headers: the heavy header-only libraries (nlohmann_json, fmt,
# CLI11) are parsed once per target instead of once per file, which roughly
# halves a fresh build on two cores (the quick start's first plan).
option(EMBSHARD_PCH "Precompile the common headers of the library and the CLI" ON)
if(EMBSHARD_PCH)
  set(embshard_pch_headers <algorithm> <cmath> <cstdint> <filesystem> <map> <memory>
      <string> <vector> <fmt/format.h> <fmt/ranges.h> <nlohmann/json.hpp>)
  foreach(target embshard embshard_mpi embshard_cli_common)
    set(headers ${embshard_pch_headers})
    if(target STREQUAL "embshard_cli_common")
      list(APPEND headers <CLI/CLI.hpp>)
    endif()
    foreach(header ${headers})
      # C++ only: nvcc compiles the CUDA sources of the same target.
      target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
    endforeach()
  endforeach()
endif()
