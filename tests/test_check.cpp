// The shared op checks (include/ember/tensor/check.hpp): each op's argument checks are written
// once, so the same misuse gives the same ember::Error subclass with the same message on every
// backend stack. Each case is run on the CPU and on the stack under test, and the two errors are
// compared word for word; each must also name the op.
#include <functional>
#include <string>
#include <vector>

#include "grad_check.hpp"
#include "harness.hpp"

namespace test_check {

namespace {

/// A misuse: a name, the op its message must name, and the call that breaks the rule.
struct Misuse {
    std::string name;
    std::string op;
    std::function<void()> call;
};

/// The error a call raised, as "Kind: message" ("no error" when it returned).
std::string error_of(const std::function<void()>& call) {
    try {
        call();
    } catch (const ember::ShapeError& e) {
        return std::string("ShapeError: ") + e.what();
    } catch (const ember::DimError& e) {
        return std::string("DimError: ") + e.what();
    } catch (const ember::IndexError& e) {
        return std::string("IndexError: ") + e.what();
    } catch (const ember::DTypeError& e) {
        return std::string("DTypeError: ") + e.what();
    } catch (const ember::ArgumentError& e) {
        return std::string("ArgumentError: ") + e.what();
    } catch (const ember::Error& e) {
        return std::string("Error: ") + e.what();
    }
    return "no error";
}

/// The misuses, on backend B. Every tensor is built inside the call, on B's default device.
template <typename B>
std::vector<Misuse> misuses() {
    using F1 = ember::Tensor<B, 1>;
    using F2 = ember::Tensor<B, 2>;
    using F3 = ember::Tensor<B, 3>;
    using F4 = ember::Tensor<B, 4>;
    using I1 = ember::Tensor<B, 1, ember::Int>;
    using I2 = ember::Tensor<B, 2, ember::Int>;
    namespace m = ember::module;
    std::vector<Misuse> v;
    auto add = [&](std::string name, std::string op, std::function<void()> f) {
        v.push_back({std::move(name), std::move(op), std::move(f)});
    };
    // matmul
    add("matmul inner dims", "matmul", [] { F2::zeros({2, 3}).matmul(F2::zeros({4, 5})); });
    add("matmul batch dims", "matmul", [] { F3::zeros({2, 2, 3}).matmul(F3::zeros({3, 3, 4})); });
    // convolutions
    add("conv2d channels", "conv2d", [] {
        m::conv2d(F4::zeros({1, 3, 5, 5}), F4::zeros({2, 4, 3, 3}));
    });
    add("conv2d kernel larger than the input", "conv2d", [] {
        m::conv2d(F4::zeros({1, 1, 2, 2}), F4::zeros({1, 1, 3, 3}));
    });
    add("conv2d bias", "conv2d", [] {
        m::conv2d(F4::zeros({1, 1, 4, 4}), F4::zeros({2, 1, 3, 3}), F1::zeros({3}));
    });
    add("conv2d groups", "conv2d", [] {
        ember::ConvOptions<2> o;
        o.groups = 2;
        m::conv2d(F4::zeros({1, 3, 4, 4}), F4::zeros({2, 1, 3, 3}), std::nullopt, o);
    });
    add("conv_transpose2d weight rows", "conv_transpose2d", [] {
        m::conv_transpose2d(F4::zeros({1, 3, 4, 4}), F4::zeros({2, 1, 3, 3}));
    });
    add("conv_transpose2d output padding", "conv_transpose2d", [] {
        ember::ConvTransposeOptions<2> o;
        o.padding_out = {1, 1};
        m::conv_transpose2d(F4::zeros({1, 1, 4, 4}), F4::zeros({1, 1, 3, 3}), std::nullopt, o);
    });
    add("deform_conv2d offset shape", "deform_conv2d", [] {
        m::deform_conv2d(F4::zeros({1, 1, 4, 4}), F4::zeros({1, 16, 2, 2}),
                         F4::zeros({1, 1, 3, 3}));
    });
    // pooling and interpolation
    add("avg_pool2d kernel larger than the padded input", "avg_pool2d", [] {
        m::avg_pool2d(F4::zeros({1, 1, 2, 2}), {3, 3}, {1, 1});
    });
    add("interpolate empty output", "interpolate", [] {
        m::interpolate(F4::zeros({1, 1, 2, 2}), {0, 2}, {});
    });
    add("adaptive_avg_pool2d empty input", "adaptive_avg_pool2d", [] {
        m::adaptive_avg_pool2d(F4::zeros({1, 1, 0, 2}), {2, 2});
    });
    // index ops
    add("gather indices larger than the tensor", "gather", [] {
        F2::zeros({2, 3}).gather(0, I2::zeros({2, 4}));
    });
    add("gather index out of range", "gather", [] {
        F2::zeros({2, 3}).gather(1, I2::from_data(ember::TensorData({0, 3}, {2, 1})));
    });
    add("select index out of range", "select", [] {
        F2::zeros({2, 3}).select(0, I1::from_data(ember::TensorData({0, 2}, {2})));
    });
    add("select_assign values shape", "select_assign", [] {
        F2::zeros({2, 3}).select_assign(0, I1::from_data(ember::TensorData({0}, {1})),
                                        F2::zeros({2, 3}));
    });
    add("scatter indices larger than the values", "scatter_add", [] {
        F2::zeros({2, 3}).scatter(0, I2::zeros({2, 3}), F2::zeros({1, 3}));
    });
    // shape ops
    add("cat shapes", "cat", [] { F2::cat({F2::zeros({2, 3}), F2::zeros({2, 4})}, 0); });
    add("slice_assign values shape", "slice_assign", [] {
        F2::zeros({4, 4}).slice_assign({{0, 2}, {0, 2}}, F2::zeros({3, 2}));
    });
    add("slice_assign clamped region", "slice_assign", [] {
        F2::zeros({2, 2}).slice_assign({{0, 5}}, F2::zeros({5, 2}));
    });
    add("expand", "expand", [] { F2::zeros({2, 3}).template expand<2>(ember::Shape{4, 3}); });
    add("reshape element count", "reshape", [] { F2::zeros({2, 3}).template reshape<2>({4, 2}); });
    add("topk larger than the dim", "topk", [] { F2::zeros({2, 3}).topk(4, 1); });
    // masks and creation
    add("mask_where shapes", "mask_where", [] {
        F2::zeros({2, 3}).mask_where(F2::zeros({2, 2}).equal_elem(0.0), F2::zeros({2, 3}));
    });
    add("mask_fill mask larger than the tensor", "mask_fill", [] {
        F2::zeros({1, 3}).mask_fill(F2::zeros({2, 3}).equal_elem(0.0), 1.0);
    });
    add("random uniform range", "random", [] {
        F2::random({2, 2}, ember::Distribution::Uniform(1.0, 0.0));
    });
    return v;
}

template <typename B>
void same_errors_as_cpu() {
    const auto ref = misuses<ember::Cpu>();
    const auto got = misuses<B>();
    REQUIRE(ref.size() == got.size());
    for (std::size_t i = 0; i < ref.size(); ++i) {
        INFO(ref[i].name);
        const std::string expected = error_of(ref[i].call);
        CHECK_THAT(expected, Catch::Contains(ref[i].op + ":"));
        CHECK(error_of(got[i].call) == expected);
    }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("checks: the same misuse gives the same error on every backend",
                        "[errors][check]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    same_errors_as_cpu<TestType>();
}

TEMPLATE_LIST_TEST_CASE("checks: the same misuse gives the same error under Autodiff",
                        "[errors][check]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    same_errors_as_cpu<TestType>();
}

}  // namespace test_check
