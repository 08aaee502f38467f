#pragma once
// A matrix product computed in double from two tensors' values: the expected value of the GEMM
// tests (math, not ember's own kernels).
#include <cstddef>
#include <vector>

#include <ember/tensor/data.hpp>

namespace ember::test {

/// Σ_p a[i, p] · b[p, j] in double, for rank-2 tensors a [m, k] and b [k, n].
template <typename T2>
TensorData matmul_reference(const T2& a, const T2& b) {
    const auto av = a.to_data().convert(DType::F64).template to_vec<double>();
    const auto bv = b.to_data().convert(DType::F64).template to_vec<double>();
    const std::size_t m = a.dims()[0], k = a.dims()[1], n = b.dims()[1];
    std::vector<double> out(m * n, 0.0);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::size_t p = 0; p < k; ++p) s += av[i * k + p] * bv[p * n + j];
            out[i * n + j] = s;
        }
    return TensorData(out, Shape{m, n});
}

}  // namespace ember::test
