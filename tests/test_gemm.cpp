// The CPU backend's matmul across its GEMM paths: tiny products, the unpacked dot-product
// path (A·Bᵀ with few rows or columns), the row path (one or two rows of A), the packed blocked
// path and the depth-small path, each with both operands plain or transposed. Expected values
// are the sums written out in double.
#include "harness.hpp"
#include "matmul_reference.hpp"

namespace test_gemm {

namespace {

using B = ember::Cpu;
using T2 = ember::Tensor<B, 2>;

// Σ_p a[i, p] · b[p, j], in double, from the operands' values.
ember::TensorData reference(const T2& a, const T2& b) {
    return ember::test::matmul_reference(a, b);
}

// op(A) [m, k] and op(B) [k, n], each either stored as is or stored transposed.
void check_product(std::size_t m, std::size_t n, std::size_t k, bool ta, bool tb) {
    INFO("m " << m << ", n " << n << ", k " << k << (ta ? ", A transposed" : "")
              << (tb ? ", B transposed" : ""));
    const auto dist = ember::Distribution::Uniform(-1, 1);
    const T2 a = ta ? T2::random({k, m}, dist).transpose() : T2::random({m, k}, dist);
    const T2 b = tb ? T2::random({n, k}, dist).transpose() : T2::random({k, n}, dist);
    // f32 sums of up to k products of values in [-1, 1]: error grows like √k·ε.
    ember::test::check_close(a.matmul(b).to_data(), reference(a, b), ember::Tolerance{1e-4, 1e-4});
}

}  // namespace

TEST_CASE("matmul across the CPU GEMM paths", "[gemm]") {
    B::seed(11);
    SECTION("tiny products") {
        for (bool ta : {false, true})
            for (bool tb : {false, true}) check_product(3, 5, 7, ta, tb);
    }
    SECTION("A·Bᵀ with few rows or columns (unpacked dot products)") {
        // Edge tiles in both directions, depths with and without a vector remainder.
        for (std::size_t m : {1, 4, 7, 16})
            for (std::size_t n : {3, 9, 72})
                for (std::size_t k : {64, 100, 576}) check_product(m, n, k, false, true);
        check_product(300, 5, 129, false, true);  // thin in n rather than m
    }
    SECTION("one or two rows times a plain B (rows of B summed, nothing packed)") {
        for (bool ta : {false, true}) {
            check_product(1, 64, 784, ta, false);
            check_product(2, 10, 64, ta, false);
            // Large enough to be split over the pool in strips of columns (with threads), one
            // strip ending short.
            check_product(1, 520, 784, ta, false);
            check_product(2, 300, 200, ta, false);
        }
    }
    SECTION("larger products (packed panels)") {
        for (bool ta : {false, true})
            for (bool tb : {false, true}) check_product(70, 90, 300, ta, tb);
        check_product(64, 512, 784, false, true);
        check_product(17, 40, 64, true, true);
    }
    SECTION("products large enough to split into tiles across the pool (OpenBLAS, threads)") {
        // With OpenBLAS and two threads or more, products of 2^22 multiply-adds or more run
        // as tiles of C on the pool (gemm.cpp, blas_tiles): at four threads 2 x 2 tiles, two
        // bands of rows and two strips of columns here, with edges that are not multiples of
        // the kernels' 16; each operand plain or transposed.
        for (bool ta : {false, true})
            for (bool tb : {false, true}) {
                check_product(160, 300, 200, ta, tb);
                check_product(500, 40, 230, ta, tb);
                check_product(60, 700, 110, ta, tb);
            }
    }
    SECTION("a batch of products") {
        const auto dist = ember::Distribution::Uniform(-1, 1);
        const auto a = ember::Tensor<B, 3>::random({3, 8, 96}, dist);
        const auto b = ember::Tensor<B, 3>::random({3, 20, 96}, dist).swap_dims(1, 2);
        const auto c = a.matmul(b);
        for (long i = 0; i < 3; ++i) {
            const T2 ai = a.slice({{i, i + 1}}).squeeze<2>(0);
            const T2 bi = b.slice({{i, i + 1}}).squeeze<2>(0);
            ember::test::check_close(c.slice({{i, i + 1}}).squeeze<2>(0).to_data(),
                                     reference(ai, bi), ember::Tolerance{1e-4, 1e-4});
        }
    }
}

}  // namespace test_gemm
