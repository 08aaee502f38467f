// `mnist train` on the concrete Autodiff<Cuda> stack, built where ember has CUDA: what
// --capture (the steps replayed as CUDA graphs) and NCCL between GPUs need, since both work on
// the CUDA backend's own tensors, which ember::Dispatch hides. Kept out of main.cpp so that the
// everyday build of the example instantiates no backend.
#include <ember/ember.hpp>
#if defined(EMBER_NCCL)
#include <ember/collective/nccl.hpp>
#endif

#include <memory>
#include <vector>

#include "../backend.hpp"
#include "train_with.hpp"

namespace mnist {

int train_on_cuda_stack(const Options& o) {
    using B = ember::Autodiff<ember::Cuda>;
    using Builder = train::LearnerBuilder<train::ClassificationOutput<B>,
                                          train::ClassificationOutput<ember::Cuda>>;
    const auto device = ember_examples::backend_device_of(o.backend);
    std::vector<ember::CudaDevice> devices;
    for (std::size_t i : o.devices) devices.push_back(ember::CudaDevice{i});
    if (devices.empty()) devices.push_back(ember::CudaDevice{device.index()});
    auto configure = [&](Builder& builder) {
#if defined(EMBER_NCCL)
        if (devices.size() > 1 && ember::collective::NcclCollective::is_available()) {
            std::vector<std::shared_ptr<ember::collective::Collective>> ranks;
            for (auto& r : ember::collective::NcclCollective::init_all(devices))
                ranks.push_back(std::move(r));
            builder.collectives(std::move(ranks));
        }
#else
        (void)builder;
#endif
    };
    const ember::CudaDevice valid_device = devices.front();
    if (o.config.model == "mlp") return train_model<Mlp<B>, B>(o, devices, valid_device, configure);
    if (o.config.model == "tiny")
        return train_model<TinyMlp<B>, B>(o, devices, valid_device, configure);
    return train_model<Cnn<B>, B>(o, devices, valid_device, configure);
}

}  // namespace mnist
