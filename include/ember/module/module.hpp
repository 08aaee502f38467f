#pragma once
// Modules: plain aggregates that list their fields once with EMBER_MODULE. Every module
// algorithm (visit, map, records, devices, display, valid) is written once here against the
// field list, recursing through fields that are modules, std::vector and std::optional of
// modules, std::variant of modules (enum-like modules: the active alternative, at the field's
// own path, as Burn's enum modules), and stopping at leaves:
//   Param<Tensor>         trainable (or frozen) parameter: visited, mapped, recorded
//   RunningState<Tensor>  state forward() updates: recorded and moved, not visited
//   Tensor                a constant: moved between devices, not recorded
//   anything else         a constant (sizes, flags, enums): copied as is
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>
#if !EMBER_FREESTANDING  // firmware has no files and no text streams
#include <ostream>
#include <sstream>
#endif

#include "../detail/fields.hpp"
#if !EMBER_FREESTANDING
#include "../detail/filesystem_fwd.hpp"
#endif
#include "../record/value.hpp"
#include "param.hpp"
#include "running_state.hpp"

namespace ember::module {

/// A type declared with EMBER_MODULE.
template <typename T>
concept Module = ember::detail::HasFields<T> && requires { typename T::ember_module_tag; };

namespace detail {

/// A module that walks itself (train::detail::ErasedModel: a model behind an interface): it has
/// no fields, names its backend (`ember_self_walking`) and provides the per-module walks as
/// members (walk_visit, walk_map, walk_to_device, walk_valid, walk_record, walk_load), which
/// visit_params, map_params, to_device_fields, valid_fields, to_record and load call.
template <typename T>
concept SelfWalking = requires {
    typename T::ember_self_walking;
};

template <typename T>
struct IsParam : std::false_type {};
template <typename B, std::size_t D, typename K>
struct IsParam<Param<Tensor<B, D, K>>> : std::true_type {};
template <typename T>
struct IsRunningState : std::false_type {};
template <typename B, std::size_t D>
struct IsRunningState<RunningState<Tensor<B, D>>> : std::true_type {};
template <typename T>
struct IsTensor : std::false_type {};
template <typename B, std::size_t D, typename K>
struct IsTensor<Tensor<B, D, K>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T, typename A>
struct IsVector<std::vector<T, A>> : std::true_type {};
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVariant : std::false_type {};
template <typename... T>
struct IsVariant<std::variant<T...>> : std::true_type {};

template <typename T>
using Bare = std::remove_cvref_t<T>;

inline std::string join(std::string_view path, std::string_view name) {
    return record::Value::join_path(path, name);
}

// ---- the backend a module's tensors live on (void for modules without tensors) --------------
template <typename T>
struct BackendOf {
    using type = void;
};
template <typename B, std::size_t D, typename K>
struct BackendOf<Param<Tensor<B, D, K>>> {
    using type = B;
};
template <typename B, std::size_t D>
struct BackendOf<RunningState<Tensor<B, D>>> {
    using type = B;
};
template <typename B, std::size_t D, typename K>
struct BackendOf<Tensor<B, D, K>> {
    using type = B;
};
template <typename T, typename A>
struct BackendOf<std::vector<T, A>> : BackendOf<T> {};
template <typename T>
struct BackendOf<std::optional<T>> : BackendOf<T> {};
template <typename... T>
struct FirstBackend {
    using type = void;
};
template <typename T, typename... R>
struct FirstBackend<T, R...> {
    using type = std::conditional_t<std::is_void_v<T>, typename FirstBackend<R...>::type, T>;
};
template <typename... T>
struct BackendOf<std::variant<T...>> : FirstBackend<typename BackendOf<T>::type...> {};
template <typename Tuple>
struct FieldsBackend;
template <typename... F>
struct FieldsBackend<std::tuple<F...>> : FirstBackend<typename BackendOf<Bare<F>>::type...> {};
template <Module M>
struct BackendOf<M> : FieldsBackend<decltype(std::declval<const M&>().ember_fields())> {};
template <Module M>
requires SelfWalking<M>
struct BackendOf<M> {
    using type = typename M::ember_self_walking;
};

// ---- the same module on the inner backend (valid()) -----------------------------------------
template <typename T, typename N>
struct RebindBackend {
    using type = T;
};
template <template <typename...> class T, typename B, typename... R, typename N>
    requires Backend<B>
struct RebindBackend<T<B, R...>, N> {
    using type = T<N, R...>;
};

template <typename T>
struct Valid {
    using type = T;
};
template <typename M, typename B>
struct ValidModule : RebindBackend<M, InnerBackend<B>> {};
template <typename M>
struct ValidModule<M, void> {
    using type = M;
};
template <Module M>
struct Valid<M> : ValidModule<M, typename BackendOf<M>::type> {};
template <typename B, std::size_t D, typename K>
struct Valid<Param<Tensor<B, D, K>>> {
    using type = Param<Tensor<InnerBackend<B>, D, K>>;
};
template <typename B, std::size_t D>
struct Valid<RunningState<Tensor<B, D>>> {
    using type = RunningState<Tensor<InnerBackend<B>, D>>;
};
template <typename B, std::size_t D, typename K>
struct Valid<Tensor<B, D, K>> {
    using type = Tensor<InnerBackend<B>, D, K>;
};
template <typename T>
struct Valid<std::vector<T>> {
    using type = std::vector<typename Valid<T>::type>;
};
template <typename T>
struct Valid<std::optional<T>> {
    using type = std::optional<typename Valid<T>::type>;
};
template <typename... T>
struct Valid<std::variant<T...>> {
    using type = std::variant<typename Valid<T>::type...>;
};
template <typename T>
struct Same {
    using type = T;
};

// ---- walks compiled once per module ----------------------------------------------------------
// On a backend that asks for it (`static constexpr bool compiled_module_walks = true`: Dispatch),
// a walk reaching a module goes through one function per module type (visit_params, map_params,
// to_device, valid, to_record, load) instead of being instantiated for every module below it once
// per leaf function: the optimizer, the gradients, valid() and to_device each walk a model with
// their own lambda, and each lambda used to instantiate the whole walk down to every parameter.
// Those per-module functions are ordinary templates that a library may instantiate once
// (include/ember/dispatch/nn.hpp declares ember's modules on Dispatch extern); the lambdas of
// visit and map reach them through ParamVisitor and ParamMapper, one virtual call a parameter.
// Other backends keep the direct walks, which the compiler inlines.

/// Whether backend B's module walks go through the per-module functions (false for void).
template <typename B>
concept CompiledWalks = requires {
    requires B::compiled_module_walks;
};

template <typename B, typename T>
constexpr bool params_erasable();
template <typename B, typename... F>
constexpr bool fields_erasable(std::tuple<F...>*) {
    return (params_erasable<B, Bare<F>>() && ...);
}
template <typename B, typename... T>
constexpr bool alternatives_erasable(std::variant<T...>*) {
    return (params_erasable<B, T>() && ...);
}
// Whether every parameter in T is a float tensor of backend B and rank 1-4: the ones
// ParamVisitor<B> and ParamMapper<B> have entries for.
template <typename B, typename T>
constexpr bool params_erasable() {
    if constexpr (Module<T>) {
        using Fields = decltype(std::declval<const T&>().ember_fields());
        return fields_erasable<B>(static_cast<Fields*>(nullptr));
    } else if constexpr (IsVector<T>::value || IsOptional<T>::value) {
        return params_erasable<B, typename T::value_type>();
    } else if constexpr (IsVariant<T>::value) {
        return alternatives_erasable<B>(static_cast<T*>(nullptr));
    } else if constexpr (IsParam<T>::value) {
        using V = typename T::Value;
        return std::is_same_v<V, Tensor<B, V::rank>> && V::rank >= 1 && V::rank <= 4;
    } else {
        return true;  // running states, constants and plain values: no parameter
    }
}

/// A module whose walks go through the per-module functions: its backend asks for them and
/// every parameter in it has an entry in ParamVisitor and ParamMapper.
template <typename T>
concept CompiledWalk = Module<T> && CompiledWalks<typename BackendOf<T>::type> &&
    params_erasable<typename BackendOf<T>::type, T>();

// ---- traversals ----------------------------------------------------------------------------

template <typename T, typename F>
void walk(const T& field, std::string_view path, F& fn);

// walk over the fields of module `m` (at `path`).
template <typename M, typename F>
void walk_fields(const M& m, std::string_view path, F& fn) {
    ember::detail::for_each_field(
        m, [&](std::string_view name, const auto& x) { walk(x, join(path, name), fn); });
}

// Calls fn(path, leaf) for every leaf, depth first, in field order. Where fn has an on_module
// hook, a module whose walks are compiled (CompiledWalk) is handed to it instead.
template <typename T, typename F>
void walk(const T& field, std::string_view path, F& fn) {
    if constexpr (CompiledWalk<T> && requires { fn.on_module(field, path); }) {
        fn.on_module(field, path);  // the module's own walk (see CompiledWalks)
    } else if constexpr (Module<T>) {
        walk_fields(field, path, fn);
    } else if constexpr (IsVector<T>::value) {
        for (std::size_t i = 0; i < field.size(); ++i) walk(field[i], join(path, std::to_string(i)), fn);
    } else if constexpr (IsOptional<T>::value) {
        if (field) walk(*field, path, fn);
    } else if constexpr (IsVariant<T>::value) {
        std::visit([&](const auto& alt) { walk(alt, path, fn); }, field);
    } else {
        fn(path, field);
    }
}

template <template <typename> class OutOf, typename T, typename F>
typename OutOf<T>::type rebuild(const T& field, std::string_view path, F& fn);

// rebuild of the fields of module `m` (at `path`).
template <template <typename> class OutOf, typename M, typename F>
typename OutOf<M>::type rebuild_fields(const M& m, std::string_view path, F& fn) {
    return ember::detail::map_fields<typename OutOf<M>::type>(
        m, [&](std::string_view name, const auto& x) {
            return rebuild<OutOf>(x, join(path, name), fn);
        });
}

// Rebuilds the tree with every leaf replaced by fn(path, leaf); OutOf<T>::type is the type a
// field of type T becomes (Same for map, Valid for valid()). Where fn has an on_module hook, a
// module whose walks are compiled (CompiledWalk) is handed to it instead.
template <template <typename> class OutOf, typename T, typename F>
typename OutOf<T>::type rebuild(const T& field, std::string_view path, F& fn) {
    using Out = typename OutOf<T>::type;
    if constexpr (CompiledWalk<T> && requires { fn.on_module(field, path); }) {
        return fn.on_module(field, path);  // the module's own rebuild (see CompiledWalks)
    } else if constexpr (Module<T>) {
        return rebuild_fields<OutOf>(field, path, fn);
    } else if constexpr (IsVector<T>::value) {
        Out out;
        out.reserve(field.size());
        for (std::size_t i = 0; i < field.size(); ++i)
            out.push_back(rebuild<OutOf>(field[i], join(path, std::to_string(i)), fn));
        return out;
    } else if constexpr (IsOptional<T>::value) {
        if (!field) return Out{};
        return Out{rebuild<OutOf>(*field, path, fn)};
    } else if constexpr (IsVariant<T>::value) {
        return std::visit(
            [&](const auto& alt) -> Out {
                using A = typename OutOf<Bare<decltype(alt)>>::type;
                return Out(std::in_place_type<A>, rebuild<OutOf>(alt, path, fn));
            },
            field);
    } else {
        return fn(path, field);
    }
}

// ---- records -------------------------------------------------------------------------------
template <typename T>
record::Value to_record(const T& field) {
    if constexpr (SelfWalking<T>) {
        return field.walk_record();
    } else if constexpr (Module<T>) {
        record::Map map;
        ember::detail::for_each_field(field, [&](std::string_view name, const auto& x) {
            record::detail::map_append(map, name, to_record(x));
        });
        return map;
    } else if constexpr (IsVector<T>::value) {
        record::List list;
        for (const auto& x : field) list.push_back(to_record(x));
        return list;
    } else if constexpr (IsOptional<T>::value) {
        return field ? to_record(*field) : record::Value{};
    } else if constexpr (IsVariant<T>::value) {  // untagged: the active alternative's record
        return std::visit([](const auto& alt) { return to_record(alt); }, field);
    } else if constexpr (IsParam<T>::value) {
        if (field.quantized()) return quant::detail::param_record(field.id().to_string(), *field.quantized());
        return record::detail::param_map(field.id().to_string(), field.val().to_data());
    } else if constexpr (IsRunningState<T>::value) {
        return record::detail::param_map(field.id().to_string(), field.value().to_data());
    } else {
        return {};  // constants are rebuilt by the module's config, not stored
    }
}

inline bool same_kind(DType a, DType b) {
    auto kind = [](DType t) { return is_float(t) ? 0 : t == DType::Bool ? 2 : 1; };
    return kind(a) == kind(b);
}

// The id and tensor of a parameter record, checked against what the module expects.
inline std::pair<ParamId, TensorData> load_leaf(const record::Value& v, std::string_view path,
                                                const Shape& shape, DType dtype) {
    const std::string id_path = join(path, "id");
    const auto& id_text = v.at("id", path).as<std::string>(id_path);
    auto id = ParamId::parse(id_text);
    EMBER_CHECK(id, Format, "load_record: '", id_path, "' is not a parameter id: \"", id_text, "\"");
    const auto& data = v.at("param", path).as<TensorData>(join(path, "param"));
    EMBER_CHECK(data.shape() == shape, Shape, "load_record: parameter '", path, "' has shape ",
                data.shape().to_string(), " in the record but ", shape.to_string(),
                " in the module");
    EMBER_CHECK(same_kind(data.dtype(), dtype), DType, "load_record: parameter '", path,
                "' holds ", dtype_name(data.dtype()), " values in the record but the module wants ",
                dtype_name(dtype));
    return {*id, data.dtype() == dtype ? data : data.convert(dtype)};
}

// Loads `v` over `field`. `Dev` is the device to load onto (std::monostate: each parameter's own).
template <typename T, typename Dev>
T load(const T& field, const record::Value& v, std::string_view path, const Dev& device) {
    if constexpr (SelfWalking<T>) {
        static_assert(std::is_same_v<Dev, std::monostate>,
                      "a self-walking module loads records onto its parameters' devices only");
        return field.walk_load(v, path);
    } else if constexpr (Module<T>) {
        (void)v.as<record::Map>(path);
        return ember::detail::map_fields<T>(field, [&](std::string_view name, const auto& x) {
            return load(x, v.at(name, path), join(path, name), device);
        });
    } else if constexpr (IsVector<T>::value) {
        const auto& list = v.as<record::List>(path);
        EMBER_CHECK(list.size() == field.size(), Shape, "load_record: '", path, "' has ",
                    list.size(), " items in the record but ", field.size(), " in the module");
        T out;
        out.reserve(field.size());
        for (std::size_t i = 0; i < field.size(); ++i)
            out.push_back(load(field[i], list[i], join(path, std::to_string(i)), device));
        return out;
    } else if constexpr (IsOptional<T>::value) {
        EMBER_CHECK(v.is_null() == !field.has_value(), Format, "load_record: '", path, "' is ",
                    v.is_null() ? "absent" : "present", " in the record but ",
                    field ? "present" : "absent", " in the module");
        if (!field) return T{};
        return T{load(*field, v, path, device)};
    } else if constexpr (IsVariant<T>::value) {  // into the active alternative
        return std::visit(
            [&](const auto& alt) -> T {
                return T(std::in_place_type<Bare<decltype(alt)>>, load(alt, v, path, device));
            },
            field);
    } else if constexpr (IsParam<T>::value || IsRunningState<T>::value) {
        using Value = typename T::Value;
        using B = typename BackendOf<T>::type;
        auto dev = [&] {
            if constexpr (std::is_same_v<Dev, Device<B>>) return device;
            else if constexpr (IsParam<T>::value) return field.device();
            else return field.value().device();
        }();
        if constexpr (IsParam<T>::value) {
            if constexpr (std::is_same_v<typename Value::Kind, Float>) {
                if (v.find("quant", path)) {  // a quantized parameter (ember/quant/param.hpp)
                    const std::string id_path = join(path, "id");
                    const auto& id_text = v.at("id", path).as<std::string>(id_path);
                    auto id = ParamId::parse(id_text);
                    EMBER_CHECK(id, Format, "load_record: '", id_path, "' is not a parameter id: \"", id_text, "\"");
                    return T::from_quantized(*id, quant::detail::param_from_record<B, Value::rank>(
                                                 v, path, field.shape(), dev));
                }
            }
            auto [id, data] = load_leaf(v, path, field.shape(), field.dtype());
            return T(id, Value::from_data(data, dev), field.is_require_grad());
        } else {
            auto current = field.value();
            auto [id, data] = load_leaf(v, path, current.shape(), current.dtype());
            return T(id, Value::from_data(data, dev));
        }
    } else if constexpr (IsTensor<T>::value) {
        if constexpr (std::is_same_v<Dev, Device<typename BackendOf<T>::type>>)
            return field.to_device(device);
        else return field;
    } else {
        return field;
    }
}

// ---- display -------------------------------------------------------------------------------
template <typename T>
std::size_t count_params(const T& m) {
    std::size_t n = 0;
    auto fn = [&](std::string_view, const auto& leaf) {
        if constexpr (IsParam<Bare<decltype(leaf)>>::value) n += leaf.num_params();
    };
    walk(m, "", fn);
    return n;
}

#if !EMBER_FREESTANDING
template <typename T>
void display_value(std::ostream& os, const T& v) {
    if constexpr (std::is_same_v<T, bool>) os << (v ? "true" : "false");
    else if constexpr (requires { os << v; }) os << v;
    else if constexpr (requires { v.to_string(); }) os << v.to_string();
    else if constexpr (IsVector<T>::value || requires { std::tuple_size<T>::value; }) {
        os << '[';
        bool first = true;
        for (const auto& x : v) {
            if (!first) os << ", ";
            first = false;
            display_value(os, x);
        }
        os << ']';
    } else if constexpr (IsOptional<T>::value) {
        if (v) display_value(os, *v);
        else os << "None";
    } else if constexpr (IsVariant<T>::value) {
        std::visit([&](const auto& alt) { display_value(os, alt); }, v);
    } else os << "<constant>";
}
#endif

}  // namespace detail

/// The items a module shows on its one display line (`Linear {d_input: 2, d_output: 3, ...}`).
/// A module customises its display by defining `void display_content(DisplayContent&) const`.
class DisplayContent {
public:
    /// Adds `name: value` (any value with operator<<, to_string(), or a range of them).
    template <typename T>
    DisplayContent& add(std::string_view name, const T& value) {
#if EMBER_FREESTANDING
        (void)value;  // firmware prints no modules: keep the names only
        items_.emplace_back(std::string(name), std::string());
#else
        std::ostringstream os;
        detail::display_value(os, value);
        items_.emplace_back(std::string(name), os.str());
#endif
        return *this;
    }
    /// The items, in order.
    const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

private:
    std::vector<std::pair<std::string, std::string>> items_;
};

#if !EMBER_FREESTANDING
namespace detail {
template <typename T>
void display_field(std::ostream& os, const T& x, int indent);

// Vectors and optionals of modules display as trees; of anything else, as values.
template <typename T>
struct IsModuleList : std::false_type {};
template <Module M, typename A>
struct IsModuleList<std::vector<M, A>> : std::true_type {};
template <typename T>
struct IsModuleOptional : std::false_type {};
template <Module M>
struct IsModuleOptional<std::optional<M>> : std::true_type {};

template <Module M>
void display_module(std::ostream& os, const M& m, int indent) {
    const std::size_t params = count_params(m);
    if constexpr (requires(DisplayContent& c) { m.display_content(c); }) {
        DisplayContent c;
        m.display_content(c);
        os << M::ember_type_name << " {";
        bool first = true;
        for (const auto& [k, v] : c.items()) {
            os << (first ? "" : ", ") << k << ": " << v;
            first = false;
        }
        if (params) os << (first ? "" : ", ") << "params: " << params;
        os << '}';
    } else if constexpr (M::ember_field_names.size() == 0) {
        os << M::ember_type_name;
    } else {
        const std::string pad(std::size_t(indent + 2), ' ');
        os << M::ember_type_name << " {\n";
        ember::detail::for_each_field(m, [&](std::string_view name, const auto& x) {
            os << pad << name << ": ";
            display_field(os, x, indent + 2);
            os << '\n';
        });
        os << pad << "params: " << params << '\n' << std::string(std::size_t(indent), ' ') << '}';
    }
}

template <typename T>
void display_field(std::ostream& os, const T& x, int indent) {
    if constexpr (Module<T>) {
        display_module(os, x, indent);
    } else if constexpr (IsModuleList<T>::value) {
        const std::string pad(std::size_t(indent + 2), ' ');
        os << "[\n";
        for (const auto& m : x) {
            os << pad;
            display_module(os, m, indent + 2);
            os << ",\n";
        }
        os << std::string(std::size_t(indent), ' ') << ']';
    } else if constexpr (IsModuleOptional<T>::value) {
        if (x) display_module(os, *x, indent);
        else os << "None";
    } else if constexpr (IsParam<T>::value) {
        os << "Param {shape: " << x.shape().to_string() << ", dtype: " << dtype_name(x.dtype())
           << (x.is_require_grad() ? "" : ", frozen");
        if (x.quantized()) os << ", quantized: " << x.quantized()->weight.scheme().to_string();
        os << '}';
    } else if constexpr (IsRunningState<T>::value) {
        os << "RunningState {shape: " << x.shape().to_string() << '}';
    } else if constexpr (IsTensor<T>::value) {
        os << "Tensor {shape: " << x.shape().to_string() << ", dtype: " << dtype_name(x.dtype())
           << '}';
    } else {
        display_value(os, x);
    }
}
}  // namespace detail
#endif

/// The type of `m.valid()`: the same module on the inner backend (itself off autodiff).
template <typename M>
using ValidType = typename detail::Valid<M>::type;
/// The backend a module's tensors live on (void for a module without tensors).
template <typename M>
using BackendOf = typename detail::BackendOf<M>::type;

namespace detail {
// to_device's and valid's rebuild of a module's fields (what their leaf functions' on_module
// hooks call for a module below).
template <typename M, typename Dev>
M to_device_fields(const M& m, const Dev& device);
template <typename M>
typename Valid<M>::type valid_fields(const M& m);

// The leaf functions of visit and map with their types erased, for CompiledWalk modules: one
// entry a parameter type (float, rank 1-4), so a module's visit_params and map_params are
// compiled once whatever the visitor.
/// What visit_params calls for each parameter.
template <typename B>
class ParamVisitor {
  public:
    /// Visits rank-1 parameter `p` at `path`.
    virtual void operator()(std::string_view path, const Param<Tensor<B, 1>>& p) = 0;
    /// Visits rank-2 parameter `p` at `path`.
    virtual void operator()(std::string_view path, const Param<Tensor<B, 2>>& p) = 0;
    /// Visits rank-3 parameter `p` at `path`.
    virtual void operator()(std::string_view path, const Param<Tensor<B, 3>>& p) = 0;
    /// Visits rank-4 parameter `p` at `path`.
    virtual void operator()(std::string_view path, const Param<Tensor<B, 4>>& p) = 0;

  protected:
    ~ParamVisitor() = default;
};
/// What map_params replaces each parameter with.
template <typename B>
class ParamMapper {
  public:
    /// The rank-1 parameter that replaces `p` at `path`.
    virtual Param<Tensor<B, 1>> operator()(std::string_view path, const Param<Tensor<B, 1>>& p) = 0;
    /// The rank-2 parameter that replaces `p` at `path`.
    virtual Param<Tensor<B, 2>> operator()(std::string_view path, const Param<Tensor<B, 2>>& p) = 0;
    /// The rank-3 parameter that replaces `p` at `path`.
    virtual Param<Tensor<B, 3>> operator()(std::string_view path, const Param<Tensor<B, 3>>& p) = 0;
    /// The rank-4 parameter that replaces `p` at `path`.
    virtual Param<Tensor<B, 4>> operator()(std::string_view path, const Param<Tensor<B, 4>>& p) = 0;

  protected:
    ~ParamMapper() = default;
};

// visit's visitor `V` behind ParamVisitor.
template <typename B, typename V>
class ParamVisitorOf final : public ParamVisitor<B> {
  public:
    explicit ParamVisitorOf(V& v) : v_(v) {}
    void operator()(std::string_view path, const Param<Tensor<B, 1>>& p) override { v_(path, p); }
    void operator()(std::string_view path, const Param<Tensor<B, 2>>& p) override { v_(path, p); }
    void operator()(std::string_view path, const Param<Tensor<B, 3>>& p) override { v_(path, p); }
    void operator()(std::string_view path, const Param<Tensor<B, 4>>& p) override { v_(path, p); }

  private:
    V& v_;
};
// map's mapper `F` behind ParamMapper.
template <typename B, typename F>
class ParamMapperOf final : public ParamMapper<B> {
  public:
    explicit ParamMapperOf(F& f) : f_(f) {}
    Param<Tensor<B, 1>> operator()(std::string_view path, const Param<Tensor<B, 1>>& p) override {
        return Param<Tensor<B, 1>>(f_(path, p));
    }
    Param<Tensor<B, 2>> operator()(std::string_view path, const Param<Tensor<B, 2>>& p) override {
        return Param<Tensor<B, 2>>(f_(path, p));
    }
    Param<Tensor<B, 3>> operator()(std::string_view path, const Param<Tensor<B, 3>>& p) override {
        return Param<Tensor<B, 3>>(f_(path, p));
    }
    Param<Tensor<B, 4>> operator()(std::string_view path, const Param<Tensor<B, 4>>& p) override {
        return Param<Tensor<B, 4>>(f_(path, p));
    }

  private:
    F& f_;
};

template <typename M, typename B>
void visit_params(const M& m, std::string_view path, ParamVisitor<B>& v);
template <typename M, typename B>
M map_params(const M& m, std::string_view path, ParamMapper<B>& f);

// visit_params' leaf function: a CompiledWalk module below goes to its own visit_params.
template <typename B>
struct VisitParamsFn {
    ParamVisitor<B>& v;
    template <typename T>
    void on_module(const T& m, std::string_view path) {
        visit_params<T, B>(m, path, v);
    }
    template <typename L>
    void operator()(std::string_view path, const L& leaf) {
        if constexpr (IsParam<L>::value) v(path, leaf);
    }
};
// map_params' leaf function: a CompiledWalk module below goes to its own map_params.
template <typename B>
struct MapParamsFn {
    ParamMapper<B>& f;
    template <typename T>
    T on_module(const T& m, std::string_view path) {
        return map_params<T, B>(m, path, f);
    }
    template <typename L>
    L operator()(std::string_view path, const L& leaf) {
        if constexpr (IsParam<L>::value)
            return f(path, leaf);
        else
            return leaf;
    }
};

/// Calls `v` for each parameter of module `m` at `path` (visit on a CompiledWalk module).
template <typename M, typename B>
void visit_params(const M& m, std::string_view path, ParamVisitor<B>& v) {
    if constexpr (SelfWalking<M>) {
        m.walk_visit(path, v);
    } else {
        VisitParamsFn<B> fn{v};
        walk_fields(m, path, fn);
    }
}
/// Module `m` at `path` with each parameter replaced by `f`'s (map on a CompiledWalk module).
template <typename M, typename B>
M map_params(const M& m, std::string_view path, ParamMapper<B>& f) {
    if constexpr (SelfWalking<M>) {
        return m.walk_map(path, f);
    } else {
        MapParamsFn<B> fn{f};
        return rebuild_fields<Same>(m, path, fn);
    }
}

// to_device's leaf function; a CompiledWalk module below goes to its own to_device.
template <typename Dev>
struct ToDeviceFn {
    const Dev& device;
    template <typename T>
    T on_module(const T& m, std::string_view) const {
        return to_device_fields(m, device);
    }
    template <typename L>
    L operator()(std::string_view, const L& leaf) const {
        using B = typename BackendOf<L>::type;
        if constexpr (std::is_void_v<B>) {
            return leaf;
        } else if constexpr (!std::is_same_v<Device<B>, Dev>) {
            return leaf;
        } else if constexpr (IsParam<L>::value) {
            return leaf.to_device(device);
        } else if constexpr (IsRunningState<L>::value) {
            return leaf.map([&](auto t) { return t.to_device(device); });
        } else {
            return leaf.to_device(device);
        }
    }
};
// valid's leaf function; a CompiledWalk module below goes to its own valid.
struct ValidFn {
    template <typename T>
    typename Valid<T>::type on_module(const T& m, std::string_view) const {
        return valid_fields(m);
    }
    template <typename L>
    typename Valid<L>::type operator()(std::string_view, const L& leaf) const {
        using Out = typename Valid<L>::type;
        if constexpr (IsParam<L>::value) {
            return Out(leaf.id(), leaf.val().inner(), leaf.is_require_grad());
        } else if constexpr (IsRunningState<L>::value) {
            return Out(leaf.id(), leaf.value().inner());
        } else if constexpr (IsTensor<L>::value) {
            return leaf.inner();
        } else {
            return Out(leaf);
        }
    }
};

template <typename M, typename Dev>
M to_device_fields(const M& m, const Dev& device) {
    if constexpr (SelfWalking<M>) {
        if constexpr (std::is_same_v<Dev, Device<typename BackendOf<M>::type>>)
            return m.walk_to_device(device);
        else
            return m;  // another backend's device: nothing of it here (as ToDeviceFn's leaves)
    } else {
        ToDeviceFn<Dev> fn{device};
        return rebuild_fields<Same>(m, "", fn);
    }
}
template <typename M>
typename Valid<M>::type valid_fields(const M& m) {
    if constexpr (SelfWalking<M>) {
        return m.walk_valid();
    } else {
        ValidFn fn;
        return rebuild_fields<Valid>(m, "", fn);
    }
}

}  // namespace detail

/// Calls `visitor(path, param)` for each parameter (`path` like "layers.0.weight").
template <Module M, typename V>
void visit(const M& m, V&& visitor) {
    if constexpr (detail::CompiledWalk<M>) {
        detail::ParamVisitorOf<BackendOf<M>, std::remove_reference_t<V>> v(visitor);
        detail::visit_params<M, BackendOf<M>>(m, "", v);
    } else {
        auto fn = [&](std::string_view path, const auto& leaf) {
            if constexpr (detail::IsParam<detail::Bare<decltype(leaf)>>::value) visitor(path, leaf);
        };
        detail::walk(m, "", fn);
    }
}
/// The module with each parameter replaced by `mapper(path, param)` (a Param of the same type).
template <Module M, typename F>
M map(const M& m, F&& mapper) {
    if constexpr (detail::CompiledWalk<M>) {
        detail::ParamMapperOf<BackendOf<M>, std::remove_reference_t<F>> f(mapper);
        return detail::map_params<M, BackendOf<M>>(m, "", f);
    } else {
        auto fn = [&](std::string_view path, const auto& leaf) {
            using L = detail::Bare<decltype(leaf)>;
            if constexpr (detail::IsParam<L>::value)
                return L(mapper(path, leaf));
            else
                return leaf;
        };
        return detail::rebuild<detail::Same>(m, "", fn);
    }
}
/// Number of trainable elements (parameters, frozen ones included; running statistics not).
template <Module M>
std::size_t num_params(const M& m) {
    return detail::count_params(m);
}
/// The distinct devices the module's tensors are on.
template <Module M>
    requires(!std::is_void_v<BackendOf<M>>)
std::vector<Device<BackendOf<M>>> devices(const M& m) {
    std::vector<Device<BackendOf<M>>> out;
    auto add = [&](const Device<BackendOf<M>>& d) {
        for (const auto& x : out)
            if (x == d) return;
        out.push_back(d);
    };
    auto fn = [&](std::string_view, const auto& leaf) {
        using L = detail::Bare<decltype(leaf)>;
        if constexpr (detail::IsParam<L>::value) add(leaf.device());
        else if constexpr (detail::IsRunningState<L>::value) add(leaf.value().device());
        else if constexpr (detail::IsTensor<L>::value) add(leaf.device());
    };
    detail::walk(m, "", fn);
    return out;
}
/// The module with every tensor moved to `device`; parameters keep their ids and gradient
/// requirement and become new leaves there.
template <Module M, typename Dev>
M to_device(const M& m, const Dev& device) {
    return detail::to_device_fields(m, device);
}
/// Like to_device, and the parameters are cut from any graph (Burn's fork).
template <Module M, typename Dev>
M fork(const M& m, const Dev& device) {
    return to_device(m, device);  // Params are always re-made as detached leaves on a move
}
/// The module with every parameter frozen: saved in records, never updated by optimizers.
template <Module M>
M no_grad(const M& m) {
    return map(m, [](std::string_view, const auto& p) { return p.set_require_grad(false); });
}
/// The same module on the inner backend, outside any graph (Burn's valid(); eval mode).
template <Module M>
ValidType<M> valid(const M& m) {
    return detail::valid_fields(m);
}
/// The module's state as a record tree (parameters and running states; constants are not saved).
template <Module M>
record::Value into_record(const M& m) {
    return detail::to_record(m);
}
/// The module with the record's tensors loaded (converted to the module's dtypes), on each
/// parameter's device. Lazy parameters are not initialised. Throws ember::Error naming the
/// parameter when the record does not fit.
template <Module M>
M load_record(const M& m, const record::Value& record) {
    return detail::load(m, record, "", std::monostate{});
}
/// load_record, with every tensor created on `device`.
template <Module M, typename Dev>
M load_record(const M& m, const record::Value& record, const Dev& device) {
    return detail::load(m, record, "", device);
}
#if !EMBER_FREESTANDING
/// Writes the module with `recorder` (which adds its file extension).
template <Module M, typename R>
void save_file(const M& m, const std::filesystem::path& path, const R& recorder) {
    recorder.record(into_record(m), path);
}
/// Reads a record written by save_file and loads it onto `device`.
template <Module M, typename R, typename Dev>
M load_file(const M& m, const std::filesystem::path& path, const R& recorder, const Dev& device) {
    return load_record(m, recorder.load(path), device);
}
/// Writes the module's display tree.
template <Module M>
std::ostream& display(std::ostream& os, const M& m) {
    detail::display_module(os, m, 0);
    return os;
}
#endif

}  // namespace ember::module

/// Declares a module's fields (all of them, in order) and generates its methods: visit, map,
/// num_params, devices, to_device, fork, no_grad, valid, into_record, load_record, save_file,
/// load_file and operator<<. Modules are aggregates; fields may be modules, Params,
/// RunningStates, tensors (constants), std::vector/std::optional of modules, or plain values.
/// Every method is a template (a defaulted `M_` where it has no other parameter) whose body
/// depends on it: a module that is not a template (Relu, the pools) then instantiates the
/// generic walks only where they are called, not in every file that includes it.
#define EMBER_MODULE(Type, ...)                                                                \
    EMBER_DETAIL_FIELDS(Type __VA_OPT__(, ) __VA_ARGS__)                                       \
    using ember_module_tag = void;                                                             \
    /** Calls `visitor(path, param)` for each parameter. */                                    \
    template <typename V>                                                                      \
    void visit(V&& visitor) const {                                                            \
        ::ember::module::visit(*this, visitor);                                                \
    }                                                                                          \
    /** The module with each parameter replaced by `mapper(path, param)`. */                   \
    template <typename F>                                                                      \
    Type map(F&& mapper) const {                                                               \
        return ::ember::module::map(*this, mapper);                                            \
    }                                                                                          \
    /** Number of parameter elements. */                                                       \
    template <typename M_ = Type>                                                              \
    std::size_t num_params() const {                                                           \
        return ::ember::module::num_params(static_cast<const M_&>(*this));                     \
    }                                                                                          \
    /** The distinct devices of the module's tensors. */                                       \
    template <typename M_ = Type>                                                              \
    auto devices() const {                                                                     \
        return ::ember::module::devices(static_cast<const M_&>(*this));                        \
    }                                                                                          \
    /** Every tensor moved to `device`. */                                                     \
    template <typename Dev>                                                                    \
    Type to_device(const Dev& device) const {                                                  \
        return ::ember::module::to_device(*this, device);                                      \
    }                                                                                          \
    /** Moved to `device` and detached from any graph. */                                      \
    template <typename Dev>                                                                    \
    Type fork(const Dev& device) const {                                                       \
        return ::ember::module::fork(*this, device);                                           \
    }                                                                                          \
    /** Every parameter frozen. */                                                             \
    template <typename M_ = Type>                                                              \
    Type no_grad() const {                                                                     \
        return ::ember::module::no_grad(static_cast<const M_&>(*this));                        \
    }                                                                                          \
    /** The same module on the inner backend (eval mode). */                                   \
    template <typename M_ = Type>                                                              \
    auto valid() const {                                                                       \
        return ::ember::module::valid(static_cast<const M_&>(*this));                          \
    }                                                                                          \
    /** The parameters and running states as a record tree. */                                 \
    template <typename M_ = Type>                                                              \
    ::ember::record::Value into_record() const {                                               \
        return ::ember::module::into_record(static_cast<const M_&>(*this));                    \
    }                                                                                          \
    /** The module with `record` loaded over it. */                                            \
    template <typename M_ = Type>                                                              \
    Type load_record(const ::ember::record::Value& record) const {                             \
        return ::ember::module::load_record(static_cast<const M_&>(*this), record);            \
    }                                                                                          \
    /** Weights quantized by `quantizer` (Burn's quantize_weights; ember/quant/module.hpp). */ \
    template <typename Q>                                                                      \
    Type quantize_weights(const Q& quantizer) const {                                          \
        return ::ember::quant::quantize_weights(*this, quantizer);                             \
    }                                                                                          \
    EMBER_DETAIL_MODULE_HOSTED(Type)

#if EMBER_FREESTANDING
#define EMBER_DETAIL_MODULE_HOSTED(Type)
#else
/// EMBER_MODULE's members that need files and text streams (none in firmware).
#define EMBER_DETAIL_MODULE_HOSTED(Type)                                                    \
    /** Saves with `recorder` (which adds its extension). */                                \
    template <typename R>                                                                   \
    void save_file(const std::filesystem::path& path, const R& recorder) const {            \
        ::ember::module::save_file(*this, path, recorder);                                  \
    }                                                                                       \
    /** Loads a file saved by save_file onto `device`. */                                   \
    template <typename R, typename Dev>                                                     \
    Type load_file(const std::filesystem::path& path, const R& recorder, const Dev& device) \
        const {                                                                             \
        return ::ember::module::load_file(*this, path, recorder, device);                   \
    }                                                                                       \
    /** The display tree, as Burn prints modules (maybe unused: no warning for */           \
    /** modules in an anonymous namespace). */                                              \
    template <typename M_ = Type>                                                           \
    [[maybe_unused]] friend std::ostream& operator<<(std::ostream& os, const Type& m) {     \
        return ::ember::module::display(os, static_cast<const M_&>(m));                     \
    }
#endif

// The quantization of modules (quantize_weights, calibration, the Dequantize mapper) is a layer
// above modules (include/ember/quant/module.hpp; DESIGN.md's layer 6): the quantize_weights
// member names it through these declarations, and a program that quantizes includes
// <ember/quant/module.hpp> (<ember/nn.hpp> does).
namespace ember::quant {
template <typename C>
struct Quantizer;
template <module::Module M, typename C>
M quantize_weights(const M& m, const Quantizer<C>& quantizer);
}  // namespace ember::quant
