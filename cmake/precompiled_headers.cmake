# Precompiled headers: the heavy header-only libraries (nlohmann_json, fmt,
# CLI11) are parsed once per target instead of once per file, which roughly
# halves a fresh build on two cores (the quick start's first plan).
option(EMBSHARD_PCH "Precompile the common headers of the library and the CLI" ON)
if(EMBSHARD_PCH)
  set(embshard_pch_headers <algorithm> <cmath> <cstdint> <filesystem> <map> <memory>
      <string> <vector> <fmt/format.h> <fmt/ranges.h> <nlohmann/json.hpp>)
  # The layers' libraries share one (compiled with embshard_util's flags,
  # which the layers above add nothing to that the headers read).
  foreach(target embshard_util embshard_mpi embshard_cli_common)
    set(headers ${embshard_pch_headers})
    if(target STREQUAL "embshard_cli_common")
      list(APPEND headers <CLI/CLI.hpp>)
    endif()
    foreach(header ${headers})
      # C++ only: nvcc compiles the CUDA sources of the same target.
      target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
    endforeach()
  endforeach()
  foreach(target ${EMBSHARD_LAYER_TARGETS})
    if(NOT target STREQUAL "embshard_util")
      target_precompile_headers(${target} REUSE_FROM embshard_util)
    endif()
  endforeach()
endif()
