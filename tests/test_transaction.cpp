// Transaction<B> (Burn's Transaction): several tensors of every kind read in one round trip,
// on every backend and stack; on Vulkan and CUDA the whole read waits for the device once.
#include <ember/tensor/transaction.hpp>

#include "grad_check.hpp"
#include "op_test.hpp"
#if defined(EMBER_CUDA)
#include "cuda_harness.hpp"
#endif

namespace test_transaction {

namespace {
template <typename B>
void check_reads_every_kind() {
    const ember::Device<B> device{};
    const auto a =
        ember::Tensor<B, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}), device);
    const auto i = ember::Tensor<B, 1, Int>::from_ints({7, -8, 9}, device);
    const auto m = ember::Tensor<B, 2, Bool>::from_data(
        TensorData({true, false, false, true}, {2, 2}), device);
    // Pending work and views: a sum, a transpose (strided) and a slice of an int tensor.
    const auto s = (a * 2.f).sum_dim(1);
    const auto t = a.transpose();
    const auto j = i.slice({Slice{1}});

    auto data = ember::Transaction<B>{}
                    .register_(a)
                    .register_(i)
                    .register_(m)
                    .register_(s)
                    .register_(t)
                    .register_(j)
                    .execute();
    REQUIRE(data.size() == 6);
    // In registration order, each with its shape and kind's dtype.
    ember::test::check_close(data[0], TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}),
                             ember::test::default_tolerance<B>());
    ember::test::check_equal(data[1], TensorData(std::vector<std::int64_t>{7, -8, 9}, {3}));
    ember::test::check_equal(data[2], TensorData({true, false, false, true}, {2, 2}));
    // sum_dim(1) of 2a: 2·(1 + 2 + 3) = 12, 2·(4 + 5 + 6) = 30.
    ember::test::check_close(data[3], TensorData({12.f, 30.f}, {2, 1}),
                             ember::test::default_tolerance<B>());
    ember::test::check_close(data[4], TensorData({1.f, 4.f, 2.f, 5.f, 3.f, 6.f}, {3, 2}),
                             ember::test::default_tolerance<B>());
    ember::test::check_equal(data[5], TensorData(std::vector<std::int64_t>{-8, 9}, {2}));
    // The registered tensors stay usable.
    ember::test::check_equal(i.into_data(), TensorData(std::vector<std::int64_t>{7, -8, 9}, {3}));
}

// On a GPU backend: a transaction of a float, an int and a bool tensor waits for the device
// once, three to_data calls three times (`waits()`: the backend's count of host waits).
template <typename B, typename Waits>
void check_waits_once(Waits waits) {
    const auto a = ember::Tensor<B, 1>::ones({256}).exp();
    const auto b = ember::Tensor<B, 2, Int>::ones({8, 8});
    const auto c = ember::Tensor<B, 1>::ones({256}).greater_elem(0.5f);
    B::sync({});
    const auto before = waits();
    auto data = ember::Transaction<B>{}.register_(a).register_(b).register_(c).execute();
    CHECK(waits() - before == 1);
    CHECK(data[0].template to_vec<float>()[255] == Approx(std::exp(1.0f)));
    CHECK(data[1].template to_vec<std::int64_t>()[63] == 1);
    CHECK(data[2].template to_vec<bool>()[0]);
    // Each to_data waits on its own: three reads, three waits.
    const auto before_each = waits();
    (void)a.to_data();
    (void)b.to_data();
    (void)c.to_data();
    CHECK(waits() - before_each == 3);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("Transaction reads tensors of every kind in registration order",
                        "[transaction]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    check_reads_every_kind<TestType>();
}

TEMPLATE_LIST_TEST_CASE("Transaction on autodiff stacks", "[transaction][autodiff]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    check_reads_every_kind<B>();
    // A tracked tensor reads its value; the graph behind it still backpropagates.
    auto w = ember::Tensor<B, 1>::from_floats({1.f, -2.f}).require_grad();
    auto y = (w * w).sum();
    auto [wd, yd] = ember::Transaction<B>{}.register_(w).register_(y).template execute_array<2>();
    ember::test::check_close(yd, TensorData({5.f}, {1}), ember::test::default_tolerance<B>());
    auto grads = y.backward();
    // d(w·w)/dw = 2w.
    ember::test::check_close(w.grad(grads)->into_data(), TensorData({2.f, -4.f}, {2}),
                             ember::test::default_tolerance<B>());
    ember::test::check_close(wd, TensorData({1.f, -2.f}, {2}), ember::test::default_tolerance<B>());
}

TEMPLATE_LIST_TEST_CASE("Transaction edge cases", "[transaction]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("nothing registered reads nothing") {
        ember::Transaction<B> tr;
        CHECK(tr.size() == 0);
        CHECK(tr.execute().empty());
    }
    SECTION("an empty tensor and the same tensor twice") {
        const auto e = ember::Tensor<B, 2>::zeros({0, 3});
        const auto x = ember::Tensor<B, 1>::from_floats({0.5f});
        ember::Transaction<B> tr;
        tr.register_(e).register_(x).register_(x);
        CHECK(tr.size() == 3);
        auto data = tr.execute();
        CHECK(data[0].shape() == Shape{0, 3});
        CHECK(data[1].template to_vec<float>() == std::vector<float>{0.5f});
        CHECK(data[2].template to_vec<float>() == std::vector<float>{0.5f});
        CHECK(tr.size() == 0);  // executed: empty again
    }
    SECTION("execute_array of the wrong size reads nothing and says so") {
        const auto x = ember::Tensor<B, 1>::from_floats({1.f});
        ember::Transaction<B> tr;
        tr.register_(x);
        CHECK_THROWS_AS(tr.template execute_array<2>(), ember::ArgumentError);
        CHECK_THROWS_WITH(
            tr.template execute_array<2>(),
            Catch::Matchers::Contains("Transaction") && Catch::Matchers::Contains("1 tensors"));
        CHECK(tr.size() == 1);
    }
    SECTION("a moved-from tensor is an ArgumentError at registration") {
        auto x = ember::Tensor<B, 1>::from_floats({1.f});
        auto y = std::move(x);
        ember::Transaction<B> tr;
        CHECK_THROWS_AS(tr.register_(x),
                        ember::ArgumentError);  // NOLINT: use after move on purpose
        CHECK(y.is_valid());
    }
}

#if defined(EMBER_VULKAN)
TEMPLATE_TEST_CASE("Transaction waits for the Vulkan device once", "[transaction][vulkan]",
                   ember::Vulkan, ember::Fusion<ember::Vulkan>) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    check_waits_once<TestType>([] { return ember::vulkan::execution_stats().waits; });
}

TEST_CASE("Transaction on Vulkan reads more than the staging ring holds", "[transaction][vulkan]") {
    EMBER_SKIP_IF_UNAVAILABLE(ember::Vulkan);
    using B = ember::Vulkan;
    // The staging ring holds 32 MiB and a batch uses half of it: two 10 MiB tensors need two
    // batches, a 20 MiB one is read in parts; every value still arrives in its place.
    const std::size_t sizes[] = {10u << 18, 10u << 18, 20u << 18};  // floats: 10, 10, 20 MiB
    std::vector<ember::Tensor<B, 1>> ts;
    ember::Transaction<B> tr;
    for (int k = 0; k < 3; ++k) {
        ts.push_back(ember::Tensor<B, 1>::full({sizes[k]}, static_cast<float>(k + 1)));
        tr.register_(ts.back());
    }
    const auto small = ember::Tensor<B, 1>::from_floats({4.f, 5.f});
    tr.register_(small);
    auto data = tr.execute();
    for (int k = 0; k < 3; ++k) {
        const auto v = data[k].template to_vec<float>();
        REQUIRE(v.size() == sizes[k]);
        CHECK(v.front() == static_cast<float>(k + 1));
        CHECK(v.back() == static_cast<float>(k + 1));
    }
    CHECK(data[3].template to_vec<float>() == std::vector<float>{4.f, 5.f});
}
#endif

#if defined(EMBER_CUDA)
TEMPLATE_TEST_CASE("Transaction waits for the CUDA device once", "[transaction][cuda]", ember::Cuda,
                   ember::Fusion<ember::Cuda>) {
    REQUIRE_GPU();
    check_waits_once<TestType>([] { return ember::cuda::sync_stats().host_waits; });
}
#endif

}  // namespace test_transaction
