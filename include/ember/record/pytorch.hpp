#pragma once
// PyTorch weights: torch.save files (.pt, .pth) read without PyTorch and loaded into ember
// modules, as Burn's burn-import PyTorchFileRecorder does.
//
//   namespace rec = ember::record;
//   rec::PyTorchFileRecorder<rec::FullPrecisionSettings> recorder;
//   auto args = rec::LoadArgs("resnet.pt")
//                   .with_top_level_key("state_dict")
//                   .with_key_remap(R"(^layer(\d+)\.)", "layers.$1.");
//   auto model = recorder.load_into(config.init<B>(device), args, device);
//
// A torch.save file is a zip archive: <prefix>/data.pkl, a pickle of the saved object (dicts,
// lists, numbers and tensors, each tensor a strided view of a storage), and one entry
// <prefix>/data/<key> per storage holding its raw little-endian elements. ember runs the pickle
// in its own small machine that knows only the names a state_dict uses (it never runs code), and
// copies each tensor out of its storage into a contiguous TensorData (docs/pytorch-import.md).
//
// Loading walks the module's own fields and takes, for each parameter and running state, the
// tensor whose key is its path ("encoder.layers.0.weight"):
// - nn::Linear's weight is transposed: PyTorch stores [d_output, d_input], ember [d_input,
//   d_output] (Burn's layout);
// - a field `gamma` or `beta` absent from the file is read from `weight` or `bias` (PyTorch's
//   names in its norms), unless the module has fields of those names itself;
// - a std::vector of modules takes the numbered children of its key in numeric order, so the gaps
//   nn.Sequential leaves for activations (layers.0, layers.2, layers.4) close up;
// - a key the file lacks leaves the module's own value (partial loading); keys the module does
//   not ask for are ignored (with_debug_print lists them); but a file none of whose tensors
//   matches is an error (a forgotten top-level key or remapping);
// - shapes must match exactly and kinds (float / int / bool) must agree; dtypes convert.
// Every problem in the file is a FormatError naming the file; a tensor that does not fit the
// module is a ShapeError or DTypeError naming both the key and the module path.
#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "../export.hpp"
#include "../module/config.hpp"
#include "../module/module.hpp"
#include "recorder.hpp"
#include "serde.hpp"

namespace ember::nn {
template <Backend B>
struct Linear;
}  // namespace ember::nn

namespace ember::record {

/// Tensors by key, in file order.
using NamedTensors = std::vector<std::pair<std::string, TensorData>>;

/// Every tensor of the torch.save file `file` reachable through dicts, lists and tuples from its
/// root object (or from the root dict's entry `top_level_key`), keyed by the dotted path to it
/// ("encoder.0.weight"), contiguous, in file order. Other values (numbers, strings) are skipped.
/// Throws FormatError naming the file when it cannot be read.
EMBER_API NamedTensors read_pytorch_tensors(const std::filesystem::path& file,
                                            std::string_view top_level_key = {});
/// read_pytorch_tensors on the bytes of a file; `source` names them in errors.
EMBER_API NamedTensors decode_pytorch_tensors(std::span<const std::byte> bytes,
                                              std::string_view source,
                                              std::string_view top_level_key = {});
/// The whole object saved in `file` (or its root dict's entry `top_level_key`) as a record tree:
/// dicts become maps (keys: strings, or integers written in decimal), lists, tuples and sets
/// lists, tensors TensorData, numbers, strings, bools and None themselves.
EMBER_API Value read_pytorch_value(const std::filesystem::path& file,
                                   std::string_view top_level_key = {});
/// read_pytorch_value on the bytes of a file; `source` names them in errors.
EMBER_API Value decode_pytorch_value(std::span<const std::byte> bytes, std::string_view source,
                                     std::string_view top_level_key = {});

/// A config read from a torch.save file holding a dict of its fields (Burn's
/// `config_from_file`), optionally under `top_level_key`: `torch.save({"d_model": 512, ...})`.
/// Every field must be present, as Config::load requires of JSON; FormatError otherwise.
template <config::Config C>
C config_from_file(const std::filesystem::path& file, std::string_view top_level_key = {}) {
    const Value tree = read_pytorch_value(file, top_level_key);
    try {
        return from_value<C>(tree);
    } catch (const FormatError& e) {
        EMBER_FAIL(Format, file.string(), ": ", C::ember_type_name, ": ", e.what());
    }
}

/// What to load and how (Burn's LoadArgs): the file, key remappings, a top-level key and
/// debug printing. Builders return a modified copy.
class EMBER_API LoadArgs {
  public:
    /// Loads `file`.
    LoadArgs(std::filesystem::path file) : file_(std::move(file)) {}
    /// Loads `file`.
    LoadArgs(const char* file) : file_(file) {}
    /// Loads `file`.
    LoadArgs(const std::string& file) : file_(file) {}

    /// Adds a remapping: every key has each match of the ECMAScript regular expression `pattern`
    /// replaced by `replacement` (`$1` for groups), after the remappings added before it.
    /// Throws ArgumentError when `pattern` is not a valid expression.
    LoadArgs with_key_remap(std::string pattern, std::string replacement) const;
    /// Loads the entry `key` of the file's root dict (a checkpoint's "state_dict" or "model")
    /// instead of the root itself.
    LoadArgs with_top_level_key(std::string key) const;
    /// Prints every key (before and after remapping), shape and dtype to stdout while loading,
    /// and the keys the module did not use.
    LoadArgs with_debug_print() const;
    /// Like with_debug_print(), to `out` (which must outlive the load).
    LoadArgs with_debug_print(std::ostream& out) const;

    /// The file.
    const std::filesystem::path& file() const { return file_; }
    /// The remappings (pattern, replacement), in order.
    const std::vector<std::pair<std::string, std::string>>& key_remap() const { return remap_; }
    /// The top-level key; empty for the root.
    const std::string& top_level_key() const { return top_level_key_; }
    /// Where debug output goes; nullptr for none.
    std::ostream* debug() const { return debug_; }

  private:
    std::filesystem::path file_;
    std::vector<std::pair<std::string, std::string>> remap_;
    std::string top_level_key_;
    std::ostream* debug_ = nullptr;
};

namespace detail {

/// The tensors of a file, remapped, for one load into a module: what the module walk asks.
class EMBER_API PyTorchSource {
  public:
    /// Reads `args.file()`, applies the remappings and prints the debug listing.
    explicit PyTorchSource(const LoadArgs& args);

    /// The file, for messages.
    const std::string& name() const { return name_; }
    /// True when the file has a tensor called `key`.
    bool contains(std::string_view key) const;
    /// The tensor `key` for the module's `path`, or nullopt when the file has none: transposed
    /// when `transpose` (a Linear weight), checked to have `shape` and the kind of `dtype`,
    /// converted to the dtype `precision` stores. Fails when the file holds keys below `key`
    /// instead (a module where the module wants a tensor).
    std::optional<TensorData> take(std::string_view key, std::string_view path, const Shape& shape,
                                   DType dtype, bool transpose, PrecisionSettings precision);
    /// The numbered children of `key` ("key.0", "key.2", ...), as written, in numeric order.
    std::vector<std::string> indices(std::string_view key) const;
    /// Fails unless `indices` (the children of `key`) has `n` entries, the length of the
    /// module's list at `path`.
    void check_count(std::string_view key, std::string_view path,
                     const std::vector<std::string>& indices, std::size_t n) const;
    /// Fails when the file has `key` or keys below it: the module's optional at `path` is absent
    /// (a layer built without a bias, say), so the tensor would be lost.
    void check_absent(std::string_view key, std::string_view path) const;
    /// True when the file has tensors below `key` ("key.…").
    bool has_keys_below(std::string_view key) const { return has_below(key); }
    /// How many tensors have been taken so far.
    std::size_t taken() const { return taken_; }
    /// Prints the keys no field asked for, when debugging; fails when the module asked for
    /// tensors and none of the file's matched (a partial load that loads nothing is a mistake).
    void finish() const;

  private:
    struct Entry {
        TensorData data;       // moved out when taken
        std::string original;  // the key in the file, before remapping
        Shape shape;           // the tensor's, for the debug listing after it is taken
        DType dtype;
        bool used = false;
    };
    bool has_below(std::string_view key) const;

    std::string name_;
    std::map<std::string, Entry, std::less<>> tensors_;
    std::ostream* debug_ = nullptr;
    std::size_t asked_ = 0;    // tensors the module asked for
    std::size_t taken_ = 0;    // tensors found and taken
    std::string first_asked_;  // the first one's module path, for the error message
};

/// Checks that `pattern` compiles (std::regex stays out of this header: it is slow to compile).
void check_key_pattern(const std::string& pattern);

template <typename T>
struct IsLinear : std::false_type {};
template <Backend B>
struct IsLinear<nn::Linear<B>> : std::true_type {};

// The key field `name` of module M at `prefix` is read from. PyTorch's norms call gamma and
// beta "weight" and "bias" (Burn's adapter renames them the same way).
template <typename M>
std::string pytorch_key(const PyTorchSource& file, std::string_view prefix, std::string_view name) {
    std::string key = module::detail::join(prefix, name);
    const std::string_view alias = name == "gamma" ? "weight" : name == "beta" ? "bias" : "";
    if (alias.empty() || file.contains(key)) return key;
    for (std::string_view f : M::ember_field_names)
        if (f == alias) return key;  // the module has its own field of that name
    std::string other = module::detail::join(prefix, alias);
    return file.contains(other) ? other : key;
}

// The record of `field` (at module path `path`, file key `key`) with the file's tensors where it
// has them and the module's own values elsewhere.
template <typename T>
Value pytorch_record(const T& field, const std::string& path, const std::string& key,
                     PyTorchSource& file, PrecisionSettings precision, bool transpose = false) {
    namespace md = module::detail;
    if constexpr (module::Module<T>) {
        Map map;
        ember::detail::for_each_field(field, [&](std::string_view name, const auto& x) {
            const bool t = IsLinear<T>::value && name == "weight";
            map.emplace_back(std::string(name),
                             pytorch_record(x, md::join(path, name),
                                            pytorch_key<T>(file, key, name), file, precision, t));
        });
        return map;
    } else if constexpr (md::IsVector<T>::value) {
        // The file's numbers in order (an absent list: the module's own, which find nothing).
        const std::vector<std::string> idx = file.indices(key);
        if (!idx.empty()) file.check_count(key, path, idx, field.size());
        List list;
        for (std::size_t i = 0; i < field.size(); ++i) {
            const std::string n = std::to_string(i);
            list.push_back(pytorch_record(field[i], md::join(path, n),
                                          md::join(key, idx.empty() ? n : idx[i]), file,
                                          precision));
        }
        return list;
    } else if constexpr (md::IsOptional<T>::value) {
        if (field) return pytorch_record(*field, path, key, file, precision, transpose);
        file.check_absent(key, path);
        return Value{};
    } else if constexpr (md::IsVariant<T>::value) {
        // An enum-like module: the file's keys below `key` are those of one alternative, the
        // one the module was built with (the record is untagged, as in Burn).
        return std::visit(
            [&](const auto& alt) {
                const std::size_t before = file.taken();
                Value r = pytorch_record(alt, path, key, file, precision, transpose);
                EMBER_CHECK(file.taken() > before || !file.has_keys_below(key), Format, file.name(),
                            ": the tensors under '", key, "' fit none of the fields of the module's '",
                            path, "' (alternative ", field.index(), " of its variant): build the "
                            "module with the alternative the file holds");
                return r;
            },
            field);
    } else if constexpr (md::IsParam<T>::value || md::IsRunningState<T>::value) {
        auto [shape, dtype] = [&] {
            if constexpr (md::IsParam<T>::value) {
                return std::pair{field.shape(), field.dtype()};
            } else {
                const auto v = field.value();
                return std::pair{v.shape(), v.dtype()};
            }
        }();
        std::optional<TensorData> data = file.take(key, path, shape, dtype, transpose, precision);
        if (!data) return md::to_record(field);  // partial file: the module keeps its own value
        return Map{{"id", field.id().to_string()}, {"param", std::move(*data)}};
    } else {
        return Value{};  // constants are not recorded
    }
}

}  // namespace detail

/// Loads PyTorch files into modules (Burn's PyTorchFileRecorder). Read-only: ember writes its
/// own formats (and safetensors), not PyTorch's. Float tensors pass through `S`'s float dtype and
/// integer tensors through its integer dtype on their way into the module, as in Burn.
template <PrecisionSettingsType S = FullPrecisionSettings>
class PyTorchFileRecorder {
  public:
    /// The precision settings type.
    using Settings = S;
    /// The dtypes tensors pass through.
    static constexpr PrecisionSettings precision = S::value;

    /// The record of `module` with the file's tensors in place of its own (Burn's
    /// `recorder.load(args, device)`): feed it to `module.load_record(...)`. Parameters keep
    /// their ids; those the file lacks keep their values.
    template <module::Module M>
    Value load(const LoadArgs& args, const M& module) const {
        detail::PyTorchSource file(args);
        Value record = detail::pytorch_record(module, "", "", file, S::value);
        file.finish();
        return record;
    }
    /// `module` with the file's tensors loaded, each onto its parameter's device.
    template <module::Module M>
    M load_into(const M& module, const LoadArgs& args) const {
        return module::load_record(module, load(args, module));
    }
    /// `module` with the file's tensors loaded onto `device`.
    template <module::Module M, typename Dev>
    M load_into(const M& module, const LoadArgs& args, const Dev& device) const {
        return module::load_record(module, load(args, module), device);
    }
};

}  // namespace ember::record
