// What planning hands back: the plan, its predicted costs, the lower bound on
// any plan's cost under the same model, and how long the search took.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "embshard/plan/explain.h"
#include "embshard/plan/plan.h"
#include "embshard/plan/predict.h"

namespace embshard {

// A lower bound on the cost of every plan of a task under one cost model, the
// larger of
//   the costliest table's cheapest piece alone (over its forms: narrowest
//     column piece, row block, replica) + the least communication of the
//     device holding it (the all-to-all at zero load, no delay, and a row
//     block's or replica's own collectives), and
//   the mean device: (all tables fused into one call + the communication of
//     every device at evenly spread dim sums, no delays) / devices;
// with hosts, each device's communication at least the least time any
// host's link takes in every plan (host_link_floor_ms).
// Valid when the model's compute is monotone (adding a table never makes a
// device cheaper) and fusing never costs more than running apart (the cost of
// a union of shards <= the sum of their costs), and communication grows with
// the dim sum and the delay, its sum over devices least when the dims are
// spread evenly (convex). docs/guide.md explains the terms; search/planner.h
// computes it.
struct LowerBound {
  // The costliest table's cheapest piece and its device's least
  // communication (where no table's piece can decide total_ms, some table's).
  double piece_ms = 0;
  double comm_ms = 0;
  double work_ms = 0;        // all tables fused, divided by the devices
  double mean_comm_ms = 0;   // mean device communication (see above)
  double total_ms() const { return std::max(piece_ms + comm_ms, work_ms + mean_comm_ms); }
};

// A verification step: the search's best few distinct plans, each predicted
// by the cost model and measured for real (`truth`: measured compute, and
// communication measured or modelled), and the measured fastest chosen.
struct VerifiedCandidate {
  Plan plan;
  // predicted by the model, not the corrected one; measured: the fastest pass
  PlanPrediction predicted, measured;
  int round = 0;  // the verification round that proposed it
  std::string source;  // the planner that proposed it: the search's or a rival's
  // Each pass's measured cost (compute is measured once, so the passes differ
  // in communication), and the figure the choice is made on: the mean of
  // their fastest half (one pass: its cost).
  std::vector<double> passes_ms;
  double measured_ms = 0;
  // A leader's further measurements, compute afresh each time
  // (VerifyOptions::leaders); its measured_ms is then the median of those
  // and its passes' figure.
  std::vector<double> fresh_ms;
};
struct Verification {
  // The search's order (best predicted first), round after round.
  std::vector<VerifiedCandidate> candidates;
  int chosen = 0;                             // the measured fastest
  std::string truth;                          // what measured them
  double verify_s = 0;  // every measurement, the tables alone too
  int rounds = 1;  // run: fewer than asked where a round found no new plan
  int comm_passes = 1;  // measurements of each candidate
  int leaders = 0;      // candidates measured afresh and chosen among (0: none)
  // Each table measured alone before the first search (empty: none), and
  // the seconds that took.
  struct TableAlone {
    std::string name;
    double predicted_ms = 0, measured_ms = 0;
  };
  std::vector<TableAlone> tables;
  double tables_s = 0;
  // VerifyOptions::rivals that found no plan, each with its error.
  std::vector<std::string> rivals_failed;
};

struct PlanResult {
  std::string algorithm;
  std::string cost_model;
  ModelSource model_source;               // what the cost model was measured on
  std::vector<std::string> extrapolated;  // how this task leaves it (empty: it does not)
  Plan plan;
  PlanPrediction predicted;
  LowerBound bound;
  double search_s = 0;
  std::string search_summary;  // Planner::search_summary()
  std::optional<Verification> verification;  // plan = the chosen candidate's
  std::vector<Decision> explanation;          // with --explain: why, table by table
  std::vector<std::string> floor_warnings;    // predicted against the physical floors
  double gap() const {  // (cost - bound) / bound
    const double lb = bound.total_ms();
    return lb > 0 ? (predicted.cost_ms - lb) / lb : 0.0;
  }
};

}  // namespace embshard
