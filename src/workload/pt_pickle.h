// A small pickle reader: enough of the protocol to read the data.pkl record of
// a torch.save'd file (protocol 2, plus FRAME/MEMOIZE/STACK_GLOBAL/BINUNICODE8
// from newer picklers) into a value tree. It never executes anything: GLOBALs
// become names, REDUCE/NEWOBJ become "call" nodes that the caller interprets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace embshard::pt {

struct PyValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kTuple, kList, kDict, kGlobal,
                    kPersId, kCall };
  Kind kind = Kind::kNone;
  int64_t i = 0;          // kBool, kInt
  double f = 0;           // kFloat
  std::string s;          // kStr, kBytes, kGlobal ("module.name")
  // kTuple/kList: elements; kDict: key, value, key, value...;
  // kPersId: {pid}; kCall: {callable, args, build-state...}.
  // Values may be shared (memo) or even cyclic: they are owned by a Pickle.
  std::vector<const PyValue*> items;

  bool is(Kind k) const { return kind == k; }
};

// "int", "tuple", ... for error messages.
const char* kind_name(PyValue::Kind kind);
// A short one-line rendering of a value for error messages (depth-limited).
std::string describe(const PyValue& value);

struct Pickle {
  std::vector<std::unique_ptr<PyValue>> arena;  // owns every value
  const PyValue* root = nullptr;
};

// Parses a pickle. `context` names the file and record for errors; every error
// names the opcode and its byte offset in the record.
Pickle parse_pickle(std::string_view data, const std::string& context);

}  // namespace embshard::pt
