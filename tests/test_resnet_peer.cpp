// The ResNet example's network (examples/resnet/model.hpp) against its PyTorch peer
// (benchmarks/resnet_torch.py): the weights PyTorch initialised load through PyTorchFileRecorder
// by the example's parameter paths, and five SGD steps (the example's optimizer) on the fixed
// batch give PyTorch's float64 losses (tests/fixtures/gen_resnet_peer.py). On the CPU, and on
// CUDA where a GPU is present (skipped otherwise). CTest's example.resnet.pytorch-losses runs
// the same check through the example's command line.
#include <ember/optim.hpp>
#include <ember/record/pytorch.hpp>
#if defined(EMBER_CUDA)
#include <ember/backend/cuda.hpp>
#endif

#include <cmath>
#include <filesystem>
#include <string_view>
#include <vector>

#include "../examples/resnet/model.hpp"
#include "harness.hpp"

namespace test_resnet_peer {

namespace {

namespace rec = ember::record;

const std::filesystem::path kDir = std::filesystem::path(EMBER_FIXTURE_DIR) / "pytorch";

// The tensor `key` of the fixture's batch file.
ember::TensorData batch_tensor(std::string_view key) {
    const auto tensors = rec::read_pytorch_tensors(kDir / "resnet_peer_batch.pt");
    for (const auto& [name, data] : tensors)
        if (name == key) return data;
    FAIL("resnet_peer_batch.pt has no tensor " << key);
    return ember::TensorData();
}

// The losses of five SGD steps (lr 0.05, momentum 0.9, weight decay 5e-4) from the peer's
// weights on its batch, on `device`.
template <ember::AutodiffBackend B>
std::vector<double> peer_losses(const ember::Device<B>& device = {}) {
    // ResNet-18's shape at width 4, as gen_resnet_peer.py builds it.
    const auto fresh = resnet::ResNetConfig{{4, 8, 16, 32}, {2, 2, 2, 2}, 3, 10}.init<B>(device);
    const rec::PyTorchFileRecorder<rec::FullPrecisionSettings> recorder;
    auto model = recorder.load_into(fresh, rec::LoadArgs(kDir / "resnet_peer.pt"), device);
    // The file's weights replaced the fresh ones (the stem's first value as a spot check).
    const auto file_w = rec::read_pytorch_tensors(kDir / "resnet_peer.pt").front();
    REQUIRE(file_w.first == "conv1.weight");
    CHECK(model.conv1.weight.val().to_data().template to_vec<float>()[0] ==
          file_w.second.to_vec<float>()[0]);

    const resnet::ImageBatch<B> batch{
        ember::Tensor<B, 4>::from_data(batch_tensor("images"), device),
        ember::Tensor<B, 1, ember::Int>::from_data(batch_tensor("targets"), device)};
    auto sgd = ember::optim::SgdConfig{}
                   .with_momentum(ember::optim::MomentumConfig{0.9, 0.0})
                   .with_weight_decay(ember::optim::WeightDecayConfig{5e-4})
                   .init<resnet::ResNet<B>>();
    std::vector<double> losses;
    for (int s = 0; s < 5; ++s) {
        auto loss = model.classify(batch).loss;
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        model = sgd.step(0.05, std::move(model), std::move(grads));
        losses.push_back(double(loss.into_scalar()));
    }
    return losses;
}

void check_losses(const std::vector<double>& got) {
    const auto want = batch_tensor("losses").to_vec<double>();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("step " << i + 1 << ": ember " << got[i] << ", PyTorch " << want[i]);
        CHECK(std::abs(got[i] - want[i]) <= 1e-4);
    }
}

}  // namespace

TEST_CASE("the ResNet example reproduces its PyTorch peer's losses", "[models][resnet]") {
    check_losses(peer_losses<ember::Autodiff<ember::Cpu>>());
}

#if defined(EMBER_CUDA)
TEST_CASE("the ResNet example reproduces its PyTorch peer's losses on CUDA",
          "[models][resnet][cuda]") {
    if (!ember::cuda::is_available()) {
        WARN("skipped: no CUDA device");
        return;
    }
    check_losses(peer_losses<ember::Autodiff<ember::Cuda>>());
}
#endif

}  // namespace test_resnet_peer
