#pragma once
// Param: a module's trainable tensor with a stable identity. Optimizers key their state by
// ParamId and records store it, so the id survives saving, loading, moving between devices and
// optimizer steps. A Param may be lazy: built modules hold an initializer, and the first val()
// runs it. load_record never runs it, so "init then load" allocates no random weights.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "../detail/sync.hpp"
#include "../export.hpp"
#include "../quant/param.hpp"
#include "../tensor/tensor.hpp"

namespace ember {

/// A parameter's identity: unique per process run, kept by records and optimizer state.
struct EMBER_API ParamId {
    std::uint64_t value = 0;  ///< the id's bits

    /// A fresh id (random-looking and unique: a counter mixed with a per-process seed).
    /// Defined in the ember library (src/module/param.cpp), so that the program and ember's
    /// shared libraries share one counter, and so that a model file does not parse <random>.
    EMBER_API static ParamId make();
    /// Sixteen lower-case hex digits.
    std::string to_string() const {
        static constexpr char hex[] = "0123456789abcdef";
        std::string s(16, '0');
        for (int i = 0; i < 16; ++i) s[15 - i] = hex[(value >> (4 * i)) & 0xf];
        return s;
    }
    /// Parses to_string()'s form; nullopt when `s` is not 1 to 16 hex digits.
    static std::optional<ParamId> parse(std::string_view s) {
        if (s.empty() || s.size() > 16) return std::nullopt;
        std::uint64_t v = 0;
        for (char c : s) {
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0) return std::nullopt;
            v = (v << 4) | std::uint64_t(d);
        }
        return ParamId{v};
    }
    /// Ids compare by value.
    friend auto operator<=>(const ParamId&, const ParamId&) = default;
};

template <typename T>
class Param;

/// A module parameter holding a tensor (`Param<Tensor<B, 2>>`).
template <Backend B, std::size_t D, typename K>
class Param<Tensor<B, D, K>> {
public:
    /// The tensor type.
    using Value = Tensor<B, D, K>;
    /// Builds the tensor on first use, on the given device.
    using Initializer = std::function<Value(const Device<B>&)>;

    /// A parameter with a fresh id; float parameters require gradients.
    explicit Param(Value value);
    /// A parameter with the given id and gradient requirement.
    Param(ParamId id, Value value, bool require_grad);
    // Copies, moves and the destructor: the defaults, defined out of the class (so not
    // inline): on Dispatch, whose parameters ember_dispatch compiles once (extern template), a
    // module's own copies, moves and destructor are a call a parameter instead of the three
    // reference counts of each inlined (a file holding a model compiles less: the GPT probe's
    // object 5 % smaller). On the other backends the compiler still sees the bodies.
    Param(const Param& other);
    Param(Param&& other) noexcept;
    Param& operator=(const Param& other);
    Param& operator=(Param&& other) noexcept;
    ~Param();
    /// A lazy parameter: `init(device)` runs on the first val(), never when a record is loaded
    /// over it. `shape` and `dtype` are what init will produce (records are checked against them).
    static Param uninitialized(ParamId id, Initializer init, Device<B> device, Shape shape,
                               bool require_grad = std::same_as<K, Float>,
                               DType dtype = default_dtype()) {
        Param p;
        p.id_ = id;
        p.require_grad_ = require_grad && std::same_as<K, Float>;
        p.lazy_ = std::make_shared<Lazy>();
        p.lazy_->init = std::move(init);
        p.lazy_->device = std::move(device);
        p.lazy_->shape = shape;
        p.lazy_->dtype = dtype;
        return p;
    }

    /// The quantized state of a float parameter made by quantize_weights (or loaded from a
    /// quantized record): int8 values, parameters and activation handling. val() gives the
    /// dequantized tensor (computed on first use); layers with an integer kernel never ask.
    using Quantized = quant::QuantizedParam<B, D>;
    /// A frozen parameter holding quantized values.
    static Param from_quantized(ParamId id, std::shared_ptr<const Quantized> q) {
        auto weight = q->weight;
        Param p = uninitialized(
            id, [weight](const Device<B>&) { return weight.dequantize(); }, weight.device(),
            weight.shape(), false);
        p.quant_ = std::move(q);
        return p;
    }
    /// The quantized state, or null for a plain parameter.
    const Quantized* quantized() const { return quant_.get(); }
    /// The quantized state, shared (null for a plain parameter).
    const std::shared_ptr<const Quantized>& quantized_ptr() const { return quant_; }

    /// The tensor (initialising a lazy parameter on first use; copies of a lazy parameter share
    /// one initialisation).
    Value val() const;
    /// The id.
    ParamId id() const { return id_; }
    /// Whether optimizers update it (float parameters only).
    bool is_require_grad() const { return require_grad_; }
    /// Whether the tensor exists (false for a lazy parameter not yet used).
    bool is_initialized() const;
    /// The shape, without initialising.
    Shape shape() const;
    /// The dtype, without initialising.
    DType dtype() const;
    /// The device, without initialising.
    Device<B> device() const;
    /// Number of elements.
    std::size_t num_params() const;

    /// The same parameter (same id) with another gradient requirement.
    Param set_require_grad(bool require) const;
    /// The same id holding `f(val())` (re-marked as a leaf that requires grad as before).
    /// A lazy parameter stays lazy: `f` runs after its initializer.
    template <typename F>
    Param map(F&& f) const {
        Param p = *this;
        p.quant_.reset();  // the mapped values are not the quantized ones any more
        if (value_) p.value_ = mark(f(*value_));
        else p.lazy_ = relazy(std::forward<F>(f));
        return p;
    }
    /// The same id and requirement holding `value`.
    Param with_value(Value value) const;
    /// Moves the tensor to `device`. A lazy parameter stays lazy and shares its draw with the
    /// original (copies must agree), moving it on first use.
    Param to_device(const Device<B>& device) const;

    /// The backend's float dtype (or int dtype for Int parameters).
    static DType default_dtype() {
        if constexpr (std::same_as<K, Float>) return dtype_of<typename B::FloatElem>();
        else if constexpr (std::same_as<K, Int>) return dtype_of<typename B::IntElem>();
        else return DType::Bool;
    }

private:
    struct Lazy {
        detail::OnceFlag once;
        Initializer init;
        std::optional<Value> value;
        Device<B> device{};
        Shape shape;
        DType dtype = DType::F32;
    };
    Param() = default;

    // A parameter is always a leaf: detached from whatever graph produced it, then marked.
    Value mark(Value v) const {
        if constexpr (std::same_as<K, Float>) return v.detach().set_require_grad(require_grad_);
        else return v;
    }
    template <typename F>
    std::shared_ptr<Lazy> relazy(F&& f) const {
        auto next = std::make_shared<Lazy>();
        next->init = [prev = lazy_, f = std::forward<F>(f)](const Device<B>& device) {
            (void)device;
            Param tmp;
            tmp.lazy_ = prev;
            return f(tmp.val());
        };
        next->device = lazy_->device;
        next->shape = lazy_->shape;
        next->dtype = lazy_->dtype;
        return next;
    }

    ParamId id_;
    std::optional<Value> value_;
    std::shared_ptr<Lazy> lazy_;
    std::shared_ptr<const Quantized> quant_;
    bool require_grad_ = false;
};

// The members a walk over a model's parameters calls, defined out of the class, so not inline:
// where an `extern template` declaration names the class (include/ember/dispatch/nn.hpp for
// Dispatch's), a file that calls them compiles the calls only, not the bodies (compilers
// instantiate an inline function to consider inlining it, even one declared extern).

template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>>::Param(Value value)
    : Param(ParamId::make(), std::move(value), std::same_as<K, Float>) {}

template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>>::Param(ParamId id, Value value, bool require_grad)
    : id_(id), require_grad_(require_grad && std::same_as<K, Float>) {
    value_ = mark(std::move(value));
}

template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>>::Param(const Param& other) = default;
template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>>::Param(Param&& other) noexcept = default;
template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>>& Param<Tensor<B, D, K>>::operator=(const Param& other) = default;
template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>>& Param<Tensor<B, D, K>>::operator=(Param&& other) noexcept = default;
template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>>::~Param() = default;

template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> Param<Tensor<B, D, K>>::val() const {
    if (value_) return *value_;
    detail::call_once(lazy_->once, [&] { lazy_->value = mark(lazy_->init(lazy_->device)); });
    return *lazy_->value;
}

template <Backend B, std::size_t D, typename K>
bool Param<Tensor<B, D, K>>::is_initialized() const {
    return value_ || (lazy_ && lazy_->value);
}

template <Backend B, std::size_t D, typename K>
Shape Param<Tensor<B, D, K>>::shape() const {
    return is_initialized() ? val().shape() : lazy_->shape;
}

template <Backend B, std::size_t D, typename K>
DType Param<Tensor<B, D, K>>::dtype() const {
    return is_initialized() ? val().dtype() : lazy_->dtype;
}

template <Backend B, std::size_t D, typename K>
Device<B> Param<Tensor<B, D, K>>::device() const {
    return is_initialized() ? val().device() : lazy_->device;
}

template <Backend B, std::size_t D, typename K>
std::size_t Param<Tensor<B, D, K>>::num_params() const {
    return shape().num_elements();
}

template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>> Param<Tensor<B, D, K>>::set_require_grad(bool require) const {
    Param p = *this;
    p.require_grad_ = require && std::same_as<K, Float>;
    if (p.value_)
        p.value_ = p.mark(std::move(*p.value_));
    else if (p.lazy_)
        p.lazy_ = p.relazy([](Value v) { return v; });
    return p;
}

template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>> Param<Tensor<B, D, K>>::with_value(Value value) const {
    return Param(id_, std::move(value), require_grad_);
}

template <Backend B, std::size_t D, typename K>
Param<Tensor<B, D, K>> Param<Tensor<B, D, K>>::to_device(const Device<B>& device) const {
    if (quant_ && quant_->weight.device() == device) return *this;
    Param p = map([device](Value v) { return v.to_device(device); });
    if (p.lazy_ && !p.lazy_->value) p.lazy_->device = device;
    return p;
}

}  // namespace ember
