// The pickle machine. It follows CPython's Unpickler (Lib/pickle.py) opcode by opcode, with the
// stack of marks kept apart from the value stack as CPython's does, but replaces find_class with
// a fixed list of torch's names and interprets REDUCE/NEWOBJ/BUILD for those names only.
#include "pickle.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "ember/tensor/shape.hpp"

namespace ember::record::detail::pt {
namespace {

// torch.save's storage classes and their dtypes (torch.<Name>, also torch.storage.<Name>).
struct StorageClass {
    std::string_view name;
    DType dtype;
};
constexpr StorageClass kStorages[] = {
    {"FloatStorage", DType::F32},     {"DoubleStorage", DType::F64}, {"HalfStorage", DType::F16},
    {"BFloat16Storage", DType::BF16}, {"LongStorage", DType::I64},   {"IntStorage", DType::I32},
    {"ShortStorage", DType::I16},     {"CharStorage", DType::I8},    {"ByteStorage", DType::U8},
    {"BoolStorage", DType::Bool},     {"UntypedStorage", DType::U8}};

// The functions and classes a state_dict (or a dict of them) names.
constexpr std::string_view kCallables[] = {
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._tensor._rebuild_from_type_v2",
    "torch.Size",
    "torch.Tensor",
    "torch._tensor.Tensor",
    "torch.nn.parameter.Parameter",
    "builtins.set",
    "builtins.frozenset",
    "__builtin__.set",
    "__builtin__.frozenset",
};

// A view that repeats storage elements (stride 0: expand) may be far larger than the file; past
// this size such a view is refused rather than allocated on a declared shape's word.
constexpr std::uint64_t kMaxExpandedBytes = std::uint64_t{256} << 20;

const StorageClass* storage_class(std::string_view global) {
    for (std::string_view prefix : {"torch.", "torch.storage."}) {
        if (!global.starts_with(prefix)) continue;
        const std::string_view name = global.substr(prefix.size());
        for (const auto& s : kStorages)
            if (s.name == name) return &s;
    }
    return nullptr;
}

bool known_global(std::string_view global) {
    for (std::string_view c : kCallables)
        if (c == global) return true;
    return storage_class(global) != nullptr;
}

class Machine {
  public:
    Machine(std::span<const std::byte> bytes, std::string_view entry, Heap& heap, const Source& src)
        : in_(bytes), entry_(entry), heap_(heap), src_(src) {}

    Ref run() {
        while (true) {
            op_at_ = pos_;
            if (pos_ == in_.size()) fail("the program ends without STOP");
            const auto op = static_cast<std::uint8_t>(take(1)[0]);
            if (op == '.') {  // STOP
                if (stack_.size() != 1 || !marks_.empty())
                    fail("STOP leaves ", stack_.size(), " values and ", marks_.size(),
                         " marks where one value was expected");
                return stack_.back();
            }
            step(op);
        }
    }

  private:
    template <typename... Args>
    [[noreturn]] void fail(const Args&... why) const {
        src_.fail("pickle '", printable(entry_), "' at byte ", op_at_, ": ", why...);
    }

    std::span<const std::byte> take(std::uint64_t n) {
        if (n > in_.size() - pos_)
            fail("the program ends inside an opcode (", n, " bytes wanted, ", in_.size() - pos_,
                 " left)");
        const auto out = in_.subspan(pos_, static_cast<std::size_t>(n));
        pos_ += static_cast<std::size_t>(n);
        return out;
    }
    template <typename T>
    T le() {
        T v{};
        std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
        return v;
    }
    std::string text(std::uint64_t n) {
        const auto b = take(n);
        return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    }
    std::string line() {
        std::size_t end = pos_;
        while (end < in_.size() && in_[end] != std::byte{'\n'}) ++end;
        if (end == in_.size()) fail("GLOBAL's name is not terminated by a newline");
        std::string s = text(end - pos_);
        ++pos_;
        return s;
    }

    Ref make(Kind k) { return heap_.make(k); }
    Ref make_int(std::int64_t v) {
        Ref r = make(Kind::Int);
        r->i = v;
        return r;
    }
    Ref make_str(Kind k, std::string s) {
        Ref r = make(k);
        r->s = std::move(s);
        return r;
    }
    void push(Ref r) { stack_.push_back(r); }
    Ref pop() {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
            fail("stack underflow (an opcode needs a value the program never pushed)");
        Ref r = stack_.back();
        stack_.pop_back();
        return r;
    }
    Ref& top() {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
            fail("stack underflow (an opcode needs a value the program never pushed)");
        return stack_.back();
    }
    // The values pushed since the last MARK, which is removed.
    std::vector<Ref> pop_mark() {
        if (marks_.empty()) fail("an opcode needs a MARK that was never set");
        const std::size_t at = marks_.back();
        marks_.pop_back();
        std::vector<Ref> out(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
        stack_.resize(at);
        return out;
    }
    Ref tuple(std::vector<Ref> items) {
        Ref r = make(Kind::Tuple);
        r->items = std::move(items);
        return r;
    }
    void memo_put(std::uint64_t key) { memo_[key] = top(); }
    Ref memo_get(std::uint64_t key) {
        const auto it = memo_.find(key);
        if (it == memo_.end()) fail("memo entry ", key, " is read but was never stored");
        return it->second;
    }
    Ref container(Kind want, std::string_view op) {
        Ref r = top();
        if (r->kind != want)
            fail(op, " on a ", kind_name(r->kind), " (a ", kind_name(want), " was expected)");
        return r;
    }
    void set_items(Ref dict, const std::vector<Ref>& kv) {
        if (kv.size() % 2) fail("SETITEMS with an odd number of values");
        for (std::size_t i = 0; i < kv.size(); i += 2) dict->dict.emplace_back(kv[i], kv[i + 1]);
    }

    std::int64_t int_arg(Ref r, std::string_view what) {
        if (r->kind != Kind::Int) fail(what, " is a ", kind_name(r->kind), ", not an int");
        return r->i;
    }
    std::vector<std::uint64_t> dims_arg(Ref r, std::string_view what) {
        if (r->kind != Kind::Tuple && r->kind != Kind::List)
            fail("the tensor's ", what, " is a ", kind_name(r->kind), ", not a tuple");
        std::vector<std::uint64_t> out;
        for (Ref x : r->items) {
            const std::int64_t v = int_arg(x, what);
            if (v < 0) fail("the tensor has a negative ", what, " entry ", v);
            out.push_back(static_cast<std::uint64_t>(v));
        }
        return out;
    }

    // torch._utils._rebuild_tensor(_v2): (storage, storage_offset, size, stride, ...).
    Ref rebuild_tensor(const std::vector<Ref>& a) {
        if (a[0]->kind != Kind::Storage)
            fail("a tensor is rebuilt from a ", kind_name(a[0]->kind), ", not a storage");
        const StorageInfo& st = a[0]->storage;
        TensorInfo t;
        t.storage = a[0];
        const std::int64_t offset = int_arg(a[1], "storage offset");
        if (offset < 0) fail("the tensor has a negative storage offset ", offset);
        t.offset = static_cast<std::uint64_t>(offset);
        t.sizes = dims_arg(a[2], "size");
        t.strides = dims_arg(a[3], "stride");
        if (t.sizes.size() != t.strides.size())
            fail("the tensor has ", t.sizes.size(), " sizes but ", t.strides.size(), " strides");
        if (t.sizes.size() > kMaxRank)
            fail("the tensor has rank ", t.sizes.size(), " (ember's tensors have at most ",
                 kMaxRank, ")");
        const std::uint64_t esize = dtype_size(st.dtype);
        std::uint64_t numel = 1, last = t.offset;
        for (std::size_t d = 0; d < t.sizes.size(); ++d) {
            if (__builtin_mul_overflow(numel, t.sizes[d], &numel))
                fail("the tensor's shape overflows 64 bits");
        }
        std::uint64_t bytes = 0;
        if (__builtin_mul_overflow(numel, esize, &bytes))
            fail("the tensor's byte size overflows 64 bits");
        if (numel > 0) {
            for (std::size_t d = 0; d < t.sizes.size(); ++d) {
                std::uint64_t reach = 0;
                if (__builtin_mul_overflow(t.sizes[d] - 1, t.strides[d], &reach) ||
                    __builtin_add_overflow(last, reach, &last))
                    fail("the tensor's strides overflow 64 bits");
            }
            if (last >= st.numel)
                fail("a tensor of shape ", dims_text(t.sizes), ", strides ", dims_text(t.strides),
                     " and offset ", t.offset, " reaches element ", last, " of storage '", st.key,
                     "', which has ", st.numel);
            // Views that repeat elements may exceed their storage; cap those, not plain ones.
            if (bytes > st.numel * esize && bytes > kMaxExpandedBytes)
                fail("a tensor of shape ", dims_text(t.sizes), " repeats the elements of storage '",
                     st.key, "' into ", bytes, " bytes (at most ", kMaxExpandedBytes, ")");
        }
        Ref r = make(Kind::Tensor);
        r->tensor = std::move(t);
        return r;
    }

    static std::string dims_text(const std::vector<std::uint64_t>& d) {
        std::string s = "[";
        for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
        return s + "]";
    }

    std::vector<Ref> args_of(Ref args, std::string_view who) {
        if (args->kind != Kind::Tuple)
            fail("the arguments of ", who, " are a ", kind_name(args->kind), ", not a tuple");
        return args->items;
    }

    // REDUCE: callable(*args), for the known callables.
    Ref call(Ref fn, Ref args_obj) {
        if (fn->kind != Kind::Global) fail("REDUCE calls a ", kind_name(fn->kind));
        const std::string& name = fn->s;
        const std::vector<Ref> a = args_of(args_obj, name);
        auto want = [&](std::size_t lo, std::size_t hi) {
            if (a.size() < lo || a.size() > hi)
                fail(name, " takes ", lo, lo == hi ? "" : " to " + std::to_string(hi),
                     " arguments, got ", a.size());
        };
        if (name == "collections.OrderedDict") {
            want(0, 1);
            Ref d = make(Kind::Dict);
            if (a.size() == 1) {
                if (a[0]->kind != Kind::List && a[0]->kind != Kind::Tuple)
                    fail("OrderedDict from a ", kind_name(a[0]->kind));
                for (Ref kv : a[0]->items) {
                    if ((kv->kind != Kind::Tuple && kv->kind != Kind::List) ||
                        kv->items.size() != 2)
                        fail("OrderedDict from an item that is not a pair");
                    d->dict.emplace_back(kv->items[0], kv->items[1]);
                }
            }
            return d;
        }
        if (name == "torch.Size") {
            want(1, 1);
            Ref t = tuple(args_of(a[0], name));
            dims_arg(t, "size");
            return t;
        }
        if (name.ends_with(".set") || name.ends_with(".frozenset")) {
            want(0, 1);
            Ref s = make(Kind::Set);
            if (a.size() == 1) {
                if (a[0]->kind != Kind::List && a[0]->kind != Kind::Tuple)
                    fail(name, " of a ", kind_name(a[0]->kind));
                s->items = a[0]->items;
            }
            return s;
        }
        if (name == "torch._utils._rebuild_tensor_v2") {
            want(6, 7);  // storage, offset, size, stride, requires_grad, hooks[, metadata]
            return rebuild_tensor(a);
        }
        if (name == "torch._utils._rebuild_tensor") {
            want(4, 4);
            return rebuild_tensor(a);
        }
        if (name == "torch._utils._rebuild_parameter" ||
            name == "torch._utils._rebuild_parameter_with_state") {
            want(3, 4);  // data, requires_grad, hooks[, state]
            if (a[0]->kind != Kind::Tensor) fail(name, " of a ", kind_name(a[0]->kind));
            return a[0];
        }
        if (name == "torch._tensor._rebuild_from_type_v2") {
            want(4, 4);  // func, type, args, state: a tensor (subclass) with Python attributes
            const std::string& type = a[1]->kind == Kind::Global ? a[1]->s : std::string();
            if (type != "torch.Tensor" && type != "torch._tensor.Tensor" &&
                type != "torch.nn.parameter.Parameter")
                fail("_rebuild_from_type_v2 of a type other than Tensor and Parameter");
            if (a[0]->kind != Kind::Global || !a[0]->s.starts_with("torch._utils._rebuild_"))
                fail("_rebuild_from_type_v2 with a function other than torch's rebuilders");
            return call(a[0], a[2]);
        }
        fail("calling ", name, " is not supported");
    }

    void step(std::uint8_t op) {
        switch (op) {
            case 0x80: {  // PROTO
                const auto v = static_cast<std::uint8_t>(take(1)[0]);
                if (v > 5) fail("pickle protocol ", int(v), " (at most 5 is known)");
                return;
            }
            case 0x95:  // FRAME: a hint for buffered readers
                le<std::uint64_t>();
                return;
            case '(':  // MARK
                marks_.push_back(stack_.size());
                return;
            case '0':  // POP
                pop();
                return;
            case '1':  // POP_MARK
                pop_mark();
                return;
            case '2':  // DUP
                push(top());
                return;
            case 'N':  // NONE
                push(make(Kind::None));
                return;
            case 0x88:    // NEWTRUE
            case 0x89: {  // NEWFALSE
                Ref r = make(Kind::Bool);
                r->b = op == 0x88;
                push(r);
                return;
            }
            case 'J':  // BININT
                push(make_int(le<std::int32_t>()));
                return;
            case 'K':  // BININT1
                push(make_int(le<std::uint8_t>()));
                return;
            case 'M':  // BININT2
                push(make_int(le<std::uint16_t>()));
                return;
            case 0x8a:    // LONG1
            case 0x8b: {  // LONG4
                const std::uint64_t n = op == 0x8a ? le<std::uint8_t>() : le<std::uint32_t>();
                if (n > 8) fail("an integer of ", n, " bytes does not fit 64 bits");
                const auto b = take(n);
                std::uint64_t u = 0;
                for (std::size_t k = 0; k < n; ++k)
                    u |= std::uint64_t(std::to_integer<std::uint8_t>(b[k])) << (8 * k);
                if (n > 0 && n < 8 && (std::to_integer<std::uint8_t>(b[n - 1]) & 0x80))
                    u |= ~std::uint64_t{0} << (8 * n);  // sign-extend two's complement
                push(make_int(static_cast<std::int64_t>(u)));
                return;
            }
            case 'G': {  // BINFLOAT: big-endian
                const std::uint64_t be = le<std::uint64_t>();
                Ref r = make(Kind::Float);
                r->f = std::bit_cast<double>(__builtin_bswap64(be));
                push(r);
                return;
            }
            case 'X':  // BINUNICODE
                push(make_str(Kind::Str, text(le<std::uint32_t>())));
                return;
            case 0x8c:  // SHORT_BINUNICODE
                push(make_str(Kind::Str, text(le<std::uint8_t>())));
                return;
            case 0x8d:  // BINUNICODE8
                push(make_str(Kind::Str, text(le<std::uint64_t>())));
                return;
            case 'T': {  // BINSTRING (protocol 1 str, signed length)
                const std::int32_t n = le<std::int32_t>();
                if (n < 0) fail("BINSTRING of negative length ", n);
                push(make_str(Kind::Str, text(static_cast<std::uint64_t>(n))));
                return;
            }
            case 'U':  // SHORT_BINSTRING
                push(make_str(Kind::Str, text(le<std::uint8_t>())));
                return;
            case 'B':  // BINBYTES
                push(make_str(Kind::Bytes, text(le<std::uint32_t>())));
                return;
            case 'C':  // SHORT_BINBYTES
                push(make_str(Kind::Bytes, text(le<std::uint8_t>())));
                return;
            case 0x8e:  // BINBYTES8
            case 0x96:  // BYTEARRAY8
                push(make_str(Kind::Bytes, text(le<std::uint64_t>())));
                return;
            case ')':  // EMPTY_TUPLE
                push(tuple({}));
                return;
            case 't':  // TUPLE
                push(tuple(pop_mark()));
                return;
            case 0x85:    // TUPLE1
            case 0x86:    // TUPLE2
            case 0x87: {  // TUPLE3
                std::vector<Ref> items(op - 0x84);
                for (auto it = items.rbegin(); it != items.rend(); ++it) *it = pop();
                push(tuple(std::move(items)));
                return;
            }
            case ']':  // EMPTY_LIST
                push(make(Kind::List));
                return;
            case 'l': {  // LIST
                Ref r = make(Kind::List);
                r->items = pop_mark();
                push(r);
                return;
            }
            case 'a': {  // APPEND
                Ref v = pop();
                container(Kind::List, "APPEND")->items.push_back(v);
                return;
            }
            case 'e': {  // APPENDS
                std::vector<Ref> vs = pop_mark();
                Ref l = container(Kind::List, "APPENDS");
                l->items.insert(l->items.end(), vs.begin(), vs.end());
                return;
            }
            case '}':  // EMPTY_DICT
                push(make(Kind::Dict));
                return;
            case 'd': {  // DICT
                Ref r = make(Kind::Dict);
                set_items(r, pop_mark());
                push(r);
                return;
            }
            case 's': {  // SETITEM
                Ref v = pop();
                Ref k = pop();
                container(Kind::Dict, "SETITEM")->dict.emplace_back(k, v);
                return;
            }
            case 'u': {  // SETITEMS
                std::vector<Ref> kv = pop_mark();
                set_items(container(Kind::Dict, "SETITEMS"), kv);
                return;
            }
            case 0x8f:  // EMPTY_SET
                push(make(Kind::Set));
                return;
            case 0x90: {  // ADDITEMS
                std::vector<Ref> vs = pop_mark();
                Ref s = container(Kind::Set, "ADDITEMS");
                s->items.insert(s->items.end(), vs.begin(), vs.end());
                return;
            }
            case 0x91: {  // FROZENSET
                Ref r = make(Kind::Set);
                r->items = pop_mark();
                push(r);
                return;
            }
            case 'h':  // BINGET
                push(memo_get(le<std::uint8_t>()));
                return;
            case 'j':  // LONG_BINGET
                push(memo_get(le<std::uint32_t>()));
                return;
            case 'q':  // BINPUT
                memo_put(le<std::uint8_t>());
                return;
            case 'r':  // LONG_BINPUT
                memo_put(le<std::uint32_t>());
                return;
            case 0x94:  // MEMOIZE
                memo_put(memo_.size());
                return;
            case 'c': {  // GLOBAL
                std::string module = line();
                std::string name = line();
                push(global(module, name));
                return;
            }
            case 0x93: {  // STACK_GLOBAL
                Ref name = pop();
                Ref module = pop();
                if (name->kind != Kind::Str || module->kind != Kind::Str)
                    fail("STACK_GLOBAL of a ", kind_name(module->kind), " and a ",
                         kind_name(name->kind), " (two strings were expected)");
                push(global(module->s, name->s));
                return;
            }
            case 'R': {  // REDUCE
                Ref args = pop();
                Ref fn = pop();
                push(call(fn, args));
                return;
            }
            case 0x81:    // NEWOBJ: cls.__new__(cls, *args)
            case 0x92: {  // NEWOBJ_EX: cls.__new__(cls, *args, **kwargs)
                if (op == 0x92) pop();
                Ref args = pop();
                Ref cls = pop();
                if (cls->kind != Kind::Global) fail("NEWOBJ of a ", kind_name(cls->kind));
                if (cls->s != "collections.OrderedDict" && cls->s != "torch.Size" &&
                    !cls->s.ends_with("set"))
                    fail("creating an instance of ", cls->s, " is not supported");
                // These classes fill themselves from their constructor's arguments or later
                // SETITEM/BUILD: OrderedDict.__new__ ignores its arguments.
                if (cls->s == "collections.OrderedDict") args = tuple({});
                push(call(cls, args));
                return;
            }
            case 'b': {  // BUILD: obj.__setstate__(state)
                Ref state = pop();
                Ref obj = top();
                // An OrderedDict's state is its attributes (a state_dict's `_metadata`: module
                // versions); a tensor's its Python attributes. Neither holds weights.
                if (obj->kind != Kind::Dict && obj->kind != Kind::Tensor)
                    fail("BUILD on a ", kind_name(obj->kind));
                (void)state;
                return;
            }
            case 'Q': {  // BINPERSID: torch's storages
                Ref pid = pop();
                push(persistent_load(pid));
                return;
            }
            default:
                break;
        }
        const char c = static_cast<char>(op);
        if (c >= 0x20 && c < 0x7f)
            fail("pickle opcode 0x", hex(op), " ('", printable(std::string_view(&c, 1)),
                 "') is not supported");
        fail("pickle opcode 0x", hex(op), " is not supported");
    }

    static std::string hex(std::uint8_t v) {
        const char* digits = "0123456789abcdef";
        return {digits[v >> 4], digits[v & 15]};
    }

    Ref global(const std::string& module, const std::string& name) {
        std::string full = module + "." + name;
        if (!known_global(full))
            fail("global '", printable(full),
                 "' is not supported (ember reads tensors, dicts, lists and ",
                 "plain values, as in a state_dict)");
        return make_str(Kind::Global, std::move(full));
    }

    // ('storage', storage class, key, location, numel).
    Ref persistent_load(Ref pid) {
        if (pid->kind != Kind::Tuple || pid->items.size() != 5 ||
            pid->items[0]->kind != Kind::Str || pid->items[0]->s != "storage")
            fail("a persistent id that is not ('storage', class, key, location, size)");
        const auto& p = pid->items;
        const StorageClass* cls = p[1]->kind == Kind::Global ? storage_class(p[1]->s) : nullptr;
        if (!cls) fail("a persistent id whose class is not a storage class");
        if (p[2]->kind != Kind::Str) fail("a storage key that is not a string");
        const std::int64_t numel = int_arg(p[4], "storage size");
        if (numel < 0) fail("storage '", printable(p[2]->s), "' has negative size ", numel);
        std::uint64_t bytes = 0;
        if (__builtin_mul_overflow(static_cast<std::uint64_t>(numel), dtype_size(cls->dtype),
                                   &bytes))
            fail("storage '", printable(p[2]->s), "' of ", numel, " elements overflows 64 bits");
        Ref r = make(Kind::Storage);
        r->storage = {cls->dtype, p[2]->s, static_cast<std::uint64_t>(numel)};
        return r;
    }

    std::span<const std::byte> in_;
    std::size_t pos_ = 0;
    std::size_t op_at_ = 0;
    std::string_view entry_;
    Heap& heap_;
    const Source& src_;
    std::vector<Ref> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, Ref> memo_;
};

}  // namespace

std::string_view kind_name(Kind kind) {
    constexpr std::string_view names[] = {"None",  "bool",    "int",   "float", "str",
                                          "bytes", "tuple",   "list",  "set",   "dict",
                                          "class", "storage", "tensor"};
    return names[static_cast<int>(kind)];
}

Ref unpickle(std::span<const std::byte> bytes, std::string_view entry, Heap& heap,
             const Source& src) {
    return Machine(bytes, entry, heap, src).run();
}

}  // namespace ember::record::detail::pt
