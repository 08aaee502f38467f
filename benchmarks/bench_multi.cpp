// Data-parallel training throughput on CUDA devices (benchmarks/multi_gpu.sh runs it beside
// PyTorch's DistributedDataParallel, bench_multi_torch.py): the guide CNN and a transformer
// encoder, Adam, synthetic data resident on each GPU, gradients averaged by NcclCollective.
//
//   bench_multi --model cnn|transformer --devices 0,1 [--batch N] [--steps S] [--warmup W]
//       one process, a thread per device (NcclCollective::init_all); one device: no collective
//   EMBER_WORLD_SIZE=2 EMBER_RANK=r EMBER_MASTER_ADDR=127.0.0.1:29511 bench_multi --model cnn
//       one process per device (device = EMBER_LOCAL_RANK, else the rank), TCP rendezvous
//
// Prints one line per run: model, world size, batch per device, samples/s and ms per step.
#include <chrono>
#include <cstdlib>
#include <ember/backend/cuda.hpp>
#include <ember/collective/gradients.hpp>
#include <ember/collective/nccl.hpp>
#include <ember/collective/rendezvous.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <iomanip>
#include <iostream>
#include <string>
#include <thread>

#include "../examples/mnist/common.hpp"

namespace {

using ember::Tensor;
using B = ember::Autodiff<ember::Cuda>;
using Dev = ember::CudaDevice;
namespace coll = ember::collective;

struct Options {
    std::string model = "cnn";
    std::vector<std::size_t> devices{0};
    std::size_t batch = 0;  // per device; 0: the model's default
    std::size_t steps = 30, warmup = 5;
    bool overlap = true;  // gradients all-reduced during backward (GradientReducer)
};

// A transformer classifier: 6 encoder layers, d_model 512, 8 heads, d_ff 2048, sequence 128,
// mean-pooled into 10 classes.
template <ember::Backend BB>
struct TransformerNet {
    ember::nn::TransformerEncoder<BB> encoder;
    ember::nn::Linear<BB> head;
    EMBER_MODULE(TransformerNet, encoder, head)
    static constexpr std::size_t seq = 128, d_model = 512;
    static TransformerNet init(const Dev& d) {
        return {
            ember::nn::TransformerEncoderConfig{d_model, 2048, 8, 6}.with_dropout(0.0).init<BB>(d),
            ember::nn::LinearConfig{d_model, 10}.init<BB>(d)};
    }
    Tensor<BB, 2> forward(const Tensor<BB, 3>& x) const {
        auto h = encoder.forward(ember::nn::TransformerEncoderInput<BB>(x));
        const long n = long(x.dims()[0]);
        return head.forward(h.mean_dim(1).template reshape<2>({n, long(d_model)}));
    }
};

template <ember::Backend BB>
struct CnnNet {
    mnist::Cnn<BB> net;
    EMBER_MODULE(CnnNet, net)
    static CnnNet init(const Dev& d) { return {mnist::Cnn<BB>::init(d)}; }
    Tensor<BB, 2> forward(const Tensor<BB, 3>& x) const { return net.forward(x); }
};

using Transformer = TransformerNet<B>;
using Cnn = CnnNet<B>;

template <typename M>
ember::Shape input_shape(std::size_t batch) {
    if constexpr (std::is_same_v<M, Cnn>)
        return {batch, 28, 28};
    else
        return {batch, Transformer::seq, Transformer::d_model};
}

// Trains `steps` steps on `device` (after `warmup`), averaging gradients through `c` when
// given; returns the seconds of the timed steps.
template <typename M>
double run_replica(coll::Collective* c, Dev device, const Options& o, std::size_t batch) {
    B::seed(1234);
    M model = M::init(device);
    if (c) model = coll::broadcast_module(*c, model, 0);
    auto optim = ember::optim::AdamConfig{}.init<M>();
    auto x = Tensor<B, 3>::random(input_shape<M>(batch), ember::Distribution::Default, device);
    auto y = Tensor<B, 1, ember::Int>::random({batch}, ember::Distribution::Uniform(0, 10), device);
    auto loss_fn = ember::nn::loss::CrossEntropyLossConfig{}.init<B>();
    auto step = [&] {
        auto loss = loss_fn.forward(model.forward(x), y);
        if (c && o.overlap) {
            coll::GradientReducer reducer(*c, model);
            ember::optim::GradientsParams grads;
            {
                auto scope = reducer.attach();
                grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
            }
            model = optim.step(1e-4, std::move(model), reducer.finish(std::move(grads)));
            return;
        }
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        if (c) grads = coll::sync_gradients(*c, model, std::move(grads));
        model = optim.step(1e-4, std::move(model), std::move(grads));
    };
    for (std::size_t i = 0; i < o.warmup; ++i) step();
    ember::Cuda::sync(device);
    if (c) c->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < o.steps; ++i) step();
    ember::Cuda::sync(device);
    if (c) c->barrier();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename M>
void bench(const Options& o) {
    const std::size_t batch = o.batch ? o.batch : (std::is_same_v<M, Cnn> ? 4096 : 32);
    double seconds = 0;
    std::size_t world = o.devices.size();
    bool report = true;
    if (const char* ws = std::getenv("EMBER_WORLD_SIZE"); ws && *ws) {
        const auto env = coll::ProcessGroupEnv::from_env();
        const char* local = std::getenv("EMBER_LOCAL_RANK");
        const Dev device{local && *local ? std::size_t(std::atoi(local)) : env.rank};
        auto comm = coll::NcclCollective::from_env(device);
        world = env.world_size;
        report = env.rank == 0;
        seconds = run_replica<M>(comm.get(), device, o, batch);
    } else if (o.devices.size() == 1) {
        seconds = run_replica<M>(nullptr, Dev{o.devices[0]}, o, batch);
    } else {
        std::vector<Dev> devs;
        for (auto d : o.devices) devs.push_back(Dev{d});
        auto ranks = coll::NcclCollective::init_all(devs);
        std::vector<double> secs(devs.size());
        std::vector<std::string> errors(devs.size());
        std::vector<std::thread> threads;
        for (std::size_t r = 0; r < devs.size(); ++r)
            threads.emplace_back([&, r] {
                try {
                    secs[r] = run_replica<M>(ranks[r].get(), devs[r], o, batch);
                } catch (const std::exception& e) {
                    errors[r] = e.what();
                    ranks[r]->abort(e.what());
                }
            });
        for (auto& t : threads) t.join();
        for (const auto& e : errors)
            if (!e.empty()) throw std::runtime_error(e);
        seconds = secs[0];
    }
    if (!report) return;
    const double samples = double(world * batch * o.steps);
    std::cout << std::fixed << std::setprecision(1) << "ember model=" << o.model
              << " world=" << world << " batch_per_device=" << batch
              << " overlap=" << (world > 1 && o.overlap ? "on" : "off")
              << " samples_per_s=" << samples / seconds << std::setprecision(3)
              << " ms_per_step=" << 1000.0 * seconds / double(o.steps) << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Options o;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const std::string v = i + 1 < argc ? argv[i + 1] : "";
            if (a == "--model")
                o.model = v, ++i;
            else if (a == "--batch")
                o.batch = std::stoul(v), ++i;
            else if (a == "--steps")
                o.steps = std::stoul(v), ++i;
            else if (a == "--warmup")
                o.warmup = std::stoul(v), ++i;
            else if (a == "--overlap")
                o.overlap = v != "off", ++i;
            else if (a == "--devices") {
                o.devices.clear();
                for (std::size_t s = 0; s <= v.size();) {
                    const std::size_t e = std::min(v.find(',', s), v.size());
                    o.devices.push_back(std::stoul(v.substr(s, e - s)));
                    s = e + 1;
                }
                ++i;
            } else {
                std::cerr << "bench_multi: unknown option " << a << '\n';
                return 2;
            }
        }
        if (o.model == "cnn")
            bench<Cnn>(o);
        else if (o.model == "transformer")
            bench<Transformer>(o);
        else
            throw ember::ArgumentError("bench_multi: --model must be cnn or transformer");
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "bench_multi: " << e.what() << '\n';
        return 1;
    }
}
