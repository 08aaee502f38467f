// compile probe (a) in LibTorch: the README's tensor snippet (tensor_snippet.cpp) written with
// <torch/torch.h>, the header a LibTorch program includes, for the comparison
// (benchmarks/compile_dispatch.sh; Debian's libtorch-dev, skipped where it is not installed).
#include <torch/torch.h>

#include <iostream>
#include <vector>

int main() {
    auto a = torch::tensor({1.f, 2.f, 3.f, 4.f}).reshape({2, 2});
    auto x = torch::rand({2, 2});
    auto t = (a + x).matmul(a).exp() * 2;
    std::cout << t << '\n';
    auto i = torch::arange(0, 5, torch::kLong);
    const float* p = a.data_ptr<float>();
    std::vector<float> v(p, p + a.numel());
    return static_cast<int>(v.size() + i.size(0)) == 9 ? 0 : 1;
}
