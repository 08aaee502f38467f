// Gradients of every activation (ember::activation) and every functional module op
// (ember::module) on every autodiff stack: against PyTorch autograd (fixtures from
// tests/fixtures/gen_autodiff_modules.py) and against float64 finite differences. Each case's
// options are stored with it as params; a last test checks that every fixture case is run here.
#include <optional>
#include <set>
#include <string>

#include "fixture_options.hpp"
#include "grad_check.hpp"

namespace test_autodiff_modules {

namespace {

using ember::Float;
using ember::Int;
using namespace ember::test;  // Fixture, In, GradOptions, options from params

constexpr const char* kFile = "autodiff_modules";


/// Runs the cases; or, as a dry run, only collects their names (the coverage check below).
struct Runner {
    std::set<std::string>* names = nullptr;  ///< dry run: names of the cases run

    /// A group of cases: a SECTION (run for real) or just the body (dry run).
    template <typename G>
    void group(const std::string& name, G&& body) const {
        if (names) {
            body();
            return;
        }
        DYNAMIC_SECTION(name) { body(); }
    }
    /// One gradient case: check_gradients in a section of its own.
    template <typename B, typename... Ins, typename F>
    void check(const std::string& name, F f, GradOptions opt = {}) const {
        if (names) {
            names->insert(name);
            return;
        }
        DYNAMIC_SECTION(name) { check_gradients<B, Ins...>(kFile, name, f, opt); }
    }
};

// ---- per-family case runners (inputs: x, weight[, bias]) ------------------------------------

/// conv{N}d case `name`: gradients for x, weight and (when the case has one) bias.
template <typename B, std::size_t N>
void conv_case(const Runner& r, const std::string& name) {
    const Fixture f(kFile, name);
    const auto o = conv_options<N>(f);
    using X = In<N + 2>;
    if (bparam(f, "bias"))
        r.check<B, X, X, In<1>>(name, [o](auto x, auto w, auto b) { return conv_nd<N>(x, w, b, o); });
    else
        r.check<B, X, X>(name, [o](auto x, auto w) { return conv_nd<N>(x, w, std::nullopt, o); });
}

/// conv_transpose{N}d case `name`.
template <typename B, std::size_t N>
void conv_transpose_case(const Runner& r, const std::string& name) {
    const Fixture f(kFile, name);
    const auto o = conv_transpose_options<N>(f);
    using X = In<N + 2>;
    if (bparam(f, "bias"))
        r.check<B, X, X, In<1>>(name, [o](auto x, auto w, auto b) {
            return conv_transpose_nd<N>(x, w, b, o);
        });
    else
        r.check<B, X, X>(name, [o](auto x, auto w) {
            return conv_transpose_nd<N>(x, w, std::nullopt, o);
        });
}

/// deform_conv2d case `name`: inputs x, offset, weight[, mask][, bias], all differentiated.
template <typename B>
void deform_case(const Runner& r, const std::string& name) {
    const Fixture f(kFile, name);
    const auto o = deform_options(f);
    using X = In<4>;
    using ember::module::deform_conv2d;
    const bool mask = bparam(f, "mask"), bias = bparam(f, "bias");
    if (mask && bias)
        r.check<B, X, X, X, X, In<1>>(name, [o](auto x, auto off, auto w, auto m, auto b) {
            return deform_conv2d(x, off, w, m, b, o);
        });
    else if (mask)
        r.check<B, X, X, X, X>(name, [o](auto x, auto off, auto w, auto m) {
            return deform_conv2d(x, off, w, m, std::nullopt, o);
        });
    else if (bias)
        r.check<B, X, X, X, In<1>>(name, [o](auto x, auto off, auto w, auto b) {
            return deform_conv2d(x, off, w, std::nullopt, b, o);
        });
    else
        r.check<B, X, X, X>(name, [o](auto x, auto off, auto w) {
            return deform_conv2d(x, off, w, std::nullopt, std::nullopt, o);
        });
}

template <typename B>
void avg_pool1d_case(const Runner& r, const std::string& name) {
    const Fixture f(kFile, name);
    const std::size_t k = uparam(f, "k0"), s = uparam(f, "stride0"), p = uparam(f, "pad0");
    const bool cip = bparam(f, "count_include_pad"), ceil = bparam(f, "ceil");
    r.check<B, In<3>>(name, [=](auto x) { return ember::module::avg_pool1d(x, k, s, p, cip, ceil); });
}

template <typename B>
void avg_pool2d_case(const Runner& r, const std::string& name) {
    const Fixture f(kFile, name);
    const auto k = param_array<2>(f, "k"), s = param_array<2>(f, "stride"), p = param_array<2>(f, "pad");
    const bool cip = bparam(f, "count_include_pad"), ceil = bparam(f, "ceil");
    r.check<B, In<4>>(name, [=](auto x) { return ember::module::avg_pool2d(x, k, s, p, cip, ceil); });
}

template <typename B>
void max_pool1d_case(const Runner& r, const std::string& name, bool with_indices = false) {
    const Fixture f(kFile, name);
    const std::size_t k = uparam(f, "k0"), s = uparam(f, "stride0"), p = uparam(f, "pad0"),
                      d = uparam(f, "dil0");
    const bool ceil = bparam(f, "ceil");
    if (with_indices)
        r.check<B, In<3>>(name, [=](auto x) {
            return ember::module::max_pool1d_with_indices(x, k, s, p, d, ceil).first;
        });
    else
        r.check<B, In<3>>(name, [=](auto x) { return ember::module::max_pool1d(x, k, s, p, d, ceil); });
}

template <typename B>
void max_pool2d_case(const Runner& r, const std::string& name, bool with_indices = false) {
    const Fixture f(kFile, name);
    const auto k = param_array<2>(f, "k"), s = param_array<2>(f, "stride"), p = param_array<2>(f, "pad"), d = param_array<2>(f, "dil");
    const bool ceil = bparam(f, "ceil");
    if (with_indices)
        r.check<B, In<4>>(name, [=](auto x) {
            return ember::module::max_pool2d_with_indices(x, k, s, p, d, ceil).first;
        });
    else
        r.check<B, In<4>>(name, [=](auto x) { return ember::module::max_pool2d(x, k, s, p, d, ceil); });
}

template <typename B>
void adaptive1d_case(const Runner& r, const std::string& name) {
    const std::size_t out = uparam(Fixture(kFile, name), "out0");
    r.check<B, In<3>>(name, [=](auto x) { return ember::module::adaptive_avg_pool1d(x, out); });
}

template <typename B>
void adaptive2d_case(const Runner& r, const std::string& name) {
    const auto out = param_array<2>(Fixture(kFile, name), "out");
    r.check<B, In<4>>(name, [=](auto x) { return ember::module::adaptive_avg_pool2d(x, out); });
}

template <typename B>
void interpolate_case(const Runner& r, const std::string& name) {
    const Fixture f(kFile, name);
    const auto out = param_array<2>(f, "out");
    const auto o = interpolate_options(f);
    r.check<B, In<4>>(name, [=](auto x) { return ember::module::interpolate(x, out, o); });
}

// ---- every case -----------------------------------------------------------------------------

template <typename B>
void all_cases(const Runner& r) {
    namespace act = ember::activation;

    r.group("activations", [&] {
        r.check<B, In<3>>("act_relu", [](auto x) { return act::relu(x); });
        r.check<B, In<3>>("act_gelu", [](auto x) { return act::gelu(x); });
        r.check<B, In<3>>("act_sigmoid", [](auto x) { return act::sigmoid(x); });
        r.check<B, In<3>>("act_tanh", [](auto x) { return act::tanh(x); });
        r.check<B, In<3>>("act_silu", [](auto x) { return act::silu(x); });
        r.check<B, In<3>>("act_mish", [](auto x) { return act::mish(x); });
        r.check<B, In<3>>("act_log_sigmoid", [](auto x) { return act::log_sigmoid(x); });
        r.check<B, In<3>>("act_leaky_relu", [](auto x) { return act::leaky_relu(x); });
        r.check<B, In<3>>("act_leaky_relu_02", [](auto x) { return act::leaky_relu(x, 0.2); });
        r.check<B, In<3>>("act_softplus_b1", [](auto x) { return act::softplus(x); });
        r.check<B, In<3>>("act_softplus_b2", [](auto x) { return act::softplus(x, 2.0); });
        r.check<B, In<3>>("act_softplus_b0.5", [](auto x) { return act::softplus(x, 0.5); });
        r.check<B, In<2>>("act_hard_sigmoid", [](auto x) { return act::hard_sigmoid(x); });
        r.check<B, In<2>>("act_hard_sigmoid_ab", [](auto x) { return act::hard_sigmoid(x, 0.2, 0.25); });
    });
    r.group("activations: saturated tails", [&] {
        r.check<B, In<2>>("act_wide_sigmoid", [](auto x) { return act::sigmoid(x); });
        r.check<B, In<2>>("act_wide_silu", [](auto x) { return act::silu(x); });
        r.check<B, In<2>>("act_wide_softplus", [](auto x) { return act::softplus(x, 2.0); });
        r.check<B, In<2>>("act_wide_log_sigmoid", [](auto x) { return act::log_sigmoid(x); });
        r.check<B, In<2>>("act_wide_mish", [](auto x) { return act::mish(x); });
        r.check<B, In<2>>("act_wide_gelu", [](auto x) { return act::gelu(x); });
        r.check<B, In<2>>("act_wide_tanh", [](auto x) { return act::tanh(x); });
    });
    r.group("prelu: input and weights", [&] {
        auto prelu = [](auto x, auto a) { return act::prelu(x, a); };
        r.check<B, In<3>, In<1>>("act_prelu_single", prelu);
        r.check<B, In<3>, In<1>>("act_prelu_channels", prelu);
        r.check<B, In<2>, In<1>>("act_prelu_channels_2d", prelu);
    });
    r.group("softmax family along every dim", [&] {
        for (long dim : {0L, 1L, 2L, -1L, -2L, -3L}) {
            const std::string tag = dim < 0 ? "m" + std::to_string(-dim) : std::to_string(dim);
            r.check<B, In<3>>("act_softmax_d" + tag, [dim](auto x) { return act::softmax(x, dim); });
            r.check<B, In<3>>("act_log_softmax_d" + tag,
                              [dim](auto x) { return act::log_softmax(x, dim); });
            r.check<B, In<3>>("act_softmin_d" + tag, [dim](auto x) { return act::softmin(x, dim); });
            r.check<B, In<3>>("act_quiet_softmax_d" + tag,
                              [dim](auto x) { return act::quiet_softmax(x, dim); });
        }
    });
    r.group("softmax family: large logits", [&] {
        r.check<B, In<2>>("act_softmax_big", [](auto x) { return act::softmax(x, 1); });
        r.check<B, In<2>>("act_log_softmax_big", [](auto x) { return act::log_softmax(x, 1); });
        r.check<B, In<2>>("act_softmin_big", [](auto x) { return act::softmin(x, 1); });
        r.check<B, In<2>>("act_quiet_softmax_big", [](auto x) { return act::quiet_softmax(x, 1); });
        // The shift m = max(x) carries no gradient (exp(-m) overflows on these rows).
        r.check<B, In<2>>("act_quiet_softmax_very_negative",
                          [](auto x) { return act::quiet_softmax(x, 1); });
    });

    r.group("layer_norm", [&] {
        using ember::module::layer_norm;
        r.check<B, In<3>, In<1>, In<1>>(
            "layer_norm_affine", [](auto x, auto g, auto b) { return layer_norm(x, g, b, 1e-5); });
        r.check<B, In<2>>("layer_norm_plain", [](auto x) {
            return layer_norm(x, std::nullopt, std::nullopt, 1e-3);
        });
        r.check<B, In<2>, In<1>>("layer_norm_gamma", [](auto x, auto g) {
            return layer_norm(x, g, std::nullopt, 1e-5);
        });
        r.check<B, In<2>, In<1>, In<1>>(
            "layer_norm_wide", [](auto x, auto g, auto b) { return layer_norm(x, g, b, 1e-5); });
    });
    r.group("add_layer_norm", [&] {
        // normed + 0.5 · sum: both results' gradients reach x and the residual.
        using ember::module::add_layer_norm;
        r.check<B, In<3>, In<3>, In<1>, In<1>>("add_layer_norm_affine",
                                               [](auto x, auto res, auto g, auto b) {
                                                   auto o = add_layer_norm(x, res, g, b, 1e-5);
                                                   return o.normed + o.sum * 0.5;
                                               });
        r.check<B, In<2>, In<2>>("add_layer_norm_plain", [](auto x, auto res) {
            auto o = add_layer_norm(x, res, std::nullopt, std::nullopt, 1e-3);
            return o.normed + o.sum * 0.5;
        });
    });
    r.group("linear", [&] {
        using ember::module::linear;
        r.check<B, In<2>, In<2>, In<1>>("linear_2d_bias",
                                        [](auto x, auto w, auto b) { return linear(x, w, b); });
        r.check<B, In<2>, In<2>>("linear_2d_nobias", [](auto x, auto w) { return linear(x, w); });
        r.check<B, In<3>, In<2>, In<1>>("linear_3d_bias",
                                        [](auto x, auto w, auto b) { return linear(x, w, b); });
        r.check<B, In<3>, In<2>>("linear_3d_nobias",
                                 [](auto x, auto w) { return linear(x, w, std::nullopt); });
    });

    r.group("conv1d", [&] {
        for (const char* name : {"conv1d_basic", "conv1d_nobias", "conv1d_stride_pad_dil",
                                 "conv1d_stride_drop", "conv1d_groups", "conv1d_groups_bias"})
            conv_case<B, 1>(r, name);
    });
    r.group("conv2d", [&] {
        for (const char* name :
             {"conv2d_basic", "conv2d_nobias", "conv2d_stride_pad_dil", "conv2d_stride_drop",
              "conv2d_groups", "conv2d_groups_nobias", "conv2d_depthwise", "conv2d_1x1",
              "conv2d_large", "conv2d_batched_small", "conv2d_batched_1x1_s2",
              "conv2d_batched_1x1"})
            conv_case<B, 2>(r, name);
    });
    r.group("conv2d: only some inputs require a gradient", [&] {
        for (const char* name : {"conv2d_weight_only", "conv2d_input_only"}) {
            const auto o = conv_options<2>(Fixture(kFile, name));
            auto conv = [o](auto x, auto w, auto b) { return ember::module::conv2d(x, w, b, o); };
            if (std::string(name) == "conv2d_weight_only")
                r.check<B, In<4, Float, false>, In<4>, In<1>>(name, conv);
            else
                r.check<B, In<4>, In<4, Float, false>, In<1, Float, false>>(name, conv);
        }
    });
    r.group("conv3d", [&] {
        for (const char* name : {"conv3d_basic", "conv3d_nobias", "conv3d_stride_pad_dil",
                                 "conv3d_groups", "conv3d_groups_stride", "conv3d_batched_small"})
            conv_case<B, 3>(r, name);
    });
    r.group("conv_transpose1d", [&] {
        for (const char* name : {"conv_transpose1d_basic", "conv_transpose1d_nobias",
                                 "conv_transpose1d_stride_pad_opad", "conv_transpose1d_dil",
                                 "conv_transpose1d_groups", "conv_transpose1d_groups_nobias"})
            conv_transpose_case<B, 1>(r, name);
        // Output padding >= stride (below the dilation): the backward convolution is longer
        // than x by floor(padding_out / stride).
        conv_transpose_case<B, 1>(r, "conv_transpose1d_opad_dil");
    });
    r.group("conv_transpose2d", [&] {
        for (const char* name : {"conv_transpose2d_basic", "conv_transpose2d_nobias",
                                 "conv_transpose2d_stride_pad_opad", "conv_transpose2d_dil",
                                 "conv_transpose2d_groups", "conv_transpose2d_large"})
            conv_transpose_case<B, 2>(r, name);
    });
    r.group("conv_transpose3d", [&] {
        for (const char* name : {"conv_transpose3d_basic", "conv_transpose3d_stride_pad_opad",
                                 "conv_transpose3d_groups"})
            conv_transpose_case<B, 3>(r, name);
    });
    r.group("deform_conv2d", [&] {
        for (const char* name : {"deform_conv2d_basic", "deform_conv2d_mask", "deform_conv2d_bias",
                                 "deform_conv2d_mask_bias", "deform_conv2d_stride_pad_dil",
                                 "deform_conv2d_offset_groups", "deform_conv2d_weight_groups",
                                 "deform_conv2d_groups", "deform_conv2d_groups4"})
            deform_case<B>(r, name);
    });

    r.group("avg_pool1d", [&] {
        for (const char* name : {"avg_pool1d_basic", "avg_pool1d_overlap", "avg_pool1d_pad",
                                 "avg_pool1d_pad_exclude", "avg_pool1d_ceil", "avg_pool1d_ceil_pad",
                                 "avg_pool1d_ceil_pad_exclude"})
            avg_pool1d_case<B>(r, name);
    });
    r.group("avg_pool2d", [&] {
        for (const char* name : {"avg_pool2d_basic", "avg_pool2d_overlap", "avg_pool2d_pad",
                                 "avg_pool2d_pad_exclude", "avg_pool2d_ceil", "avg_pool2d_ceil_pad",
                                 "avg_pool2d_ceil_pad_exclude"})
            avg_pool2d_case<B>(r, name);
    });
    r.group("max_pool1d", [&] {
        for (const char* name : {"max_pool1d_basic", "max_pool1d_overlap", "max_pool1d_pad",
                                 "max_pool1d_dil", "max_pool1d_ceil", "max_pool1d_ceil_dil"})
            max_pool1d_case<B>(r, name);
        max_pool1d_case<B>(r, "max_pool1d_with_indices", true);
    });
    r.group("max_pool2d", [&] {
        for (const char* name : {"max_pool2d_basic", "max_pool2d_overlap", "max_pool2d_pad",
                                 "max_pool2d_dil", "max_pool2d_ceil", "max_pool2d_ceil_pad_dil"})
            max_pool2d_case<B>(r, name);
        max_pool2d_case<B>(r, "max_pool2d_with_indices", true);
    });
    r.group("adaptive_avg_pool1d", [&] {
        for (const char* name : {"adaptive_avg_pool1d_div", "adaptive_avg_pool1d_nondiv",
                                 "adaptive_avg_pool1d_nondiv5", "adaptive_avg_pool1d_up",
                                 "adaptive_avg_pool1d_one"})
            adaptive1d_case<B>(r, name);
    });
    r.group("adaptive_avg_pool2d", [&] {
        for (const char* name : {"adaptive_avg_pool2d_div", "adaptive_avg_pool2d_nondiv",
                                 "adaptive_avg_pool2d_mixed", "adaptive_avg_pool2d_nondiv_both",
                                 "adaptive_avg_pool2d_up", "adaptive_avg_pool2d_one"})
            adaptive2d_case<B>(r, name);
    });

    r.group("interpolate", [&] {
        for (const char* name : {"interpolate_nearest_up", "interpolate_nearest_down",
                                 "interpolate_nearest_mixed", "interpolate_nearest_edge"})
            interpolate_case<B>(r, name);
        for (const char* mode : {"bilinear", "bicubic"})
            for (const char* dir : {"up", "down", "mixed", "same", "edge"})
                for (const char* ac : {"ac", "noac"})
                    interpolate_case<B>(r, std::string("interpolate_") + mode + "_" + dir + "_" + ac);
    });

    r.group("embedding: repeated indices accumulate", [&] {
        auto embedding = [](auto w, auto i) { return ember::module::embedding(w, i); };
        for (const char* name : {"embedding", "embedding_col", "embedding_all_same"})
            r.check<B, In<2>, In<2, Int>>(name, embedding);
    });

    r.group("composition: conv -> tanh -> max pool -> adaptive pool -> linear", [&] {
        r.check<B, In<4>, In<4>, In<1>, In<2>, In<1>>(
            "chain_cnn", [](auto x, auto w1, auto b1, auto w2, auto b2) {
                auto h = act::tanh(ember::module::conv2d(x, w1, b1, ember::ConvOptions<2>{{1, 1}, {1, 1}}));
                h = ember::module::max_pool2d(h, {3, 3}, {2, 2}, {1, 1});
                auto p = ember::module::adaptive_avg_pool2d(h, {2, 2});
                const auto n = static_cast<long>(p.dims()[0]);
                return ember::module::linear(p.template reshape<2>({n, -1}), w2, b2);
            });
    });
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("autodiff: activations and module ops against PyTorch", "[autodiff]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    all_cases<TestType>(Runner{});
}

TEST_CASE("autodiff: every activation/module-op gradient case is exercised", "[autodiff]") {
    std::set<std::string> ran;
    all_cases<ember::Autodiff<ember::Cpu>>(Runner{&ran});
    std::set<std::string> unused;
    for (const auto& name : ember::test::fixture_cases(kFile))
        if (!ran.contains(name)) unused.insert(name);
    for (const auto& name : unused) UNSCOPED_INFO("fixture case not run: " << name);
    CHECK(unused.empty());
    // And no name is run twice or run without a fixture (Fixture would throw on a missing one).
    CHECK(ran.size() == ember::test::fixture_cases(kFile).size());
}

}  // namespace test_autodiff_modules
