# The docs' own tests (tests/docs/): docs/cli.md against the CLI's --help, and
# every command of docs/guide.md run in order. Included from the root
# CMakeLists.txt after python/, whose Python (Python3_EXECUTABLE) the guide's
# Python blocks need: the one the extension is built for.

# The Python the package is built for (python/CMakeLists.txt), else any python3.
if(Python3_EXECUTABLE)
  set(EMBSHARD_DOCS_PYTHON3 ${Python3_EXECUTABLE})
else()
  find_program(EMBSHARD_DOCS_PYTHON3 NAMES python3)
endif()
if(NOT EMBSHARD_DOCS_PYTHON3)
  message(STATUS "python3 not found: the docs tests are skipped")
  return()
endif()

# Every command and option of `embshard --help` has its place in docs/cli.md.
add_test(NAME docs_cli_reference
         COMMAND ${EMBSHARD_DOCS_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/docs/check_cli_reference.py
                 --cli $<TARGET_FILE:embshard_cli> --doc ${PROJECT_SOURCE_DIR}/docs/cli.md)
set_tests_properties(docs_cli_reference PROPERTIES TIMEOUT 120 LABELS cli)

# docs/guide.md's sh and python blocks, with the build's binaries and Python
# package (about a minute on 2 cores: it measures plans and fits a model).
if(EMBSHARD_PYTHON AND Python3_EXECUTABLE)
  add_test(NAME docs_guide
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/docs/run_guide.py
                   --bin-dir $<TARGET_FILE_DIR:embshard_cli> --python-dir ${PROJECT_BINARY_DIR}/python
                   --repo ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs_guide PROPERTIES TIMEOUT 600 LABELS slow)
else()
  message(STATUS "Python extension not built (EMBSHARD_PYTHON=OFF): docs_guide is skipped")
endif()
