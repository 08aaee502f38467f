// ember::Dispatch: device strings, the stack registry, and the ops written by hand (devices,
// moves between stacks, autodiff). The generated ops are in ops.cpp.
#include "ember/dispatch/dispatch.hpp"

#include <array>
#include <charconv>
#include <cmath>

#include "ember/tensor/error.hpp"
#include "table.hpp"

namespace ember {

namespace {

constexpr std::array<const char*, 3> kKindNames{"cpu", "vulkan", "cuda"};

// The backends this build has, indexed by DispatchKind (null: not compiled in).
const std::array<std::optional<detail::dispatch::BackendEntry>, 3>& registry() {
    static const std::array<std::optional<detail::dispatch::BackendEntry>, 3> r = [] {
        std::array<std::optional<detail::dispatch::BackendEntry>, 3> a{};
        a[0] = detail::dispatch::cpu_backend();
#if defined(EMBER_DISPATCH_VULKAN)
        a[1] = detail::dispatch::vulkan_backend();
#endif
#if defined(EMBER_DISPATCH_CUDA)
        a[2] = detail::dispatch::cuda_backend();
#endif
        for (std::size_t k = 0; k < a.size(); ++k)
            if (a[k])
                detail::dispatch::published_stacks[k].store(a[k]->stacks,
                                                            std::memory_order_release);
        return a;
    }();
    return r;
}

std::string backends_list() {
    std::string s;
    for (const auto& b : Dispatch::backends()) s += (s.empty() ? "" : ", ") + b;
    return s;
}

const detail::dispatch::StackEntry& entry(const DispatchDevice& d) {
    const auto k = static_cast<std::size_t>(d.kind());
    const auto& b = registry()[k];
    EMBER_CHECK(b.has_value(), Device, "ember::Dispatch: this build has no ", kKindNames[k],
                " backend (device ", d.to_string(), "); it has: ", backends_list());
    return b->stacks[(d.has_fusion() ? 2 : 0) + (d.has_autodiff() ? 1 : 0)];
}

}  // namespace

// ---- devices ----

std::string DispatchDevice::to_string() const {
    std::string s = kKindNames[static_cast<std::size_t>(kind_)];
    if (kind_ != DispatchKind::Cpu) s += ":" + std::to_string(index_);
    if (fusion_) s += "+fusion";
    if (autodiff_) s += "+autodiff";
    return s;
}

DispatchDevice DispatchDevice::parse(std::string_view text) {
    const std::string quoted = "\"" + std::string(text) + "\"";
    auto fail = [&](const std::string& why) -> DispatchDevice {
        EMBER_FAIL(Device, "ember::Dispatch: bad device string ", quoted, ": ", why,
                   " (expected cpu, vulkan[:i] or cuda[:i], then +fusion and/or +autodiff)");
    };
    const std::size_t plus = text.find('+');
    std::string_view head = text.substr(0, plus);
    std::string_view name = head.substr(0, head.find(':'));
    DispatchDevice d;
    std::size_t k = 0;
    while (k < kKindNames.size() && name != kKindNames[k]) ++k;
    if (k == kKindNames.size()) return fail("unknown backend \"" + std::string(name) + "\"");
    d.kind_ = static_cast<DispatchKind>(k);
    if (head.size() > name.size()) {
        std::string_view idx = head.substr(name.size() + 1);
        std::uint32_t i = 0;
        auto [end, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), i);
        if (idx.empty() || ec != std::errc{} || end != idx.data() + idx.size())
            return fail("the device index \"" + std::string(idx) + "\" is not a number");
        if (d.kind_ == DispatchKind::Cpu && i != 0) return fail("the CPU has only device 0");
        d.index_ = i;
    }
    for (std::size_t at = plus; at != std::string_view::npos;) {
        const std::size_t next = text.find('+', at + 1);
        std::string_view flag = text.substr(at + 1, next == std::string_view::npos ? next : next - at - 1);
        if (flag != "fusion" && flag != "autodiff")
            return fail("unknown decorator \"" + std::string(flag) + "\"");
        bool& f = flag == "fusion" ? d.fusion_ : d.autodiff_;
        if (f) return fail("\"" + std::string(flag) + "\" given twice");
        f = true;
        at = next;
    }
    EMBER_CHECK(registry()[k].has_value(), Device, "ember::Dispatch: device string ", quoted,
                " names the ", kKindNames[k], " backend, which this build lacks; it has: ",
                backends_list());
    return d;
}

namespace detail::dispatch {

std::atomic<const StackEntry*> published_stacks[3] = {nullptr, nullptr, nullptr};

const StackEntry& registry_entry(const Stack& s) {
    return entry(s);
}

void mixed_stacks(const char* op, const DispatchDevice& a, const DispatchDevice& b) {
    EMBER_FAIL(Device, "ember::Dispatch: ", op, ": tensors of two stacks, ", a.to_string(), " and ",
               b.to_string(), " (move one with to_device)");
}

void no_operand(const char* op) {
    EMBER_FAIL(Argument, "ember::Dispatch: ", op, ": no tensor given");
}

void no_handle() {
    EMBER_FAIL(Argument, "ember::Dispatch: a default-made tensor has no data");
}

}  // namespace detail::dispatch

// ---- Dispatch ----

using detail::dispatch::base;
using detail::dispatch::core_table;
using detail::dispatch::handle_of;

std::string Dispatch::name() { return "dispatch"; }

std::vector<std::string> Dispatch::backends() {
    std::vector<std::string> r;
    for (std::size_t k = 0; k < kKindNames.size(); ++k)
        if (registry()[k]) r.emplace_back(kKindNames[k]);
    return r;
}

void Dispatch::seed(std::uint64_t s) {
    for (const auto& b : registry())
        if (b) b->seed(s);
}

void Dispatch::sync(const Device& d) { core_table(d).sync(d); }

TransactionData Dispatch::tr_execute(TransactionPrimitive<FT, FT, FT> p) {
    const FT* first = !p.floats.empty()  ? &p.floats[0]
                      : !p.ints.empty()  ? &p.ints[0]
                      : !p.bools.empty() ? &p.bools[0]
                                         : nullptr;
    if (first == nullptr) return {};
    // One stack (up to autodiff): its backend reads them all with one wait. Several: each
    // tensor on its own, as into_data would.
    const Device b = base(handle_of(*first).device);
    bool one_stack = true;
    bool track = false;
    for (const auto* list : {&p.floats, &p.ints, &p.bools})
        for (const FT& t : *list) one_stack = one_stack && base(handle_of(t).device) == b;
    if (!one_stack) return detail::dispatch::Ops::tr_execute(std::move(p));
    for (const FT& t : p.floats) track = track || handle_of(t).device.has_autodiff();
    const Device s = b.autodiff(track);
    return core_table(s).tr_execute(s, std::move(p));
}

Dispatch::FT Dispatch::float_to_device(FT t, const Device& d) {
    const Device from = handle_of(t).device;
    if (from == d) return t;
    if (base(from) == base(d)) return d.has_autodiff() ? from_inner(std::move(t)) : inner(std::move(t));
    // Same backend and decorators on another device index: the backend moves it (keeping
    // the graph under autodiff); otherwise the values travel through TensorData.
    if (from.kind() == d.kind() && from.has_fusion() == d.has_fusion()) {
        FT moved = core_table(from).float_to_device(from, std::move(t), d.autodiff(from.has_autodiff()));
        return float_to_device(std::move(moved), d);
    }
    return float_from_data(float_into_data(std::move(t)), d);
}

Dispatch::FT Dispatch::int_to_device(FT t, const Device& d) {
    const Device from = handle_of(t).device;
    if (from == base(d)) return t;
    if (from.kind() == d.kind() && from.has_fusion() == d.has_fusion())
        return core_table(from).int_to_device(from, std::move(t), base(d));
    return int_from_data(int_into_data(std::move(t)), d);
}

Dispatch::FT Dispatch::bool_to_device(FT t, const Device& d) {
    const Device from = handle_of(t).device;
    if (from == base(d)) return t;
    if (from.kind() == d.kind() && from.has_fusion() == d.has_fusion())
        return core_table(from).bool_to_device(from, std::move(t), base(d));
    return bool_from_data(bool_into_data(std::move(t)), d);
}

Gradients Dispatch::backward(FT root) {
    const Device s = handle_of(root).device;
    EMBER_CHECK(s.has_autodiff(), Device, "ember::Dispatch: backward on a tensor of ", s.to_string(),
                ", which has no autodiff (make it on ", s.autodiff(true).to_string(), ")");
    return core_table(s).backward(s, std::move(root));
}

std::optional<Dispatch::FT> Dispatch::grad(const FT& t, const Gradients& grads) {
    const Device s = handle_of(t).device;
    if (!s.has_autodiff()) return std::nullopt;
    return core_table(s).grad(s, t, grads);
}

std::optional<Dispatch::FT> Dispatch::grad_remove(const FT& t, Gradients& grads) {
    const Device s = handle_of(t).device;
    if (!s.has_autodiff()) return std::nullopt;
    return core_table(s).grad_remove(s, t, grads);
}

void Dispatch::grad_replace(const FT& t, Gradients& grads, FT grad) {
    const Device s = handle_of(t).device;
    EMBER_CHECK(s.has_autodiff(), Device, "ember::Dispatch: grad_replace on a tensor of ",
                s.to_string(), ", which has no autodiff");
    core_table(s).grad_replace(s, t, grads, std::move(grad));
}

Dispatch::FT Dispatch::inner(FT t) {
    const Device s = handle_of(t).device;
    if (!s.has_autodiff()) return t;
    return core_table(s).inner(s, std::move(t));
}

Dispatch::FT Dispatch::from_inner(FT t) {
    // The autodiff stack's detach takes a tensor of its inner stack as an untracked constant.
    const Device to = handle_of(t).device.autodiff(true);
    return core_table(to).detach(to, std::move(t));
}

Dispatch::FT Dispatch::float_set_require_grad(FT t, bool require) {
    const Device s = handle_of(t).device;
    if (!s.has_autodiff()) return t;
    return core_table(s).set_require_grad(s, std::move(t), require);
}

bool Dispatch::float_is_require_grad(const FT& t) {
    const Device s = handle_of(t).device;
    return s.has_autodiff() && core_table(s).is_require_grad(s, t);
}

std::uint64_t Dispatch::float_leaf_id(const FT& t) {
    const Device s = handle_of(t).device;
    return s.has_autodiff() ? core_table(s).leaf_id(s, t) : 0;
}

Dispatch::FT Dispatch::float_keep_graph(FT t) {
    const Device s = handle_of(t).device;
    if (s.has_autodiff()) core_table(s).keep_graph(s, t);
    return t;
}

Dispatch::FT Dispatch::float_detach(FT t) {
    const Device s = handle_of(t).device;
    if (!s.has_autodiff()) return t;
    return core_table(s).detach(s, std::move(t));
}

std::array<Dispatch::FT, 3> Dispatch::float_adam_step(FT param, FT grad, FT moment_1, FT moment_2,
                                                      const AdamStepScalars& a) {
    using detail::dispatch::Operand;
    const Device s = detail::dispatch::stack_of(
        "float_adam_step", {Operand::value(param, true), Operand::value(grad, true),
                            Operand::value(moment_1, true), Operand::value(moment_2, true)});
    if (const auto fused = core_table(s).adam_step)
        return fused(s, std::move(param), std::move(grad), std::move(moment_1), std::move(moment_2),
                     a);
    // A stack without the fused update: the optimizer's composed arrangement (one division per
    // element, the bias corrections folded into scalars), op by op.
    const FT g2 = float_binary(BinaryOp::Mul, grad, grad);
    FT m = float_binary(BinaryOp::Add,
                        float_binary_scalar(BinaryOp::Mul, std::move(moment_1), Scalar(a.beta_1)),
                        float_binary_scalar(BinaryOp::Mul, std::move(grad), Scalar(1 - a.beta_1)));
    FT v = float_binary(BinaryOp::Add,
                        float_binary_scalar(BinaryOp::Mul, std::move(moment_2), Scalar(a.beta_2)),
                        float_binary_scalar(BinaryOp::Mul, g2, Scalar(1 - a.beta_2)));
    FT denom = float_binary_scalar(BinaryOp::Add,
                                   float_binary_scalar(BinaryOp::Mul, float_unary(UnaryOp::Sqrt, v),
                                                       Scalar(1 / std::sqrt(a.correction_2))),
                                   Scalar(a.epsilon));
    FT update = float_binary_scalar(BinaryOp::Mul, float_binary(BinaryOp::Div, m, std::move(denom)),
                                    Scalar(a.lr / a.correction_1));
    return {float_binary(BinaryOp::Sub, std::move(param), std::move(update)), std::move(m),
            std::move(v)};
}

std::pair<Dispatch::FT, Dispatch::FT> Dispatch::float_sgd_step(FT param, FT grad, FT velocity,
                                                               const SgdStepScalars& a) {
    using detail::dispatch::Operand;
    const Device s = detail::dispatch::stack_of(
        "float_sgd_step", {Operand::value(param, true), Operand::value(grad, true),
                           Operand::value(velocity, true)});
    if (const auto fused = core_table(s).sgd_step)
        return fused(s, std::move(param), std::move(grad), std::move(velocity), a);
    // A stack without the fused update: Sgd's composed ops, in its order.
    if (a.weight_decay != 0)
        grad = float_binary(BinaryOp::Add, std::move(grad),
                            float_binary_scalar(BinaryOp::Mul, param, Scalar(a.weight_decay)));
    FT v = float_binary(
        BinaryOp::Add, float_binary_scalar(BinaryOp::Mul, std::move(velocity), Scalar(a.momentum)),
        float_binary_scalar(BinaryOp::Mul, grad, Scalar(1.0 - a.dampening)));
    FT d = a.nesterov ? float_binary(BinaryOp::Add, std::move(grad),
                                     float_binary_scalar(BinaryOp::Mul, v, Scalar(a.momentum)))
                      : v;
    return {float_binary(BinaryOp::Sub, std::move(param),
                         float_binary_scalar(BinaryOp::Mul, std::move(d), Scalar(a.lr))),
            std::move(v)};
}

std::vector<std::array<Dispatch::FT, 2>> Dispatch::float_sgd_steps(
    std::vector<std::array<FT, 3>> tensors, const std::vector<SgdStepScalars>& scalars) {
    EMBER_CHECK(tensors.size() == scalars.size(), Argument, "float_sgd_steps: ", tensors.size(),
                " tensor groups but ", scalars.size(), " sets of scalars");
    if (tensors.empty()) return {};
    const Device s = detail::dispatch::stack_of_groups("float_sgd_steps", tensors);
    if (const auto fused = core_table(s).sgd_steps) return fused(s, std::move(tensors), scalars);
    std::vector<std::array<FT, 2>> out;
    out.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        auto& [p, g, v] = tensors[i];
        auto [p2, v2] = float_sgd_step(std::move(p), std::move(g), std::move(v), scalars[i]);
        out.push_back({std::move(p2), std::move(v2)});
    }
    return out;
}

std::vector<std::array<Dispatch::FT, 3>> Dispatch::float_adam_steps(
    std::vector<std::array<FT, 4>> tensors, const std::vector<AdamStepsScalars>& scalars) {
    EMBER_CHECK(tensors.size() == scalars.size(), Argument, "float_adam_steps: ", tensors.size(),
                " tensor groups but ", scalars.size(), " sets of scalars");
    if (tensors.empty()) return {};
    const Device s = detail::dispatch::stack_of_groups("float_adam_steps", tensors);
    if (const auto fused = core_table(s).adam_steps) return fused(s, std::move(tensors), scalars);
    // One update a tensor, the decay first as the optimizer's per-tensor step applies it.
    std::vector<std::array<FT, 3>> out;
    out.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        auto& [p, g, m, v] = tensors[i];
        const AdamStepsScalars& a = scalars[i];
        if (a.l2 != 0)
            g = float_binary(BinaryOp::Add, std::move(g),
                             float_binary_scalar(BinaryOp::Mul, p, Scalar(a.l2)));
        if (a.decoupled_decay != 0)
            p = float_binary_scalar(BinaryOp::Mul, std::move(p),
                                    Scalar(1 - a.step.lr * a.decoupled_decay));
        out.push_back(
            float_adam_step(std::move(p), std::move(g), std::move(m), std::move(v), a.step));
    }
    return out;
}

std::optional<std::array<Dispatch::FT, 5>> Dispatch::float_batch_norm(FT x, FT gamma, FT beta,
                                                                      FT running_mean,
                                                                      FT running_var,
                                                                      const BatchNormScalars& a) {
    using detail::dispatch::Operand;
    const Device s = detail::dispatch::stack_of(
        "float_batch_norm",
        {Operand::value(x, true), Operand::value(gamma, true), Operand::value(beta, true),
         Operand::value(running_mean, true), Operand::value(running_var, true)});
    const auto fused = core_table(s).batch_norm;
    if (!fused) return std::nullopt;
    return fused(s, std::move(x), std::move(gamma), std::move(beta), std::move(running_mean),
                 std::move(running_var), a);
}

std::optional<std::array<Dispatch::FT, 5>> Dispatch::float_batch_norm_relu(
    FT x, FT gamma, FT beta, FT running_mean, FT running_var, std::optional<FT> residual,
    const BatchNormScalars& a) {
    using detail::dispatch::Operand;
    const Device s = detail::dispatch::stack_of(
        "float_batch_norm_relu",
        {Operand::value(x, true), Operand::value(gamma, true), Operand::value(beta, true),
         Operand::value(running_mean, true), Operand::value(running_var, true),
         Operand::optional(residual, true)});
    const auto fused = core_table(s).batch_norm_relu;
    if (!fused) return std::nullopt;
    return fused(s, std::move(x), std::move(gamma), std::move(beta), std::move(running_mean),
                 std::move(running_var), std::move(residual), a);
}

std::optional<std::array<Dispatch::FT, 4>> Dispatch::float_add_layer_norm(
    FT x, FT residual, std::optional<FT> gamma, std::optional<FT> beta, double eps,
    std::optional<DType> out) {
    using detail::dispatch::Operand;
    const Device s = detail::dispatch::stack_of(
        "float_add_layer_norm", {Operand::value(x, true), Operand::value(residual, true),
                                 Operand::optional(gamma, true), Operand::optional(beta, true)});
    const auto fused = core_table(s).add_layer_norm;
    if (!fused) return std::nullopt;
    return fused(s, std::move(x), std::move(residual), std::move(gamma), std::move(beta), eps, out);
}

std::optional<Dispatch::FT> Dispatch::float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean,
                                                            FT var, double eps) {
    using detail::dispatch::Operand;
    const Device s = detail::dispatch::stack_of(
        "float_batch_norm_eval",
        {Operand::value(x, true), Operand::value(gamma, true), Operand::value(beta, true),
         Operand::value(mean, true), Operand::value(var, true)});
    const auto fused = core_table(s).batch_norm_eval;
    if (!fused) return std::nullopt;
    return fused(s, std::move(x), std::move(gamma), std::move(beta), std::move(mean),
                 std::move(var), eps);
}

std::optional<Dispatch::FT> Dispatch::fused_matmul_epilogue(const FT& a, const FT& b,
                                                            std::optional<FT> bias,
                                                            fusion::MatmulEpilogue epilogue) {
    using detail::dispatch::Operand;
    const Device s = detail::dispatch::stack_of(
        "matmul", {Operand::value(a, true), Operand::value(b, true), Operand::optional(bias, true)});
    const auto fused = core_table(s).matmul_epilogue;
    if (!fused) return std::nullopt;
    return fused(s, a, b, std::move(bias), epilogue);
}

bool Dispatch::has_matmul_epilogue(const FT& t) {
    return core_table(handle_of(t).device).matmul_epilogue != nullptr;
}

namespace {
/// The stack attention's operands live on (q, k, v, the masks: one stack, else a DeviceError).
Dispatch::Device attention_stack(const DispatchTensor& q, const DispatchTensor& k,
                                 const DispatchTensor& v, const std::optional<DispatchTensor>& keep,
                                 const std::optional<DispatchTensor>& bias) {
    using detail::dispatch::Operand;
    return detail::dispatch::stack_of(
        "attention", {Operand::value(q, true), Operand::value(k, true), Operand::value(v, true),
                      Operand::optional(keep, false), Operand::optional(bias, true)});
}
}  // namespace

bool AttentionKernel<Dispatch>::supports(const FT& q, const FT& k, const FT& v,
                                         const std::optional<FT>& keep,
                                         const std::optional<FT>& bias) {
    const Dispatch::Device s = attention_stack(q, k, v, keep, bias);
    const auto fused = core_table(s).attention_supports;
    return fused != nullptr && fused(s, q, k, v, keep, bias);
}

std::array<DispatchTensor, 2> AttentionKernel<Dispatch>::forward(const FT& q, const FT& k,
                                                                 const FT& v,
                                                                 const std::optional<FT>& keep,
                                                                 const std::optional<FT>& bias,
                                                                 bool causal, double scale) {
    const Dispatch::Device s = attention_stack(q, k, v, keep, bias);
    const auto fused = core_table(s).attention;
    EMBER_CHECK(fused != nullptr, Device, "attention: the stack ", s.to_string(),
                " has no fused attention kernel (module::attention asks supports() first)");
    return fused(s, q, k, v, keep, bias, causal, scale);
}

bool AttentionKernel<Dispatch>::supports_packed(const FT& like, std::size_t heads,
                                                std::size_t head_dim) {
    using detail::dispatch::Operand;
    const Dispatch::Device s =
        detail::dispatch::stack_of("attention_packed", {Operand::value(like, true)});
    const auto fused = core_table(s).attention_packed_supports;
    return fused != nullptr && fused(s, like, heads, head_dim);
}

std::array<DispatchTensor, 2> AttentionKernel<Dispatch>::forward_packed(const FT& qkv,
                                                                        std::size_t heads,
                                                                        bool causal, double scale) {
    using detail::dispatch::Operand;
    const Dispatch::Device s =
        detail::dispatch::stack_of("attention_packed", {Operand::value(qkv, true)});
    const auto fused = core_table(s).attention_packed;
    EMBER_CHECK(fused != nullptr, Device, "attention_packed: the stack ", s.to_string(),
                " has no packed fused attention kernel (module::attention_packed asks "
                "supports_packed() first)");
    return fused(s, qkv, heads, causal, scale);
}

}  // namespace ember
