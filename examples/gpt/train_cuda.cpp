// `gpt train --devices I,J,...` and `gpt train --distributed`: data-parallel training (and
// --bench) on the concrete CUDA stacks, Autodiff<Cuda> or Autodiff<Fusion<Cuda>> (--backend
// cuda or cuda+fusion), built where ember has CUDA. NCCL reduces the CUDA backend's own device
// memory, which ember::Dispatch hides, so this path instantiates the stack itself; kept out of
// main.cpp so that the everyday build of the example instantiates no backend.
//
//   --devices 0,1,2,3   one process, a thread and a replica per GPU (NcclCollective::init_all);
//                       one device: the same stack without a collective (the 1-GPU baseline)
//   --distributed       one process per GPU: EMBER_WORLD_SIZE, EMBER_RANK, the device
//                       EMBER_LOCAL_RANK (else the rank, or the one --devices names), the NCCL
//                       id through EMBER_NCCL_ID, EMBER_NCCL_ID_FILE or EMBER_MASTER_ADDR
#include <ember/backend/cuda.hpp>
#include <ember/ember.hpp>
#if defined(EMBER_NCCL)
#include <ember/collective/nccl.hpp>
#include <ember/collective/rendezvous.hpp>
#endif

#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../backend.hpp"
#include "train.hpp"

namespace gpt {

namespace {

// The device of this process's rank under --distributed: the one --devices names, else
// EMBER_LOCAL_RANK, else the rank.
std::size_t distributed_device(const Options& o, std::size_t rank) {
    if (o.devices.size() == 1) return o.devices[0];
    EMBER_CHECK(o.devices.empty(), Argument,
                "--distributed runs one device per process: --devices may name one, got ",
                o.devices.size());
    const char* local = std::getenv("EMBER_LOCAL_RANK");
    if (local == nullptr || *local == '\0') return rank;
    char* end = nullptr;
    const unsigned long v = std::strtoul(local, &end, 10);
    EMBER_CHECK(*end == '\0' && local[0] != '-', Argument,
                "EMBER_LOCAL_RANK must be a device index, got '", local, "'");
    return std::size_t(v);
}

// `train` or `--bench` of one replica.
template <ember::AutodiffBackend B>
int run_replica(const Options& o, const Corpus* corpus, ember::CudaDevice device, Gpt<B> model,
                const Replica& rep) {
    if (o.bench) return bench<B>(o, device, std::move(model), rep, device.index);
    return train<B>(o, *corpus, device, device, std::move(model), rep);
}

template <ember::AutodiffBackend B>
int train_on(const Options& o) {
    std::optional<Corpus> corpus;
    if (!o.bench) corpus = load_corpus(o.texts);
    const Corpus* text = corpus ? &*corpus : nullptr;
    B::seed(o.config.seed);
    if (o.distributed) {
#if defined(EMBER_NCCL)
        const auto env = ember::collective::ProcessGroupEnv::from_env();
        const ember::CudaDevice device{distributed_device(o, env.rank)};
        auto model = initial_model<B>(o, device);
        auto comm = ember::collective::NcclCollective::from_env(device);
        return run_replica<B>(o, text, device, std::move(model),
                              Replica{comm.get(), env.rank, env.world_size});
#endif
    }
    std::vector<ember::CudaDevice> devices;
    for (std::size_t i : o.devices) devices.push_back(ember::CudaDevice{i});
    EMBER_CHECK(!devices.empty(), Argument, "--devices names no device");
    // The model is made once, from the seed, and each replica gets a copy on its device: one
    // backend generator drawn from by several threads would make the initial weights depend on
    // the threads' timing.
    auto model = initial_model<B>(o, devices.front());
    if (devices.size() == 1) return run_replica<B>(o, text, devices.front(), std::move(model), {});
#if defined(EMBER_NCCL)
    // Every copy is made here, before any replica starts: a copy from device 0 waits for device
    // 0's stream, and once replica 0 has queued its first NCCL reduction there, that stream
    // waits for the other replicas' reductions — a replica still copying its weights from
    // device 0 would wait for ever (seen as a hang of `--devices 0,1` on two H200s).
    std::vector<std::optional<decltype(model)>> replicas(devices.size());
    for (std::size_t r = 0; r < devices.size(); ++r) replicas[r].emplace(model.fork(devices[r]));
    auto ranks = ember::collective::NcclCollective::init_all(devices);
    std::vector<int> status(devices.size(), 0);
    std::exception_ptr first_error;
    std::mutex error_mutex;
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < devices.size(); ++r)
        threads.emplace_back([&, r] {
            try {
                status[r] = run_replica<B>(o, text, devices[r], std::move(*replicas[r]),
                                           Replica{ranks[r].get(), r, devices.size()});
            } catch (const std::exception& e) {
                {
                    const std::lock_guard lock(error_mutex);
                    if (!first_error) first_error = std::current_exception();
                }
                // The other replicas stop waiting for this one in their next collective.
                ranks[r]->abort("replica " + std::to_string(r) + " failed: " + e.what());
            }
        });
    for (auto& t : threads) t.join();
    if (first_error) std::rethrow_exception(first_error);
    return status[0];
#else
    throw ember::ArgumentError(
        "--devices with several devices reduces gradients through NCCL, and this build "
        "has no ember::nccl (nccl.h was not found when it was configured)");
#endif
}

}  // namespace

int train_on_gpus(const Options& o) {
    const auto device = ember_examples::backend_device_of(o.backend);
    if (device.kind() != ember::DispatchKind::Cuda)
        throw ember::ArgumentError(
            "--devices and --distributed train on CUDA devices: they need --backend cuda "
            "or cuda+fusion, got '" +
            o.backend + "'");
#if !defined(EMBER_NCCL)
    if (o.distributed)
        throw ember::ArgumentError(
            "--distributed reduces gradients through NCCL, and this build has no "
            "ember::nccl (nccl.h was not found when it was configured)");
#endif
    if (device.has_fusion()) return train_on<ember::Autodiff<ember::Fusion<ember::Cuda>>>(o);
    return train_on<ember::Autodiff<ember::Cuda>>(o);
}

}  // namespace gpt
