// Evaluation runs taken together: several `eval` record files (task sets
// drawn from other pools or seeds, run at other times) read as one report,
// nothing measured again.
//
// A set's ratio to the best baseline moves by a few points from pool to pool
// and from run to run, more than its tasks' own interval says; a target is
// judged on many sets at once. The pooled figures are the means over every
// task of every set; their interval comes from resampling whole sets, so it
// covers what moves a set's tasks together (bootstrap_grouped_ratio_interval).
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
// records). Error naming the file when it is not one: no header, another
// format, no devices.
EvalSet load_eval_set(const std::string& path);

struct CombinedEval {
  std::vector<std::string> algos;  // compared: in every file
  std::string against;             // the algorithm ratios are to ("": the best baseline)
  int devices = 0;
  std::string comm_source;  // the first file's
  std::vector<EvalSet> sets;
  std::vector<EvalSummary> per_set;  // each file alone, on `algos`
  EvalSummary pooled;                // every task of every file
  // The ratios' reference: per set, and pooled (an index in `algos`; -1:
  // none, no baseline or no task).
  std::vector<int> set_reference;
  int pooled_reference = -1;
  // [set][algorithm]: its mean cost over the set's reference's (0: none).
  std::vector<std::vector<double>> set_ratio;
  // Per algorithm: the pooled means' ratio to the pooled reference's, its
  // 95% interval over the sets (sets resampled whole; 0 and 0: fewer than
  // two sets with a task), and the mean of the sets' own ratios (0: none).
  std::vector<double> pooled_ratio;
  std::vector<RatioInterval> set_interval;
  std::vector<double> mean_set_ratio;
  std::vector<std::string> notes;  // what the reader should know (same tasks twice, ...)
};

// The files taken together on `algos` (empty: every algorithm in every file,
// in the first file's order), each ratio to `against` (one of them; "": each
// set's best baseline, and the pooled best baseline for the pool). Error
// naming the file and field when the files cannot be compared: another
// device count, predicted-only beside measured, communication measured in
// one and modelled in another, an algorithm missing from one, a file given
// twice; and when `against` is not among the algorithms.
CombinedEval combine_eval(const std::vector<std::string>& paths,
                          const std::vector<std::string>& algos, const std::string& against = "");

// The per-set table (each set's ratios to its reference), the pooled ratios
// with the sets' interval, then the pooled report (eval_report's).
std::string combined_eval_report(const CombinedEval& combined);
// {"against", "devices", "notes", "sets": [{"path", "tasks", "reference",
//  "ratios": {algo: r}}], "pooled": eval_summary_json(...) with "reference"
//  and each algorithm's "ratio", "ratio_ci95_sets" and "mean_set_ratio"}.
nlohmann::json combined_eval_json(const CombinedEval& combined);
// One row per algorithm: a dot per set at its ratio to its reference, the
// pooled ratio as a bar with the sets' interval.
std::string combined_eval_svg(const CombinedEval& combined);

}  // namespace embshard
