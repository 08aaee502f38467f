// Gradients of the tensor ops on every autodiff stack: against PyTorch (fixtures from
// tests/fixtures/gen_autodiff_ops.py) and against float64 finite differences.
#include "grad_check.hpp"

namespace {

using ember::Float;
using ember::Int;
using ember::test::check_gradients;
using ember::test::GradOptions;
using ember::test::In;

constexpr const char* kFile = "autodiff_ops";

}  // namespace

TEMPLATE_LIST_TEST_CASE("autodiff: tensor ops", "[autodiff]", ember::test::AutodiffBackends) {
    using B = TestType;
    SECTION("elementwise") {
        check_gradients<B, In<3>>(kFile, "exp", [](auto x) { return x.exp(); });
        check_gradients<B, In<3>, In<3>>(kFile, "add_broadcast",
                                         [](auto a, auto b) { return a + b; });
    }
    SECTION("matmul") {
        check_gradients<B, In<3>, In<3>>(kFile, "matmul_batch_broadcast",
                                         [](auto a, auto b) { return a.matmul(b); });
    }
}
