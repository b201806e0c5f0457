// Eval records (`embshard eval`'s JSON lines, gzip'd or not): read as
// `eval-report` reads them, alone and beside a copy of themselves (two sets),
// with the report as text, JSON and SVG.
// fuzz-max-len: 16384
#include "embshard/eval/combine.h"
#include "fuzz/fuzz_support.h"

namespace {

namespace fuzz = embshard::fuzz;

void report(const std::vector<std::string>& paths) {
  const embshard::CombinedEval c = embshard::combine_eval(paths, {}, "");
  embshard::combined_eval_report(c);
  embshard::combined_eval_json(c).dump();
  embshard::combined_eval_svg(c);
  embshard::eval_svg(c.pooled, c.devices);
}

}  // namespace

EMBSHARD_FUZZ_TARGET(eval_records, nullptr) {
  const std::string a = fuzz::write_scratch("eval_a.jsonl", data, size);
  const std::string b = fuzz::write_scratch("eval_b.jsonl", data, size);
  fuzz::expect_clean("load_eval_set", [&] { embshard::load_eval_set(a); });
  fuzz::expect_clean("combine_eval (one set)", [&] { report({a}); });
  fuzz::expect_clean("combine_eval (two sets)", [&] { report({a, b}); });
}
