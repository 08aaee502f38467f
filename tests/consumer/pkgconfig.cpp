// A program built with nothing but `pkg-config --cflags --libs ember` (tests/consumer/run.cmake):
// a product on the CPU backend, checked against values worked out by hand.
#include <ember/ember.hpp>
#include <ember/backend/cpu.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    using B = ember::Cpu;
    auto a = ember::Tensor<B, 2>::from_data(ember::TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}));
    auto b = ember::Tensor<B, 2>::from_data(ember::TensorData({5.f, 6.f, 7.f, 8.f}, {2, 2}));
    // [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]]; summed: 134.
    const auto got = a.matmul(b).sum().to_data().to_vec<float>();
    if (got.size() != 1 || std::fabs(got[0] - 134.f) > 1e-4f) {
        std::fprintf(stderr, "consumer_pc: sum(a @ b) is not 134\n");
        return 1;
    }
    std::puts("consumer_pc: ok");
    return 0;
}
