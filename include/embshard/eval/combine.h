// Evaluation runs taken together: several `eval` record files (task sets
// drawn from other pools or seeds, run at other times) read as one report,
// nothing measured again.
//
// A set's ratio to the best baseline moves by a few points from pool to pool
// and from run to run, more than its tasks' own interval says, so a target
// is judged on many sets at once: the mean of the sets' ratios, with its
// interval over the sets (Student's t: the honest width for a handful).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/eval/eval.h"
#include "embshard/util/statistics.h"

namespace embshard {

struct EvalSet {
  std::string path;
  nlohmann::json header;
  std::vector<nlohmann::json> records;
};

// Reads an `eval` record file, finished or still being written (its whole
// records). Error naming the file and field when it is not one: no header,
// another format, no devices, algos or comm.
EvalSet load_eval_set(const std::string& path);

struct CombinedEval {
  std::vector<std::string> algos;  // compared: in every file
  std::string against;             // the algorithm ratios are to ("": the best baseline)
  int devices = 0;
  std::string comm_source;  // the first file's
  std::vector<EvalSet> sets;
  std::vector<EvalSummary> per_set;  // each file alone, on `algos`
  EvalSummary pooled;                // every task of every file
  // The ratios' reference, an index in `algos`: per set (-1: the set has no
  // task every algorithm planned), and for the pool.
  std::vector<int> set_reference;
  int pooled_reference = -1;
  // [set][algorithm]: its mean cost over the set's reference's (0: none).
  std::vector<std::vector<double>> set_ratio;
  int sets_counted = 0;  // sets with a task every algorithm planned
  // Per algorithm: the mean of the sets' ratios with its 95% interval over
  // the sets (mean_confidence_interval; low = high = mean with one set), and
  // the pooled means' ratio (every task of every set: a ratio of sums, so a
  // set of dearer tasks weighs more).
  std::vector<MeanInterval> set_mean;
  std::vector<double> pooled_ratio;
  std::vector<std::string> notes;  // what the reader should know (same tasks twice, ...)
};

// The files taken together on `algos` (empty: every algorithm in every file,
// in the first file's order), each ratio to `against` (one of them; "": each
// set's best baseline, and the pooled best baseline for the pool). Error
// naming the file and field when the files cannot be compared: another
// device count, format version or run's sharding types, predicted-only
// beside measured, communication measured in one and modelled in another, an
// algorithm missing from one or named twice, a file given twice; and when
// there is nothing to divide by (`against` not among the algorithms, or no
// baseline among them and no `against`). What combines but may mislead
// (the same tasks twice, another model or machine or number of passes, a set
// without a task) is a note.
CombinedEval combine_eval(const std::vector<std::string>& paths,
                          const std::vector<std::string>& algos, const std::string& against = "");

// The per-set table (each set's ratios to its reference), the mean of the
// sets' ratios with its interval and the pooled ratios, the notes, then the
// pooled report (eval_report's).
std::string combined_eval_report(const CombinedEval& combined);
// {"against", "devices", "sets_counted", "notes", "sets": [{"path", "tasks",
//  "reference", "ratios": {algo: r}}], "mean_of_sets": {algo: {"ratio",
//  "ci95"}}, "pooled": eval_summary_json(...) with "reference" and each
//  algorithm's "ratio"}.
nlohmann::json combined_eval_json(const CombinedEval& combined);
// One row per algorithm: a dot per set at its ratio, a bar at the mean of the
// sets' ratios, a whisker over its interval.
std::string combined_eval_svg(const CombinedEval& combined);

}  // namespace embshard
