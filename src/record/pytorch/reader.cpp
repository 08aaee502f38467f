// torch.save files: the archive's layout (<prefix>/data.pkl, <prefix>/data/<key>,
// <prefix>/byteorder), the pickled object turned into tensors and record trees, and the key
// handling of LoadArgs.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <limits>
#include <regex>
#include <unordered_map>

#include "../codec.hpp"
#include "ember/record/pytorch.hpp"
#include "pickle.hpp"
#include "zip.hpp"

namespace ember::record {
namespace detail::pt {
namespace {

// Python containers nest as deeply as a hostile pickle likes; the walks below recurse once per
// level, so they stop where the record formats do.
constexpr int kMaxNesting = ember::record::detail::kMaxDepth;

class Archive {
  public:
    Archive(std::span<const std::byte> bytes, std::string name)
        : src_{std::move(name)}, zip_(bytes, src_), file_size_(bytes.size()) {
        const ZipEntry* pkl = nullptr;
        for (const auto& e : zip_.entries()) {
            const auto slash = e.name.find('/');
            if (slash == std::string::npos || e.name.substr(slash) != "/data.pkl") continue;
            if (pkl)
                src_.fail("the archive holds two pickles, '", printable(pkl->name), "' and '",
                          printable(e.name), "'");
            pkl = &e;
        }
        if (!pkl) src_.fail("the zip archive has no <name>/data.pkl entry (not a torch.save file)");
        prefix_ = pkl->name.substr(0, pkl->name.find('/'));
        if (zip_.find(prefix_ + "/constants.pkl"))
            src_.fail(
                "a TorchScript archive (torch.jit.save); ember reads torch.save files: save "
                "the model's state_dict() with torch.save");
        if (const ZipEntry* order = zip_.find(prefix_ + "/byteorder")) {
            std::vector<std::byte> scratch;
            const auto b = zip_.read(*order, scratch);
            const std::string_view s(reinterpret_cast<const char*>(b.data()), b.size());
            if (s == "big") {
                big_endian_ = true;
            } else if (s != "little") {
                src_.fail("byteorder entry holds '", printable(s.substr(0, 16)),
                          "' (\"little\" or \"big\" were expected)");
            }
        }
        // Absent byteorder: files before torch 1.10 (and Debian's 1.13) are little-endian.
        std::vector<std::byte> scratch;
        const auto program = zip_.read(*pkl, scratch);
        root_ = unpickle(program, pkl->name, heap_, src_);
    }

    const Source& src() const { return src_; }
    Ref root() const { return root_; }

    // The entry under the root dict's `key`, or the root.
    Ref select(std::string_view key) const {
        if (key.empty()) return root_;
        if (root_->kind != Kind::Dict)
            src_.fail("the saved object is a ", kind_name(root_->kind),
                      ", so it has no top-level key '", key, "'");
        Ref found = nullptr;
        std::string keys;
        for (const auto& [k, v] : root_->dict) {
            if (k->kind != Kind::Str) continue;
            if (k->s == key) found = v;  // a repeated key: the last one wins, as in Python
            if (keys.size() < 200) keys += (keys.empty() ? "" : ", ") + k->s;
        }
        if (!found)
            src_.fail("no top-level key '", printable(key),
                      "' (the root dict has: ", printable(keys), ")");
        return found;
    }

    // Refuses, before anything is allocated, tensors whose bytes add up past the read limits
    // for a file of this size: views repeating their storage's elements (stride 0, or many
    // views of one storage) count each time, which a per-tensor cap alone does not catch.
    void check_total(std::uint64_t total) const {
        check_decoded_size(total, file_size_, "the tensors of the file", src_.name);
    }
    static std::uint64_t bytes_of(const TensorInfo& t) {
        std::uint64_t n = dtype_size(t.storage->storage.dtype);
        for (std::uint64_t d : t.sizes) n *= d;  // checked for overflow when unpickled
        return n;
    }

    // The tensor's elements, contiguous.
    TensorData materialize(const TensorInfo& t) {
        const StorageInfo& st = t.storage->storage;
        if (__builtin_add_overflow(materialized_, bytes_of(t), &materialized_))
            materialized_ = std::numeric_limits<std::uint64_t>::max();
        check_total(materialized_);
        const auto storage = storage_bytes(st);
        const std::size_t es = dtype_size(st.dtype);
        Shape shape;
        std::size_t numel = 1;
        for (std::uint64_t d : t.sizes) {
            shape.push_back(static_cast<std::size_t>(d));
            numel *= static_cast<std::size_t>(d);  // checked for overflow when unpickled
        }
        std::vector<std::byte> out(numel * es);
        if (numel > 0) {
            const std::size_t rank = t.sizes.size();
            // Row-major strides (dims of size 1 may have any stride) make a single copy.
            bool contiguous = true;
            std::uint64_t expect = 1;
            for (std::size_t d = rank; d-- > 0;) {
                if (t.sizes[d] != 1 && t.strides[d] != expect) contiguous = false;
                expect *= t.sizes[d];
            }
            const std::byte* base = storage.data() + t.offset * es;
            if (contiguous) {
                std::memcpy(out.data(), base, out.size());
            } else {
                // Walk the view's indices in row-major order, carrying like an odometer.
                std::vector<std::uint64_t> index(rank, 0);
                std::uint64_t at = 0;  // element offset from base
                for (std::size_t i = 0; i < numel; ++i) {
                    std::memcpy(out.data() + i * es, base + at * es, es);
                    for (std::size_t d = rank; d-- > 0;) {
                        if (++index[d] < t.sizes[d]) {
                            at += t.strides[d];
                            break;
                        }
                        at -= (t.sizes[d] - 1) * t.strides[d];
                        index[d] = 0;
                    }
                }
            }
        }
        if (big_endian_ && es > 1) {
            for (std::size_t i = 0; i < out.size(); i += es)
                std::reverse(out.begin() + static_cast<std::ptrdiff_t>(i),
                             out.begin() + static_cast<std::ptrdiff_t>(i + es));
        }
        if (st.dtype == DType::Bool) {
            // A bool byte other than 0 or 1 is undefined behaviour the moment a kernel reads it.
            for (std::byte b : out)
                if (std::to_integer<unsigned>(b) > 1)
                    src_.fail("bool storage '", printable(st.key),
                              "' holds a byte other than 0 and 1");
        }
        return TensorData(std::move(out), shape, st.dtype);
    }

  private:
    std::span<const std::byte> storage_bytes(const StorageInfo& st) {
        auto it = storages_.find(st.key);
        if (it == storages_.end()) {
            const std::string name = prefix_ + "/data/" + st.key;
            const ZipEntry* e = zip_.find(name);
            if (!e)
                src_.fail("storage '", printable(st.key), "' has no entry '", printable(name),
                          "' in the archive");
            Loaded l;
            l.bytes = zip_.read(*e, l.scratch);
            it = storages_.emplace(st.key, std::move(l)).first;
            // A moved vector keeps its buffer: a span into `scratch` (a deflated entry) stays
            // valid.
        }
        const auto bytes = it->second.bytes;
        if (bytes.size() / dtype_size(st.dtype) != st.numel || bytes.size() % dtype_size(st.dtype))
            src_.fail("storage '", printable(st.key), "' holds ", bytes.size(), " bytes where ",
                      st.numel, " elements of ", dtype_name(st.dtype), " need ",
                      st.numel * dtype_size(st.dtype));
        return bytes;
    }

    struct Loaded {
        std::vector<std::byte> scratch;
        std::span<const std::byte> bytes;
    };

    Source src_;
    ZipReader zip_;
    Heap heap_;
    Ref root_ = nullptr;
    std::string prefix_;
    bool big_endian_ = false;
    std::unordered_map<std::string, Loaded> storages_;
    std::uint64_t file_size_ = 0;
    std::uint64_t materialized_ = 0;  // bytes of the tensors made so far
};

// Dict keys become path components: strings as they are, integers in decimal.
std::optional<std::string> key_text(Ref k) {
    if (k->kind == Kind::Str) return k->s;
    if (k->kind == Kind::Int) return std::to_string(k->i);
    return std::nullopt;
}

std::string join_key(const std::string& prefix, const std::string& part) {
    return prefix.empty() ? part : prefix + "." + part;
}

void collect(Ref obj, const std::string& key, int depth, const Source& src,
             std::vector<std::pair<std::string, Ref>>& out) {
    if (depth > kMaxNesting)
        src.fail("the saved object nests deeper than ", kMaxNesting, " levels");
    switch (obj->kind) {
        case Kind::Tensor:
            out.emplace_back(key, obj);
            return;
        case Kind::Dict:
            for (const auto& [k, v] : obj->dict)
                if (auto part = key_text(k)) collect(v, join_key(key, *part), depth + 1, src, out);
            return;
        case Kind::List:
        case Kind::Tuple:
            for (std::size_t i = 0; i < obj->items.size(); ++i)
                collect(obj->items[i], join_key(key, std::to_string(i)), depth + 1, src, out);
            return;
        default:
            return;  // numbers, strings, None: not weights
    }
}

// Refuses, before any tensor is made, a file whose tensors add up past the read limits.
void check_total_of(const Archive& a, const std::vector<std::pair<std::string, Ref>>& found) {
    std::uint64_t total = 0;
    for (const auto& [k, ref] : found)
        if (__builtin_add_overflow(total, Archive::bytes_of(ref->tensor), &total))
            total = std::numeric_limits<std::uint64_t>::max();
    a.check_total(total);
}

NamedTensors tensors_of(Archive& a, std::string_view top_level_key) {
    std::vector<std::pair<std::string, Ref>> found;
    collect(a.select(top_level_key), "", 0, a.src(), found);
    // A key written twice (a dict's repeated key) keeps its first place and its last value.
    check_total_of(a, found);
    NamedTensors out;
    std::unordered_map<std::string, std::size_t> at;
    for (auto& [k, ref] : found) {
        TensorData t = a.materialize(ref->tensor);
        if (auto it = at.find(k); it != at.end()) {
            out[it->second].second = std::move(t);
        } else {
            at.emplace(k, out.size());
            out.emplace_back(std::move(k), std::move(t));
        }
    }
    return out;
}

Value value_of(Archive& a, Ref obj, int depth) {
    const Source& src = a.src();
    if (depth > kMaxNesting)
        src.fail("the saved object nests deeper than ", kMaxNesting, " levels");
    switch (obj->kind) {
        case Kind::None:
            return Value();
        case Kind::Bool:
            return Value(obj->b);
        case Kind::Int:
            return Value(obj->i);
        case Kind::Float:
            return Value(obj->f);
        case Kind::Str:
        case Kind::Bytes:
            return Value(obj->s);
        case Kind::Tensor:
            return Value(a.materialize(obj->tensor));
        case Kind::Tuple:
        case Kind::List:
        case Kind::Set: {
            List l;
            l.reserve(obj->items.size());
            for (Ref x : obj->items) l.push_back(value_of(a, x, depth + 1));
            return Value(std::move(l));
        }
        case Kind::Dict: {
            Map m;
            std::unordered_map<std::string, std::size_t> at;  // a repeated key: the last wins
            for (const auto& [k, v] : obj->dict) {
                auto key = key_text(k);
                if (!key)
                    src.fail("a dict key is a ", kind_name(k->kind), " (strings and ints are)");
                Value val = value_of(a, v, depth + 1);
                if (auto it = at.find(*key); it != at.end()) {
                    m[it->second].second = std::move(val);
                } else {
                    at.emplace(*key, m.size());
                    m.emplace_back(std::move(*key), std::move(val));
                }
            }
            return Value(std::move(m));
        }
        default:
            src.fail("a ", kind_name(obj->kind), " outside a tensor has no record value");
    }
}

std::vector<std::byte> file_bytes(const std::filesystem::path& file) {
    return ember::record::detail::read_bytes(file, "PyTorch file");
}

}  // namespace
}  // namespace detail::pt

NamedTensors decode_pytorch_tensors(std::span<const std::byte> bytes, std::string_view source,
                                    std::string_view top_level_key) {
    detail::pt::Archive a(bytes, std::string(source));
    return detail::pt::tensors_of(a, top_level_key);
}

NamedTensors read_pytorch_tensors(const std::filesystem::path& file,
                                  std::string_view top_level_key) {
    const auto bytes = detail::pt::file_bytes(file);
    return decode_pytorch_tensors(bytes, file.string(), top_level_key);
}

Value decode_pytorch_value(std::span<const std::byte> bytes, std::string_view source,
                           std::string_view top_level_key) {
    detail::pt::Archive a(bytes, std::string(source));
    const detail::pt::Ref root = a.select(top_level_key);
    std::vector<std::pair<std::string, detail::pt::Ref>> found;
    detail::pt::collect(root, "", 0, a.src(), found);
    detail::pt::check_total_of(a, found);
    return detail::pt::value_of(a, root, 0);
}

Value read_pytorch_value(const std::filesystem::path& file, std::string_view top_level_key) {
    const auto bytes = detail::pt::file_bytes(file);
    return decode_pytorch_value(bytes, file.string(), top_level_key);
}

// ---- LoadArgs ----------------------------------------------------------------------------------

LoadArgs LoadArgs::with_key_remap(std::string pattern, std::string replacement) const {
    detail::check_key_pattern(pattern);
    LoadArgs a = *this;
    a.remap_.emplace_back(std::move(pattern), std::move(replacement));
    return a;
}

LoadArgs LoadArgs::with_top_level_key(std::string key) const {
    LoadArgs a = *this;
    a.top_level_key_ = std::move(key);
    return a;
}

LoadArgs LoadArgs::with_debug_print() const {
    return with_debug_print(std::cout);
}

LoadArgs LoadArgs::with_debug_print(std::ostream& out) const {
    LoadArgs a = *this;
    a.debug_ = &out;
    return a;
}

namespace detail {

void check_key_pattern(const std::string& pattern) {
    try {
        std::regex re(pattern);
    } catch (const std::regex_error& e) {
        EMBER_FAIL(Argument, "LoadArgs::with_key_remap: '", pattern,
                   "' is not a valid regular expression: ", e.what());
    }
}

namespace {

// [r, c] → [c, r].
TensorData transpose_2d(const TensorData& t) {
    const std::size_t rows = t.shape()[0], cols = t.shape()[1], es = dtype_size(t.dtype());
    std::vector<std::byte> out(t.bytes().size());
    const std::byte* in = t.bytes().data();
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
            std::memcpy(out.data() + (c * rows + r) * es, in + (r * cols + c) * es, es);
    return TensorData(std::move(out), Shape{cols, rows}, t.dtype());
}

bool all_digits(std::string_view s) {
    return !s.empty() && s.size() <= 18 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

PyTorchSource::PyTorchSource(const LoadArgs& args)
    : name_(printable(args.file().string(), 4096)), debug_(args.debug()) {
    NamedTensors tensors = read_pytorch_tensors(args.file(), args.top_level_key());
    std::vector<std::pair<std::regex, std::string>> remap;
    for (const auto& [pattern, replacement] : args.key_remap())
        remap.emplace_back(std::regex(pattern), replacement);
    for (auto& [key, data] : tensors) {
        std::string k = key;
        for (const auto& [re, replacement] : remap) k = std::regex_replace(k, re, replacement);
        const Shape shape = data.shape();
        const DType dtype = data.dtype();
        const auto [it, fresh] =
            tensors_.try_emplace(k, Entry{std::move(data), key, shape, dtype, false});
        EMBER_CHECK(fresh, Argument, name_, ": the key remapping turns both '",
                    printable(it->second.original), "' and '", printable(key), "' into '",
                    printable(k), "'");
    }
    if (debug_) {
        std::ostream& os = *debug_;
        os << "Debug information of keys and tensor shapes (" << name_ << "):\n---\n";
        for (const auto& [k, e] : tensors_) {
            if (k != e.original) {
                os << "Original Key: " << e.original << "\nRemapped Key: " << k << '\n';
            } else {
                os << "Key: " << k << '\n';
            }
            os << "Shape: " << e.shape.to_string() << "\nDtype: " << dtype_name(e.dtype)
               << "\n---\n";
        }
    }
}

bool PyTorchSource::contains(std::string_view key) const {
    return tensors_.find(key) != tensors_.end();
}

bool PyTorchSource::has_below(std::string_view key) const {
    if (key.empty()) return !tensors_.empty();
    const std::string prefix = std::string(key) + ".";
    const auto it = tensors_.lower_bound(prefix);
    return it != tensors_.end() && it->first.starts_with(prefix);
}

std::optional<TensorData> PyTorchSource::take(std::string_view key, std::string_view path,
                                              const Shape& shape, DType dtype, bool transpose,
                                              PrecisionSettings precision) {
    if (asked_++ == 0) first_asked_ = std::string(path);
    const auto it = tensors_.find(key);
    if (it == tensors_.end()) {
        EMBER_CHECK(!has_below(key), Format, name_, ": '", printable(key),
                    "' holds a dict of tensors, but the module's '", path, "' is a tensor");
        return std::nullopt;
    }
    Entry& e = it->second;
    EMBER_CHECK(!e.used, Argument, name_, ": tensor '", printable(key),
                "' is asked for twice (again by '", path, "')");
    e.used = true;
    ++taken_;
    const std::string shown =
        e.original == key ? std::string(key) : std::string(key) + "' (file key '" + e.original;
    TensorData data = std::move(e.data);  // each key is taken once: no copy
    if (transpose) {
        EMBER_CHECK(data.shape().rank() == 2, Shape, name_, ": tensor '", printable(shown),
                    "' of shape ", data.shape().to_string(), " is the weight of the Linear '", path,
                    "', which must have rank 2");
        data = transpose_2d(data);
    }
    EMBER_CHECK(data.shape() == shape, Shape, name_, ": tensor '", printable(shown), "' has shape ",
                data.shape().to_string(),
                transpose ? " once transposed (PyTorch's Linear stores "
                            "[out, in], ember's [in, out])"
                          : "",
                " but the module's '", path, "' has shape ", shape.to_string());
    EMBER_CHECK(module::detail::same_kind(data.dtype(), dtype), DType, name_, ": tensor '",
                printable(shown), "' holds ", dtype_name(data.dtype()),
                " values but the module's '", path, "' holds ", dtype_name(dtype));
    const DType stored = stored_dtype(data.dtype(), precision);
    return stored == data.dtype() ? std::move(data) : data.convert(stored);
}

std::vector<std::string> PyTorchSource::indices(std::string_view key) const {
    const std::string prefix = key.empty() ? std::string() : std::string(key) + ".";
    std::vector<std::string> out;
    for (auto it = tensors_.lower_bound(prefix);
         it != tensors_.end() && it->first.starts_with(prefix); ++it) {
        const std::string_view rest = std::string_view(it->first).substr(prefix.size());
        const std::string_view part = rest.substr(0, rest.find('.'));
        if (all_digits(part) && std::find(out.begin(), out.end(), part) == out.end())
            out.emplace_back(part);
    }
    // Numeric order, and "01" after "1" (a different key that reads as the same number).
    std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
        const auto x = std::stoull(a), y = std::stoull(b);
        return x != y ? x < y : a < b;
    });
    return out;
}

void PyTorchSource::check_count(std::string_view key, std::string_view path,
                                const std::vector<std::string>& indices, std::size_t n) const {
    if (indices.size() == n) return;
    std::string list;
    for (std::size_t i = 0; i < indices.size() && i < 16; ++i) list += (i ? ", " : "") + indices[i];
    if (indices.size() > 16) list += ", ...";
    EMBER_FAIL(Shape, name_, ": '", printable(key), "' has ", indices.size(), " numbered entries (",
               printable(list), ") but the module's list '", path, "' has ", n, " items");
}

void PyTorchSource::check_absent(std::string_view key, std::string_view path) const {
    EMBER_CHECK(!contains(key) && !has_below(key), Format, name_, ": the file has '",
                printable(key), "' but the module's '", path,
                "' is absent (an optional the config left out)");
}

void PyTorchSource::finish() const {
    std::size_t used = 0;
    for (const auto& [k, e] : tensors_) used += e.used;
    if (debug_) {
        std::ostream& os = *debug_;
        if (used < tensors_.size()) os << "Keys the module does not use:\n";
        for (const auto& [k, e] : tensors_)
            if (!e.used) os << "  " << k << " " << e.shape.to_string() << '\n';
        if (used == tensors_.size()) os << "Every key was used.\n";
    }
    // Partial loading keeps what the file lacks; a file that supplies nothing at all is a
    // mistake (a missing top-level key or remapping), not a partial load.
    if (used == 0 && asked_ > 0 && !tensors_.empty()) {
        const auto& first = *tensors_.begin();
        EMBER_FAIL(Format, name_, ": none of its ", tensors_.size(),
                   " tensors matches a parameter of the module (the file has keys like '",
                   printable(first.first), "'; the module asks for paths like '", first_asked_,
                   "'): see LoadArgs::with_top_level_key, with_key_remap and with_debug_print");
    }
}

}  // namespace detail
}  // namespace ember::record
