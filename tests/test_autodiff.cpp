// The autodiff decorator itself: the seed example, a two-layer MLP against PyTorch,
// leaves and detaching, the no-op API on plain backends, memory released by backward,
// checkpointing's lower peak, and errors.
#include <thread>

#include "grad_check.hpp"

namespace test_autodiff {

namespace {

using ember::Float;
using ember::Int;
using ember::Tensor;
using ember::test::check_gradients;
using ember::test::GradOptions;
using ember::test::In;

constexpr const char* kFile = "autodiff_ops";

template <typename T>
concept HasBackward = requires(T x) { x.backward(); };

/// Bytes the CPU allocator gives a tensor of `n` f32 elements.
std::size_t f32_bytes(std::size_t n) { return std::max<std::size_t>(64, n * 4); }

}  // namespace

TEMPLATE_LIST_TEST_CASE("autodiff: the seed example and an MLP against PyTorch", "[autodiff]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("seed example: exp((x + y) @ x), backward from the result") {
        const ember::test::Fixture fx(kFile, "seed_example");
        ember::Device<B> device{};
        auto x = Tensor<B, 2>::from_data(fx.input(0), device);
        auto y = Tensor<B, 2>::from_data(fx.input(1), device).require_grad();
        auto t = (x + y).matmul(x).exp();
        auto grads = t.backward();
        std::optional<Tensor<ember::InnerBackend<B>, 2>> y_grad = y.grad(grads);
        REQUIRE(y_grad.has_value());
        CHECK_FALSE(x.grad(grads).has_value());
        ember::test::check_close(y_grad->to_data(), fx.output(1), {1e-4, 1e-4});
        // And through the generic checker (PyTorch + finite differences).
        check_gradients<B, In<2, Float, false>, In<2>>(
            kFile, "seed_example", [](auto a, auto b) { return (a + b).matmul(a).exp(); });
    }
    SECTION("two-layer MLP: every parameter's gradient") {
        check_gradients<B, In<2, Float, false>, In<2>, In<1>, In<2>, In<1>, In<1, Int>>(
            kFile, "mlp", [](auto x, auto w1, auto b1, auto w2, auto b2, auto target) {
                auto h = ember::activation::relu(x.matmul(w1) + b1.unsqueeze());
                auto logits = h.matmul(w2) + b2.unsqueeze();
                auto logp = ember::activation::log_softmax(logits, 1);
                auto picked = logp.gather(1, target.template reshape<2>({-1, 1}));
                return -picked.mean();
            });
    }
}

TEMPLATE_LIST_TEST_CASE("autodiff: leaves, detach and the graph", "[autodiff]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using Inner = ember::InnerBackend<B>;
    ember::Device<B> device{};
    auto w = Tensor<B, 2>::from_data(ember::TensorData({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}), device);

    SECTION("require_grad marks a leaf; plain tensors are not tracked") {
        CHECK_FALSE(w.is_require_grad());
        auto l = w.require_grad();
        CHECK(l.is_require_grad());
        CHECK_FALSE(l.set_require_grad(false).is_require_grad());
        CHECK_FALSE((l * 2.0).is_require_grad());  // an op result is not a leaf
    }
    SECTION("gradients accumulate over every use: d/dw sum(w*w + w) = 2w + 1") {
        auto l = w.require_grad();
        auto grads = (l * l + l).sum().backward();
        ember::test::check_close(l.grad(grads)->to_data(),
                                 ember::TensorData({3.0f, 5.0f, 7.0f, 9.0f}, {2, 2}));
    }
    SECTION("detach stops the gradient") {
        auto l = w.require_grad();
        auto grads = (l * l.detach()).sum().backward();
        ember::test::check_close(l.grad(grads)->to_data(), w.to_data());
    }
    SECTION("grad_remove takes the gradient out; grad_replace sets one") {
        auto l = w.require_grad();
        auto grads = (l * 3.0).sum().backward();
        CHECK(grads.size() == 1);
        auto g = l.grad_remove(grads);
        REQUIRE(g.has_value());
        CHECK_FALSE(l.grad(grads).has_value());
        l.grad_replace(grads, *g * 2.0);
        ember::test::check_close(l.grad(grads)->to_data(), ember::TensorData(std::vector<float>(4, 6.0f), {2, 2}));
    }
    SECTION("inner and from_inner cross to the inner backend, untracked") {
        auto l = w.require_grad();
        Tensor<Inner, 2> i = l.inner();
        ember::test::check_close(i.to_data(), w.to_data());
        auto back = Tensor<B, 2>::from_inner(i);
        CHECK_FALSE(back.is_require_grad());
        auto grads = (back * l).sum().backward();
        ember::test::check_close(l.grad(grads)->to_data(), w.to_data());
    }
    SECTION("int and bool tensors pass through") {
        auto l = w.require_grad();
        Tensor<B, 2, Int> idx = l.argmax(1);
        Tensor<B, 2, ember::Bool> mask = l.greater_elem(2.0);
        auto picked = l.gather(1, idx).sum() + l.mask_fill(mask, 0.0).sum();
        auto grads = picked.backward();
        // gather picks column 1 of each row (+1); mask_fill keeps 1 and 2 (+1).
        ember::test::check_close(l.grad(grads)->to_data(),
                                 ember::TensorData({1.0f, 2.0f, 0.0f, 1.0f}, {2, 2}));
    }
    SECTION("Gradients move to another thread") {
        auto l = w.require_grad();
        auto grads = (l * l).sum().backward();
        std::optional<Tensor<Inner, 2>> got;
        std::thread worker([&got, l, g = std::move(grads)] { got = l.grad(g); });
        worker.join();
        REQUIRE(got.has_value());
        ember::test::check_close(got->to_data(), (w * 2.0).to_data());
    }
    SECTION("a second backward through a consumed graph is an error") {
        auto l = w.require_grad();
        auto y = (l * l).exp();
        auto loss = y.sum();
        (void)loss.backward();
        CHECK_THROWS_AS((void)(y * 2.0).sum().backward(), ember::ArgumentError);
    }
    SECTION("grad_replace on an untracked tensor is an error") {
        ember::Gradients grads;
        CHECK_THROWS_AS(w.grad_replace(grads, w.inner()), ember::ArgumentError);
    }
}

TEST_CASE("autodiff: the API is a no-op on plain backends", "[autodiff]") {
    using ember::Cpu;
    auto t = Tensor<Cpu, 2>::ones({2, 2});
    CHECK_FALSE(t.require_grad().is_require_grad());
    CHECK_FALSE(t.set_require_grad(true).is_require_grad());
    ember::test::check_close(t.detach().to_data(), t.to_data());
    Tensor<Cpu, 2> i = t.inner();
    ember::test::check_close(Tensor<Cpu, 2>::from_inner(i).to_data(), t.to_data());
    ember::Gradients grads;
    CHECK_FALSE(t.grad(grads).has_value());
    CHECK_FALSE(t.grad_remove(grads).has_value());
    static_assert(!HasBackward<Tensor<Cpu, 2>>, "backward() must not compile without autodiff");
    static_assert(HasBackward<Tensor<ember::Autodiff<Cpu>, 2>>);
    static_assert(ember::AutodiffBackend<ember::Autodiff<Cpu>> && !ember::AutodiffBackend<Cpu>);
    static_assert(std::same_as<ember::InnerBackend<ember::Autodiff<Cpu>>, Cpu>);
}

TEST_CASE("autodiff: backward releases the graph's memory", "[autodiff][memory]") {
    using B = ember::Autodiff<ember::Cpu>;
    // Sizes in whole allocator classes (powers of two of at least 64 bytes) make the byte
    // counts exact.
    auto x = Tensor<B, 2>::random({64, 128}, ember::Distribution::Default);
    auto w1 = Tensor<B, 2>::random({128, 128}, ember::Distribution::Default).require_grad();
    auto w2 = Tensor<B, 2>::random({128, 16}, ember::Distribution::Default).require_grad();
    const std::size_t before = ember::cpu::memory_stats().bytes_in_use;
    auto loss = ember::activation::gelu(ember::activation::relu(x.matmul(w1)).tanh().matmul(w2))
                    .exp()
                    .sum();
    const std::size_t forward = ember::cpu::memory_stats().bytes_in_use;
    CHECK(forward >= before + f32_bytes(64 * 128) * 2);  // the graph keeps its intermediates
    auto grads = loss.backward();
    const std::size_t after = ember::cpu::memory_stats().bytes_in_use;
    // What remains: the loss value and the two gradients.
    CHECK(after == before + f32_bytes(1) + f32_bytes(128 * 128) + f32_bytes(128 * 16));
    grads = ember::Gradients{};
    CHECK(ember::cpu::memory_stats().bytes_in_use == before + f32_bytes(1));
}

TEST_CASE("autodiff: balanced checkpointing lowers peak memory", "[autodiff][memory]") {
    // A chain of memory-bound ops: without checkpointing every intermediate is kept for
    // backward; with it, only the input is, and the chain is recomputed during backward.
    auto chain = [](auto x) {
        for (int i = 0; i < 12; ++i) x = (x.sin() * 1.5 + 0.25).tanh();
        return x.sum();
    };
    auto run = [&]<typename B>(ember::TensorData data) {
        auto x = Tensor<B, 2>::from_data(data, {}).require_grad();
        ember::cpu::reset_peak_memory();
        const std::size_t start = ember::cpu::memory_stats().bytes_in_use;
        auto grads = chain(x).backward();
        const std::size_t peak = ember::cpu::memory_stats().peak_bytes_in_use - start;
        return std::pair{peak, x.grad(grads)->to_data()};
    };
    auto data = Tensor<ember::Cpu, 2>::random({256, 256}, ember::Distribution::Default).to_data();
    auto [plain_peak, plain_grad] = run.template operator()<ember::Autodiff<ember::Cpu>>(data);
    auto [ckpt_peak, ckpt_grad] =
        run.template operator()<ember::Autodiff<ember::Cpu, ember::BalancedCheckpointing>>(data);
    INFO("peak without checkpointing " << plain_peak << " B, with " << ckpt_peak << " B");
    CHECK(ckpt_peak * 2 < plain_peak);
    ember::test::check_close(ckpt_grad, plain_grad, {1e-6, 1e-5});
}

}  // namespace test_autodiff
