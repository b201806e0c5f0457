# Fuzzing the readers (tests/fuzz/README.md; docs/architecture.md, "Fuzzing the readers").
# Included from the root CMakeLists.txt after the tests.
#
# Every build: test_fuzz_regressions (a test_*.cpp the test loop above has
# made) gets the fuzz targets' entry functions, and replays through them
# every seed of tests/fuzz/corpus/ and every kept finding of
# tests/fuzz/regressions/; the Python plan reader gets its mutation test.
#
# EMBSHARD_FUZZ=ON (clang only; scripts/fuzz.sh configures build-fuzz/ so):
# one libFuzzer binary per reader, fuzz_<target>, with the library
# instrumented for libFuzzer's coverage and built with ASan+UBSan.
option(EMBSHARD_FUZZ "Build a libFuzzer binary per reader (clang; ASan+UBSan)" OFF)

set(EMBSHARD_FUZZ_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz)
file(GLOB EMBSHARD_FUZZ_TARGET_SOURCES CONFIGURE_DEPENDS ${EMBSHARD_FUZZ_DIR}/targets/*.cpp)
set(EMBSHARD_FUZZ_DEFINITIONS
    EMBSHARD_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    EMBSHARD_FUZZ_DIR="${EMBSHARD_FUZZ_DIR}")

if(TARGET test_fuzz_regressions)
  target_sources(test_fuzz_regressions PRIVATE ${EMBSHARD_FUZZ_TARGET_SOURCES}
                                               ${EMBSHARD_FUZZ_DIR}/fuzz_support.cpp)
  target_compile_definitions(test_fuzz_regressions PRIVATE EMBSHARD_FUZZ_DIR="${EMBSHARD_FUZZ_DIR}")
endif()

# The Python plan reader (python/embshard/plan_file.py), pure Python: seeded
# random mutations of the plan seeds, each read back; only PlanError may come out.
find_program(EMBSHARD_FUZZ_PYTHON3 NAMES python3)
if(EMBSHARD_FUZZ_PYTHON3)
  add_test(NAME python_plan_file_mutations
           COMMAND ${EMBSHARD_FUZZ_PYTHON3} ${EMBSHARD_FUZZ_DIR}/plan_file_mutations.py
                   --repo ${PROJECT_SOURCE_DIR} --iterations 3000 --seed 1)
  set_tests_properties(python_plan_file_mutations PROPERTIES TIMEOUT 300 LABELS cli)
endif()

# The seed writer (tests/fuzz/make_seeds.cpp), built on demand in any build:
# rewrites the generated seeds of tests/fuzz/corpus/.
add_executable(embshard_fuzz_make_seeds EXCLUDE_FROM_ALL ${EMBSHARD_FUZZ_DIR}/make_seeds.cpp
                                                         ${EMBSHARD_FUZZ_DIR}/fuzz_support.cpp)
target_include_directories(embshard_fuzz_make_seeds PRIVATE ${PROJECT_SOURCE_DIR}/src
                                                            ${PROJECT_SOURCE_DIR}/tests)
target_compile_definitions(embshard_fuzz_make_seeds PRIVATE ${EMBSHARD_FUZZ_DEFINITIONS})
target_link_libraries(embshard_fuzz_make_seeds PRIVATE embshard ZLIB::ZLIB)

if(NOT EMBSHARD_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "EMBSHARD_FUZZ=ON needs clang and its libFuzzer runtime (Debian: clang-14, "
                      "libclang-rt-14-dev): configure with CC=clang-14 CXX=clang++-14, as "
                      "scripts/fuzz.sh does")
endif()

# The library's coverage is what libFuzzer steers by; every reader runs under
# ASan and UBSan, a UB report ending the run as a crash does.
set(EMBSHARD_FUZZ_COMPILE_FLAGS -fsanitize=fuzzer-no-link,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer -gline-tables-only)
foreach(layer ${EMBSHARD_LAYER_TARGETS})
  target_compile_options(${layer} PRIVATE ${EMBSHARD_FUZZ_COMPILE_FLAGS})
endforeach()
target_link_options(embshard INTERFACE -fsanitize=address,undefined)

add_library(embshard_fuzz_support OBJECT ${EMBSHARD_FUZZ_DIR}/fuzz_support.cpp)
target_include_directories(embshard_fuzz_support PUBLIC ${PROJECT_SOURCE_DIR}/src
                                                        ${PROJECT_SOURCE_DIR}/tests)
target_compile_options(embshard_fuzz_support PUBLIC ${EMBSHARD_FUZZ_COMPILE_FLAGS})
target_compile_definitions(embshard_fuzz_support PUBLIC ${EMBSHARD_FUZZ_DEFINITIONS})
target_link_libraries(embshard_fuzz_support PUBLIC embshard ZLIB::ZLIB)

set(EMBSHARD_FUZZ_TARGETS "")
foreach(source ${EMBSHARD_FUZZ_TARGET_SOURCES})
  get_filename_component(name ${source} NAME_WE)
  # libfuzzer_main.cpp: LLVMFuzzerTestOneInput and the custom mutator, around
  # the one target the binary holds.
  add_executable(fuzz_${name} ${source} ${EMBSHARD_FUZZ_DIR}/libfuzzer_main.cpp)
  target_link_libraries(fuzz_${name} PRIVATE embshard_fuzz_support)
  target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  list(APPEND EMBSHARD_FUZZ_TARGETS fuzz_${name})
endforeach()
add_custom_target(fuzz_targets DEPENDS ${EMBSHARD_FUZZ_TARGETS})

