#include "workload/pt_pickle.h"

#include <cstring>
#include <unordered_map>

#include "embshard/util/error.h"

namespace embshard::pt {
namespace {

using Kind = PyValue::Kind;

const char* opcode_name(uint8_t op) {
  switch (op) {
    case 0x80: return "PROTO";
    case 0x95: return "FRAME";
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 0x8c: return "SHORT_BINUNICODE";
    case 'X': return "BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 'U': return "SHORT_BINSTRING";
    case 'T': return "BINSTRING";
    case 'C': return "SHORT_BINBYTES";
    case 'B': return "BINBYTES";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 0x8a: return "LONG1";
    case 'N': return "NONE";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 'G': return "BINFLOAT";
    case '(': return "MARK";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case ')': return "EMPTY_TUPLE";
    case ']': return "EMPTY_LIST";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    case '}': return "EMPTY_DICT";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 0x94: return "MEMOIZE";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 0x81: return "NEWOBJ";
    case '.': return "STOP";
    // Known to pickle but not to this reader; named for the error message.
    case 'I': return "INT";
    case 'L': return "LONG";
    case 0x8b: return "LONG4";
    case 'F': return "FLOAT";
    case 'V': return "UNICODE";
    case 'S': return "STRING";
    case 'P': return "PERSID";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case 'o': return "OBJ";
    case 'i': return "INST";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'g': return "GET";
    case 'p': return "PUT";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "unknown";
  }
}

class Parser {
 public:
  Parser(std::string_view data, const std::string& context) : data_(data), context_(context) {}

  Pickle run() {
    while (true) {
      ES_CHECK(pos_ < data_.size(), "{}: truncated pickle: no STOP opcode before byte {}",
               context_, data_.size());
      op_at_ = pos_;
      op_ = static_cast<uint8_t>(data_[pos_++]);
      if (op_ == '.') break;
      step();
    }
    ES_CHECK(stack_.size() == 1 && marks_.empty(),
             "{}: STOP at byte {} with {} values and {} marks on the stack, expected 1 value",
             context_, op_at_, stack_.size(), marks_.size());
    pickle_.root = stack_.back();
    return std::move(pickle_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    ES_THROW("{}: pickle opcode {} (0x{:02x}) at byte {}: {}", context_, opcode_name(op_), op_,
             op_at_, what);
  }

  const char* take(size_t n) {
    if (n > data_.size() - pos_) {
      fail(fmt::format("truncated: needs {} bytes, {} left", n, data_.size() - pos_));
    }
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T take_le() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));  // little-endian host
    return value;
  }
  std::string take_line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos) fail("unterminated text argument");
    std::string line(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return line;
  }

  PyValue* make(Kind kind) {
    pickle_.arena.push_back(std::make_unique<PyValue>());
    pickle_.arena.back()->kind = kind;
    return pickle_.arena.back().get();
  }
  void push_int(int64_t v) { make_push(Kind::kInt)->i = v; }
  PyValue* make_push(Kind kind) {
    PyValue* v = make(kind);
    stack_.push_back(v);
    return v;
  }
  PyValue* pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("stack underflow");
    PyValue* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  PyValue* top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("stack underflow");
    return stack_.back();
  }
  // Pops everything above the last MARK, and the mark.
  std::vector<const PyValue*> pop_to_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<const PyValue*> items(stack_.begin() + mark, stack_.end());
    stack_.resize(mark);
    return items;
  }
  PyValue* pop_kind(Kind kind, const char* what) {
    PyValue* v = pop();
    if (!v->is(kind)) fail(fmt::format("{} must be a {}, found {}", what, kind_name(kind),
                                       kind_name(v->kind)));
    return v;
  }
  void push_tuple(std::vector<const PyValue*> items) {
    make_push(Kind::kTuple)->items = std::move(items);
  }
  void push_string(Kind kind, size_t n) { make_push(kind)->s.assign(take(n), n); }
  void memo_put(uint64_t key) { memo_[key] = top(); }
  void memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail(fmt::format("memo key {} was never stored", key));
    stack_.push_back(it->second);
  }

  void step() {
    switch (op_) {
      case 0x80: {
        const uint8_t proto = take_le<uint8_t>();
        if (proto < 2 || proto > 5) fail(fmt::format("protocol {} not supported (2..5)", proto));
        break;
      }
      case 0x95: take_le<uint64_t>(); break;  // frames only group opcodes
      case 'c': {
        PyValue* g = make_push(Kind::kGlobal);
        g->s = take_line();
        g->s.push_back('.');
        g->s.append(take_line());
        break;
      }
      case 0x93: {
        PyValue* name = pop_kind(Kind::kStr, "STACK_GLOBAL name");
        PyValue* module = pop_kind(Kind::kStr, "STACK_GLOBAL module");
        PyValue* g = make_push(Kind::kGlobal);
        g->s = module->s;
        g->s.push_back('.');
        g->s.append(name->s);
        break;
      }
      case 0x8c: push_string(Kind::kStr, take_le<uint8_t>()); break;
      case 'X': push_string(Kind::kStr, take_le<uint32_t>()); break;
      case 0x8d: push_string(Kind::kStr, take_le<uint64_t>()); break;
      case 'U': push_string(Kind::kStr, take_le<uint8_t>()); break;
      case 'T': push_string(Kind::kStr, take_le<uint32_t>()); break;
      case 'C': push_string(Kind::kBytes, take_le<uint8_t>()); break;
      case 'B': push_string(Kind::kBytes, take_le<uint32_t>()); break;
      case 'J': push_int(take_le<int32_t>()); break;
      case 'K': push_int(take_le<uint8_t>()); break;
      case 'M': push_int(take_le<uint16_t>()); break;
      case 0x8a: {
        const uint8_t n = take_le<uint8_t>();
        if (n > 8) fail(fmt::format("a {}-byte integer does not fit int64", n));
        const auto* bytes = reinterpret_cast<const uint8_t*>(take(n));
        uint64_t v = 0;
        for (int k = 0; k < n; ++k) v |= uint64_t{bytes[k]} << (8 * k);
        if (n > 0 && n < 8 && (bytes[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign
        push_int(static_cast<int64_t>(v));
        break;
      }
      case 'N': make_push(Kind::kNone); break;
      case 0x88: make_push(Kind::kBool)->i = 1; break;
      case 0x89: make_push(Kind::kBool)->i = 0; break;
      case 'G': {
        uint64_t bits = 0;  // big-endian IEEE double
        const auto* b = reinterpret_cast<const uint8_t*>(take(8));
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | b[k];
        std::memcpy(&make_push(Kind::kFloat)->f, &bits, 8);
        break;
      }
      case '(': marks_.push_back(stack_.size()); break;
      case 't': push_tuple(pop_to_mark()); break;
      case 0x85: case 0x86: case 0x87: {
        const int n = op_ - 0x84;
        std::vector<const PyValue*> items(n);
        for (int k = n - 1; k >= 0; --k) items[k] = pop();
        push_tuple(std::move(items));
        break;
      }
      case ')': make_push(Kind::kTuple); break;
      case ']': make_push(Kind::kList); break;
      case '}': make_push(Kind::kDict); break;
      case 'a': {
        const PyValue* item = pop();
        PyValue* list = top();
        if (!list->is(Kind::kList)) fail(fmt::format("APPEND to a {}", kind_name(list->kind)));
        list->items.push_back(item);
        break;
      }
      case 'e': {
        auto items = pop_to_mark();
        PyValue* list = top();
        if (!list->is(Kind::kList)) fail(fmt::format("APPENDS to a {}", kind_name(list->kind)));
        list->items.insert(list->items.end(), items.begin(), items.end());
        break;
      }
      case 's': {
        const PyValue* value = pop();
        const PyValue* key = pop();
        PyValue* dict = top();
        if (!dict->is(Kind::kDict)) fail(fmt::format("SETITEM on a {}", kind_name(dict->kind)));
        dict->items.insert(dict->items.end(), {key, value});
        break;
      }
      case 'u': {
        auto items = pop_to_mark();
        if (items.size() % 2 != 0) fail("odd number of keys and values");
        PyValue* dict = top();
        if (!dict->is(Kind::kDict)) fail(fmt::format("SETITEMS on a {}", kind_name(dict->kind)));
        dict->items.insert(dict->items.end(), items.begin(), items.end());
        break;
      }
      case 'q': memo_put(take_le<uint8_t>()); break;
      case 'r': memo_put(take_le<uint32_t>()); break;
      case 0x94: memo_put(memo_.size()); break;
      case 'h': memo_get(take_le<uint8_t>()); break;
      case 'j': memo_get(take_le<uint32_t>()); break;
      case 'Q': {
        const PyValue* pid = pop();
        make_push(Kind::kPersId)->items = {pid};
        break;
      }
      case 'R': case 0x81: {
        const PyValue* args = pop_kind(Kind::kTuple, "arguments");
        const PyValue* callable = pop();
        make_push(Kind::kCall)->items = {callable, args};
        break;
      }
      case 'b': {
        const PyValue* state = pop();
        PyValue* object = top();
        if (!object->is(Kind::kCall)) fail(fmt::format("BUILD on a {}", kind_name(object->kind)));
        object->items.push_back(state);
        break;
      }
      default:
        fail("opcode not supported by this reader");
    }
  }

  std::string_view data_;
  const std::string& context_;
  size_t pos_ = 0, op_at_ = 0;
  uint8_t op_ = 0;
  Pickle pickle_;
  std::vector<PyValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyValue*> memo_;
};

void describe_into(const PyValue& v, std::string& out, int depth) {
  if (depth > 4 || out.size() > 200) {
    out += "...";
    return;
  }
  switch (v.kind) {
    case Kind::kNone: out += "None"; return;
    case Kind::kBool: out += v.i ? "True" : "False"; return;
    case Kind::kInt: out += std::to_string(v.i); return;
    case Kind::kFloat: out += fmt::format("{}", v.f); return;
    case Kind::kStr: out += fmt::format("'{}'", v.s.substr(0, 40)); return;
    case Kind::kBytes: out += fmt::format("<{} bytes>", v.s.size()); return;
    case Kind::kGlobal: out += v.s; return;
    default: break;
  }
  const char* open = v.is(Kind::kList) ? "[" : v.is(Kind::kDict) ? "{" : "(";
  const char* close = v.is(Kind::kList) ? "]" : v.is(Kind::kDict) ? "}" : ")";
  if (v.is(Kind::kPersId)) out += "persistent_id";
  if (v.is(Kind::kCall)) out += "call";
  out += open;
  for (size_t k = 0; k < v.items.size(); ++k) {
    if (k > 0) out += ", ";
    describe_into(*v.items[k], out, depth + 1);
  }
  out += close;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kStr: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kTuple: return "tuple";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kGlobal: return "global";
    case Kind::kPersId: return "persistent_id";
    case Kind::kCall: return "call";
  }
  return "?";
}

std::string describe(const PyValue& value) {
  std::string out;
  describe_into(value, out, 0);
  return out;
}

Pickle parse_pickle(std::string_view data, const std::string& context) {
  return Parser(data, context).run();
}

}  // namespace embshard::pt
