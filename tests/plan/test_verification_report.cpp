// The verification report: how far the measured fastest is below the
// search's own pick, the rounds, and the runner-up against the leaders' span.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embshard/plan/report.h"
#include "embshard/plan/result.h"

namespace embshard {
namespace {

// The verification report says how far the measured fastest is below the
// search's own pick, and says so in words when they are the same plan.
// Two measured candidates: the search's own pick (20 ms) and a faster one.
Verification two_candidates() {
  Verification v;
  v.truth = "test";
  v.candidates.resize(2);
  v.candidates[0].predicted.cost_ms = 10;
  v.candidates[0].measured_ms = 20;
  v.candidates[1].predicted.cost_ms = 11;
  v.candidates[1].measured_ms = 15;
  v.chosen = 1;
  return v;
}

TEST(Verification, ReportSaysWhichPlanWasFastest) {
  Verification v = two_candidates();
  EXPECT_NE(verification_report(v).find("chosen: candidate 1, 15.000 ms measured: 25.0% below "
                                        "the search's own pick"),
            std::string::npos)
      << verification_report(v);
  v.chosen = 0;
  v.candidates[1].measured_ms = 25;
  EXPECT_NE(verification_report(v).find("chosen: candidate 0, 20.000 ms measured: the search's "
                                        "own pick measured fastest"),
            std::string::npos)
      << verification_report(v);
  // Rounds: said in the title, and each candidate's round (1-based) in its row.
  EXPECT_NE(verification_report(v).find("verification: the search's 2 best plans, measured"),
            std::string::npos);
  v.rounds = 3;
  v.candidates[1].round = 2;
  const std::string three = verification_report(v);
  EXPECT_NE(three.find("verification: 2 plans from 3 rounds of search"), std::string::npos)
      << three;
  std::istringstream lines(three);
  std::string line, round;
  while (std::getline(lines, line) && line.rfind("1 ", 0) != 0) {
  }
  std::istringstream(line) >> round >> round;
  EXPECT_EQ(round, "3") << three;
  // The runner-up among every candidate, its margin over the chosen.
  EXPECT_NE(three.find("runner-up: candidate 1, 25.0% above the chosen\n"), std::string::npos)
      << three;
}

// With leaders: the runner-up among them, and its margin against the span of
// a leader's own measurements (the median over the leaders); without
// leaders no span; a rival that found no plan is said.
TEST(Verification, RunnerUpAmongTheLeadersAgainstTheirSpan) {
  Verification v = two_candidates();
  v.rounds = 3;
  v.candidates[1].round = 2;
  v.candidates.resize(4);
  v.leaders = 2;
  v.chosen = 2;
  v.candidates[2].measured_ms = 10;  // figures 9.8, 10, 10.4: span 6%
  v.candidates[2].passes_ms = {10.4, 10.6};
  v.candidates[2].fresh_ms = {9.8, 10};
  v.candidates[3].measured_ms = 10.3;  // figures 10.1, 10.3, 10.5: span 3.88%
  v.candidates[3].passes_ms = {10.1};
  v.candidates[3].fresh_ms = {10.5, 10.3};
  v.candidates[1].measured_ms = 10.1;  // lower, but no leader
  const std::string tie = verification_report(v);
  EXPECT_NE(tie.find("runner-up: candidate 3, 3.0% above the chosen; a leader's own measurements "
                     "span 4.9% (median over the leaders): a tie within the measurement"),
            std::string::npos)
      << tie;
  const std::optional<RunnerUp> next = runner_up(v);
  ASSERT_TRUE(next.has_value());
  const nlohmann::json j = runner_up_json(*next);
  EXPECT_EQ(j["candidate"], 3);
  EXPECT_NEAR(j["lead_pct"].get<double>(), 3.0, 1e-9);
  EXPECT_NEAR(j["span_pct"].get<double>(), (6.0 + 0.4 / 10.3 * 100) / 2, 1e-9);
  EXPECT_TRUE(j["tie"].get<bool>());
  v.candidates[3].measured_ms = 10.6;
  EXPECT_NE(verification_report(v).find("6.0% above the chosen; a leader's own measurements span "
                                        "4.9% (median over the leaders): a lead beyond it"),
            std::string::npos)
      << verification_report(v);
  v.candidates.resize(2);
  v.leaders = 0;
  v.chosen = 0;
  // Without leaders no span: the JSON has the lead alone.
  EXPECT_FALSE(runner_up_json(*runner_up(v)).contains("tie"));
  v.candidates.resize(1);
  EXPECT_FALSE(runner_up(v).has_value());  // one plan measured: no runner-up
  EXPECT_EQ(verification_report(v).find("runner-up"), std::string::npos);
  v.candidates.resize(2);
  v.candidates[1].measured_ms = 25;
  // A rival that found no plan: the report says why.
  v.rivals_failed = {"torchrec: no room for table 't3'"};
  EXPECT_NE(verification_report(v).find("no rival plan: torchrec: no room for table 't3'"),
            std::string::npos)
      << verification_report(v);
}

}  // namespace
}  // namespace embshard
