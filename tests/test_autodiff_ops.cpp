// Gradients of the tensor ops on every autodiff stack: against PyTorch (fixtures from
// tests/fixtures/gen_autodiff_ops.py) and against float64 finite differences. One case per
// fixture; the last test checks that every fixture case is exercised by some test.
#include <algorithm>
#include <set>
#include <string>
#include <type_traits>

#include "grad_check.hpp"

namespace test_autodiff_ops {

namespace {

using ember::Bool;
using ember::Float;
using ember::Int;
using ember::Slice;
using ember::test::GradOptions;
using ember::test::In;

constexpr const char* kFile = "autodiff_ops";

/// Ties and kinks: no finite differences there (the op has no derivative), PyTorch only.
constexpr GradOptions kNoFd{.finite_differences = false};

/// A case name as a template argument, so that every name used is known before main().
template <std::size_t N>
struct CaseName {
    char value[N]{};
    constexpr CaseName(const char (&s)[N]) { std::copy_n(s, N, value); }  // NOLINT
};

/// The names of the cases this file checks.
std::set<std::string>& exercised() {
    static std::set<std::string> names;
    return names;
}

/// Registers case N at program start (dynamic initialisation of a static member).
template <CaseName N>
struct Registered {
    static inline const bool done = (exercised().insert(N.value), true);
};

/// check_gradients on case N of autodiff_ops.json, which registers N as exercised.
template <CaseName N, typename B, typename... Ins, typename F>
void check(F f, GradOptions opt = {}) {
    (void)Registered<N>::done;
    ember::test::check_gradients<B, Ins...>(kFile, N.value, f, opt);
}

/// The backend of a tensor argument of a generic lambda.
template <typename T>
using BackendOf = typename std::remove_cvref_t<T>::BackendType;

}  // namespace

TEMPLATE_LIST_TEST_CASE("autodiff: tensor ops", "[autodiff]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T3 = In<3>;

    SECTION("unary functions") {
        check<"exp", B, T3>([](auto x) { return x.exp(); });
        check<"neg", B, T3>([](auto x) { return x.neg(); });
        check<"neg_operator", B, T3>([](auto x) { return -x; });
        check<"abs", B, T3>([](auto x) { return x.abs(); });
        check<"abs_at_zero", B, In<2>>([](auto x) { return x.abs(); }, kNoFd);
        check<"log", B, T3>([](auto x) { return x.log(); });
        check<"log1p", B, T3>([](auto x) { return x.log1p(); });
        check<"sqrt", B, T3>([](auto x) { return x.sqrt(); });
        check<"sin", B, T3>([](auto x) { return x.sin(); });
        check<"cos", B, T3>([](auto x) { return x.cos(); });
        check<"tanh", B, T3>([](auto x) { return x.tanh(); });
        check<"erf", B, T3>([](auto x) { return x.erf(); });
        check<"recip", B, T3>([](auto x) { return x.recip(); });
        check<"floor", B, T3>([](auto x) { return x.floor(); });
        check<"ceil", B, T3>([](auto x) { return x.ceil(); });
        check<"round", B, T3>([](auto x) { return x.round(); });
        check<"sign", B, T3>([](auto x) { return x.sign(); });
        check<"exp_chain", B, T3>([](auto x) { return x.sin().exp() * x.cos(); });
    }

    SECTION("binary ops with broadcasting") {
        check<"add_broadcast", B, T3, T3>([](auto a, auto b) { return a + b; });
        check<"add_broadcast_lhs", B, T3, T3>([](auto a, auto b) { return a.add(b); });
        check<"add_same", B, T3, T3>([](auto a, auto b) { return a + b; });
        check<"sub_broadcast", B, T3, T3>([](auto a, auto b) { return a - b; });
        check<"sub_broadcast_lhs", B, T3, T3>([](auto a, auto b) { return a.sub(b); });
        check<"mul_broadcast", B, T3, T3>([](auto a, auto b) { return a * b; });
        check<"mul_broadcast_both", B, T3, T3>([](auto a, auto b) { return a.mul(b); });
        check<"mul_same_input", B, T3>([](auto a) { return a * a; });
        check<"div_broadcast", B, T3, T3>([](auto a, auto b) { return a / b; });
        check<"div_broadcast_lhs", B, T3, T3>([](auto a, auto b) { return a.div(b); });
        check<"div_same", B, T3, T3>([](auto a, auto b) { return a / b; });
        check<"rem_broadcast", B, T3, T3>([](auto a, auto b) { return a % b; });
        check<"rem_same", B, T3, T3>([](auto a, auto b) { return a.rem(b); });
        check<"powf", B, T3, T3>([](auto a, auto b) { return a.powf(b); });
        check<"powf_broadcast", B, T3, T3>([](auto a, auto b) { return a.powf(b); });
        check<"powf_broadcast_base", B, T3, T3>([](auto a, auto b) { return a.powf(b); });
        // 0^y with y >= 0: the exponent's gradient is 0 (not NaN); finite differences would
        // step into negative bases.
        check<"powf_zero_base", B, In<2>, In<2>>([](auto a, auto b) { return a.powf(b); }, kNoFd);
        check<"powi", B, T3, In<3, Int>>([](auto x, auto e) { return x.powi(e); });
        check<"max_pair", B, T3, T3>([](auto a, auto b) { return a.max_pair(b); });
        check<"min_pair", B, T3, T3>([](auto a, auto b) { return a.min_pair(b); });
        check<"max_pair_broadcast", B, T3, T3>([](auto a, auto b) { return a.max_pair(b); });
        check<"min_pair_broadcast", B, T3, T3>([](auto a, auto b) { return a.min_pair(b); });
        // Ties split the gradient in half (torch.maximum / torch.minimum).
        check<"max_pair_ties", B, In<2>, In<2>>([](auto a, auto b) { return a.max_pair(b); }, kNoFd);
        check<"min_pair_ties", B, In<2>, In<2>>([](auto a, auto b) { return a.min_pair(b); }, kNoFd);
    }

    SECTION("scalar forms and clamps") {
        check<"add_scalar", B, T3>([](auto x) { return x.add_scalar(2.5); });
        check<"sub_scalar", B, T3>([](auto x) { return x - 2.5; });
        check<"mul_scalar", B, T3>([](auto x) { return x.mul_scalar(-1.5); });
        check<"div_scalar", B, T3>([](auto x) { return x / 0.75; });
        check<"rem_scalar", B, T3>([](auto x) { return x % 1.5; });
        check<"rem_scalar_negative", B, T3>([](auto x) { return x.rem_scalar(-1.25); });
        check<"scalar_add", B, T3>([](auto x) { return 2.5 + x; });
        check<"scalar_mul", B, T3>([](auto x) { return 3.0 * x; });
        check<"scalar_sub", B, T3>([](auto x) { return 2.0 - x; });
        check<"scalar_div", B, T3>([](auto x) { return 2.0 / x; });
        check<"scalar_rem", B, T3>([](auto x) { return 2.0 % x; });
        // 2^x: no Tensor method, so the backend's RPow directly.
        check<"scalar_pow", B, T3>([](auto x) {
            using T = decltype(x);
            return T(BackendOf<T>::float_binary_scalar(ember::BinaryOp::RPow, x.primitive(),
                                                       ember::Scalar(2.0)));
        });
        check<"powf_scalar_3", B, T3>([](auto x) { return x.powf_scalar(3.0); });
        check<"powf_scalar_2", B, T3>([](auto x) { return x.powf_scalar(2.0); });
        check<"powf_scalar_half", B, T3>([](auto x) { return x.powf_scalar(0.5); });
        check<"powf_scalar_neg", B, T3>([](auto x) { return x.powf_scalar(-1.5); });
        check<"powf_scalar_0", B, T3>([](auto x) { return x.powf_scalar(0.0); });
        check<"powi_scalar_3", B, T3>([](auto x) { return x.powi_scalar(3); });
        check<"powi_scalar_2", B, T3>([](auto x) { return x.powi_scalar(2); });
        check<"powi_scalar_neg", B, T3>([](auto x) { return x.powi_scalar(-2); });
        check<"clamp", B, T3>([](auto x) { return x.clamp(-0.5, 0.5); });
        check<"clamp_min", B, T3>([](auto x) { return x.clamp_min(-0.5); });
        check<"clamp_max", B, T3>([](auto x) { return x.clamp_max(0.5); });
        // On the bounds the gradient passes (PyTorch's lo <= x <= hi).
        check<"clamp_ties", B, In<2>>([](auto x) { return x.clamp(-0.5, 0.5); }, kNoFd);
        check<"clamp_min_ties", B, In<2>>([](auto x) { return x.clamp_min(-0.5); }, kNoFd);
        check<"clamp_max_ties", B, In<2>>([](auto x) { return x.clamp_max(0.5); }, kNoFd);
    }

    SECTION("masks") {
        check<"mask_where", B, T3, In<3, Bool>, T3>(
            [](auto t, auto m, auto v) { return t.mask_where(m, v); });
        check<"mask_where_broadcast", B, T3, In<3, Bool>, T3>(
            [](auto t, auto m, auto v) { return t.mask_where(m, v); });
        check<"mask_where_broadcast_self", B, T3, In<3, Bool>, T3>(
            [](auto t, auto m, auto v) { return t.mask_where(m, v); });
        check<"mask_fill", B, T3, In<3, Bool>>([](auto t, auto m) { return t.mask_fill(m, -1.5); });
        check<"mask_fill_broadcast", B, T3, In<3, Bool>>(
            [](auto t, auto m) { return t.mask_fill(m, 2.0); });
        check<"tril", B, T3>([](auto x) { return x.tril(); });
        check<"triu_diagonal", B, T3>([](auto x) { return x.triu(1); });
    }

    SECTION("reductions") {
        check<"sum", B, T3>([](auto x) { return x.sum(); });
        check<"sum_dim", B, T3>([](auto x) { return x.sum_dim(1); });
        check<"sum_dim_negative", B, T3>([](auto x) { return x.sum_dim(-1); });
        check<"mean", B, T3>([](auto x) { return x.mean(); });
        check<"mean_dim", B, T3>([](auto x) { return x.mean_dim(0); });
        check<"mean_dim_negative", B, T3>([](auto x) { return x.mean_dim(-2); });
        check<"prod", B, T3>([](auto x) { return x.prod(); });
        check<"prod_dim", B, T3>([](auto x) { return x.prod_dim(1); });
        check<"prod_dim_negative", B, T3>([](auto x) { return x.prod_dim(-1); });
        // Zeros: the product is a polynomial, so finite differences hold there too.
        check<"prod_one_zero", B, In<2>>([](auto x) { return x.prod(); });
        check<"prod_two_zeros", B, In<2>>([](auto x) { return x.prod(); });
        check<"prod_dim_zeros", B, T3>([](auto x) { return x.prod_dim(-1); });
        check<"prod_dim0_zeros", B, T3>([](auto x) { return x.prod_dim(0); });
        check<"max", B, T3>([](auto x) { return x.max(); });
        check<"min", B, T3>([](auto x) { return x.min(); });
        check<"max_dim", B, T3>([](auto x) { return x.max_dim(1); });
        check<"max_dim_negative", B, T3>([](auto x) { return x.max_dim(-1); });
        check<"min_dim", B, T3>([](auto x) { return x.min_dim(0); });
        check<"min_dim_negative", B, T3>([](auto x) { return x.min_dim(-2); });
        // Ties: split evenly (torch.amax / amin).
        check<"max_ties", B, T3>([](auto x) { return x.max(); }, kNoFd);
        check<"min_ties", B, T3>([](auto x) { return x.min(); }, kNoFd);
        check<"max_dim_ties", B, T3>([](auto x) { return x.max_dim(-1); }, kNoFd);
        check<"min_dim_ties", B, T3>([](auto x) { return x.min_dim(-1); }, kNoFd);
        check<"max_dim0_ties", B, T3>([](auto x) { return x.max_dim(0); }, kNoFd);
        // With indices: all to the index returned (torch.max(dim)), the first of ties.
        check<"max_dim_with_indices", B, T3>([](auto x) { return x.max_dim_with_indices(1).first; });
        check<"min_dim_with_indices", B, T3>([](auto x) { return x.min_dim_with_indices(-1).first; });
        check<"max_dim_with_indices_ties", B, T3>(
            [](auto x) { return x.max_dim_with_indices(-1).first; }, kNoFd);
        check<"min_dim_with_indices_ties", B, T3>(
            [](auto x) { return x.min_dim_with_indices(-1).first; }, kNoFd);
        // The backend's own float_{max,min}_dim_with_indices (Tensor's compose argmax + gather).
        check<"backend_max_dim_with_indices_ties", B, T3>(
            [](auto x) {
                using T = decltype(x);
                return T(BackendOf<T>::float_max_dim_with_indices(x.primitive(), 1).first);
            },
            kNoFd);
        check<"backend_min_dim_with_indices", B, T3>([](auto x) {
            using T = decltype(x);
            return T(BackendOf<T>::float_min_dim_with_indices(x.primitive(), 2).first);
        });
        check<"var", B, T3>([](auto x) { return x.var(1); });
        check<"var_negative", B, T3>([](auto x) { return x.var(-1); });
        check<"var_bias", B, T3>([](auto x) { return x.var_bias(0); });
        check<"var_mean", B, T3>([](auto x) {
            auto [v, m] = x.var_mean(1);
            return decltype(x)::cat({v, m}, 1);
        });
        check<"var_mean_bias", B, T3>([](auto x) {
            auto [v, m] = x.var_mean_bias(-1);
            return decltype(x)::cat({v, m}, -1);
        });
    }

    SECTION("views and joins") {
        check<"reshape", B, T3>([](auto x) { return x.template reshape<2>({4, 6}); });
        check<"reshape_infer", B, T3>([](auto x) { return x.template reshape<3>({0, 4, -1}); });
        check<"permute", B, T3>([](auto x) { return x.permute({2, 0, 1}); });
        check<"permute_negative", B, T3>([](auto x) { return x.permute({1, -1, 0}); });
        check<"swap_dims", B, T3>([](auto x) { return x.swap_dims(0, 2); });
        check<"transpose", B, T3>([](auto x) { return x.transpose(); });
        check<"movedim", B, T3>([](auto x) { return x.movedim(0, -1); });
        check<"expand", B, T3>([](auto x) { return x.template expand<3>(ember::Shape{2, 3, 4}); });
        check<"expand_rank", B, In<2>>(
            [](auto x) { return x.template expand<3>(ember::Shape{2, 3, 4}); });
        check<"flatten", B, T3>([](auto x) { return x.template flatten<2>(1, 2); });
        check<"flatten_all", B, T3>([](auto x) { return x.template flatten<1>(0, -1); });
        check<"squeeze", B, T3>([](auto x) { return x.template squeeze<2>(1); });
        check<"unsqueeze", B, T3>([](auto x) { return x.unsqueeze(); });
        check<"unsqueeze_dim", B, T3>([](auto x) { return x.template unsqueeze_dim<4>(-1); });
        check<"slice", B, T3>([](auto x) { return x.slice({Slice{0, 2}, Slice{1, 3}}); });
        check<"slice_steps", B, T3>(
            [](auto x) { return x.slice({Slice{}, Slice{0, 3, 2}, Slice{1, 4, 2}}); });
        check<"slice_negative", B, T3>(
            [](auto x) { return x.slice({Slice{-1}, Slice{}, Slice{-3, -1}}); });
        check<"slice_assign", B, T3, T3>(
            [](auto x, auto v) { return x.slice_assign({Slice{0, 1}, Slice{1, 3}}, v); });
        check<"slice_assign_steps", B, T3, T3>([](auto x, auto v) {
            return x.slice_assign({Slice{}, Slice{0, 3, 2}, Slice{1, 4, 2}}, v);
        });
        check<"narrow", B, T3>([](auto x) { return x.narrow(-1, 1, 2); });
        check<"chunk", B, T3>([](auto x) {  // [2, 1] along dim 1, joined back reversed
            auto c = x.chunk(2, 1);
            REQUIRE(c.size() == 2);
            return decltype(x)::cat({c[1], c[0] * 2.0}, 1);
        });
        check<"chunk_last", B, T3>([](auto x) {  // 3 chunks of 4 are torch's [2, 2]
            auto c = x.chunk(3, -1);
            REQUIRE(c.size() == 2);
            return decltype(x)::cat({c[0], c[1] * 2.0}, -1);
        });
        check<"flip", B, T3>([](auto x) { return x.flip({0, 2}); });
        check<"flip_negative", B, T3>([](auto x) { return x.flip({-1}); });
        check<"cat", B, T3, T3, T3>(
            [](auto a, auto b, auto c) { return decltype(a)::cat({a, b, c}, 1); });
        check<"cat_negative", B, T3, T3>([](auto a, auto b) { return decltype(a)::cat({a, b}, -1); });
        check<"cat_same_input", B, T3>([](auto a) { return decltype(a)::cat({a, a * 2.0}, 0); });
        check<"stack", B, T3, T3>([](auto a, auto b) { return decltype(a)::stack({a, b}, 0); });
        check<"stack_negative", B, In<2>, In<2>, In<2>>(
            [](auto a, auto b, auto c) { return decltype(a)::stack({a, b, c}, -1); });
        check<"repeat_dim", B, T3>([](auto x) { return x.repeat_dim(1, 3); });
        check<"repeat", B, T3>([](auto x) { return x.repeat({2, 1, 3}); });
        check<"pad", B, T3>([](auto x) { return x.pad({1, 2, 0, 1}, 0.5); });
    }

    SECTION("indexing") {
        using I3 = In<3, Int>;
        check<"gather", B, T3, I3>([](auto x, auto i) { return x.gather(1, i); });
        check<"gather_negative", B, T3, I3>([](auto x, auto i) { return x.gather(-1, i); });
        check<"scatter", B, T3, I3, T3>([](auto x, auto i, auto v) { return x.scatter(-1, i, v); });
        check<"scatter_dim1", B, T3, I3, T3>([](auto x, auto i, auto v) { return x.scatter(1, i, v); });
        check<"select", B, T3, In<1, Int>>([](auto x, auto i) { return x.select(1, i); });
        check<"select_negative", B, T3, In<1, Int>>([](auto x, auto i) { return x.select(-1, i); });
        check<"select_assign", B, T3, In<1, Int>, T3>(
            [](auto x, auto i, auto v) { return x.select_assign(1, i, v); });
        check<"select_assign_negative", B, T3, In<1, Int>, T3>(
            [](auto x, auto i, auto v) { return x.select_assign(-1, i, v); });
    }

    SECTION("sorting") {
        check<"sort", B, T3>([](auto x) { return x.sort(1); });
        check<"sort_negative", B, T3>([](auto x) { return x.sort(-1); });
        check<"sort_descending", B, T3>([](auto x) { return x.sort_descending(0); });
        check<"sort_with_indices", B, T3>([](auto x) { return x.sort_with_indices(-1).first; });
        check<"sort_descending_with_indices", B, T3>(
            [](auto x) { return x.sort_descending_with_indices(1).first; });
        // Ties, stable order (torch.sort(stable=True)).
        check<"sort_ties", B, T3>([](auto x) { return x.sort(-1); }, kNoFd);
        check<"sort_descending_ties", B, T3>([](auto x) { return x.sort_descending(-1); }, kNoFd);
        check<"topk", B, T3>([](auto x) { return x.topk(2, -1); });
        check<"topk_dim0", B, T3>([](auto x) { return x.topk(1, 0); });
        check<"topk_with_indices", B, T3>([](auto x) { return x.topk_with_indices(3, 1).first; });
        // The k smallest: only the backend has that form.
        check<"topk_smallest", B, T3>([](auto x) {
            using T = decltype(x);
            return T(BackendOf<T>::float_topk(x.primitive(), 2, 2, false).first);
        });
    }

    SECTION("matmul") {
        check<"matmul", B, In<2>, In<2>>([](auto a, auto b) { return a.matmul(b); });
        check<"matmul_batch", B, T3, T3>([](auto a, auto b) { return a.matmul(b); });
        check<"matmul_batch_broadcast", B, T3, T3>([](auto a, auto b) { return a.matmul(b); });
        check<"matmul_batch_broadcast_lhs", B, T3, T3>([](auto a, auto b) { return a.matmul(b); });
        check<"matmul_batch_broadcast_both", B, In<4>, In<4>>(
            [](auto a, auto b) { return a.matmul(b); });
        check<"matmul_same_input", B, T3>([](auto a) { return a.matmul(a); });
        // [k] @ [k] is [1] on every backend (ember has no rank-0 tensors).
        check<"matmul_vector", B, In<1>, In<1>>([](auto a, auto b) { return a.matmul(b); });
    }

    SECTION("casts and the graph") {
        // f32 → f64 → f32 on the f32 stack (f64 → f64 → f64 on its twin).
        check<"cast_round_trip", B, T3>(
            [](auto x) { return x.cast(ember::DType::F64).sin().cast(x.dtype()); });
        check<"to_device", B, T3>([](auto x) { return x.to_device(x.device()) * 2.0; });
        // Finite differences see through detach (that is its point): PyTorch only.
        check<"detach", B, T3>([](auto x) { return x * x.detach(); }, kNoFd);
        check<"reuse_accumulate", B, T3, T3>([](auto x, auto y) {
            return (x * y).exp() * 0.5 + x.sin() * x - y.mean_dim(1);
        });
    }
}

TEMPLATE_LIST_TEST_CASE("autodiff: gradients keep their input's dtype", "[autodiff]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using ember::DType;
    using ember::Tensor;
    auto x = Tensor<B, 2>::from_data(ember::TensorData({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}), {})
                 .require_grad();
    auto y = Tensor<B, 2>::from_data(ember::TensorData({0.5f, -1.0f}, {1, 2}), {}).require_grad();
    REQUIRE(x.dtype() == DType::F32);
    SECTION("through a cast") {
        auto grads = x.cast(DType::F64).exp().sum().backward();
        CHECK(x.grad(grads)->dtype() == DType::F32);
    }
    SECTION("through an op that promotes f32 with f64") {
        auto grads = (x.cast(DType::F64) * y).sum().backward();
        CHECK(x.grad(grads)->dtype() == DType::F32);
        CHECK(y.grad(grads)->dtype() == DType::F32);
        ember::test::check_close(y.grad(grads)->to_data(),
                                 ember::TensorData({4.0f, 6.0f}, {1, 2}));
    }
}

TEST_CASE("autodiff: every gradient fixture case is tested", "[autodiff]") {
    // Cases checked by test_autodiff.cpp rather than here.
    const std::set<std::string> elsewhere = {"seed_example", "mlp"};
    std::set<std::string> fixture;
    for (const auto& name : ember::test::fixture_cases(kFile)) {
        fixture.insert(name);
        INFO("fixture case " << name << " of " << kFile << ".json");
        CHECK((exercised().contains(name) || elsewhere.contains(name)));
    }
    for (const auto& name : exercised()) {
        INFO("tested case " << name);
        CHECK(fixture.contains(name));
    }
    CHECK(exercised().size() + elsewhere.size() == fixture.size());
}

}  // namespace test_autodiff_ops
