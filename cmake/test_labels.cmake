# ctest labels, one per test: `ctest -L unit` runs the quick tests alone
# (docs/architecture.md, "Tests").
#   unit   in-process tests of the library that start no process
#   cli    tests that run the CLI or another program (a gtest name holding "Cli")
#   mpi    tests that start mpirun (a gtest name holding "Mpi")
#   torch  tests that need libtorch or TorchRec (test_*_torch.cpp, the TorchRec tests)
#   slow   the slowest tests of any kind (about 5 s and more in a ctest run), not guarded
# A unit test that starts a process fails (tests/test_util.h, run_shell):
# EMBSHARD_TEST_LABEL in its environment names its kind.
include(GoogleTest)

# The slow gtest cases (the other tests are labelled where they are added).
set(EMBSHARD_SLOW_TESTS
    Ranking.MeasuredModelAgainstItselfAlwaysHits
    EvalPasses.EachDeviceCountsAtTheMedianOfItsComputePasses
    Eval.RunsResumesAndSummarises
    Eval.UnderMpirunMeasuresTheAllToAlls
    FitFineTune.FollowsAMachineThatRanksShardsDifferently
    FitFineTune.JudgesThePiecesAgain
    ReferenceScale.EvalMeasuresOnTheModelsScale
    ReferenceScale.EvalScalesOnAnchors
    Anchors.MeasuredAnchorsAreTheSameShardsInEveryRun
    Calibrate.QuickRunFitsRealProbesWithinSeconds
    MeasuredModel.AFreshPassMeasuresEachSetOnceMore
    Synth.CalibratedAtOtherSizes
    ComputeBench.CliSurvivesKillNine
    PlanCli.VerifiesInThreeRoundsByDefault
    NeuralTrain.CliTrainAndValidate
    Both/TrainKinds.*)

# gtest_discover_tests for one test binary, its cases labelled by name.
function(embshard_discover_tests target)
  string(REPLACE ";" ":" slow "${EMBSHARD_SLOW_TESTS}")
  # Disjoint filters (gtest's POSITIVE-NEGATIVE): every case is discovered once.
  if(target MATCHES "_torch$")
    set(filters torch "*-${slow}")
  else()
    set(filters unit "*-*Cli*:*Mpi*:${slow}" cli "*Cli*-*Mpi*:${slow}" mpi "*Mpi*-${slow}")
  endif()
  list(APPEND filters slow "${slow}")
  while(filters)
    list(POP_FRONT filters kind filter)
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 TEST_FILTER "${filter}"
                         PROPERTIES TIMEOUT 600 LABELS ${kind}
                                    ENVIRONMENT EMBSHARD_TEST_LABEL=${kind})
  endwhile()
endfunction()
