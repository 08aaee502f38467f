// NcclCollective: NCCL communicators over the CUDA backend's devices and streams. NCCL is loaded
// with dlopen on first use, so that ember::nccl links without libnccl and a missing library is
// an ember::DeviceError rather than a loader failure at start-up. Only nccl.h's types and
// function signatures are used at compile time.
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <ember/collective/nccl.hpp>
#include <ember/collective/rendezvous.hpp>

#include "../runtime.hpp"

namespace ember::collective {

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclCollective::Id),
              "NcclCollective::Id must hold an ncclUniqueId");

// The NCCL entry points, resolved once.
struct Api {
    decltype(&ncclGetUniqueId) get_unique_id = nullptr;
    decltype(&ncclCommInitRank) comm_init_rank = nullptr;
    decltype(&ncclCommDestroy) comm_destroy = nullptr;
    decltype(&ncclCommAbort) comm_abort = nullptr;
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclBroadcast) broadcast = nullptr;
    decltype(&ncclAllGather) all_gather = nullptr;
    decltype(&ncclReduceScatter) reduce_scatter = nullptr;
    decltype(&ncclGroupStart) group_start = nullptr;
    decltype(&ncclGroupEnd) group_end = nullptr;
    decltype(&ncclGetErrorString) error_string = nullptr;
    std::string error;  // why loading failed ("" when it worked)
};

const Api& api() {
    static const Api a = [] {
        Api a;
        const char* name = std::getenv("EMBER_NCCL_LIBRARY");
        if (name == nullptr || *name == '\0') name = "libnccl.so.2";
        void* lib = ::dlopen(name, RTLD_NOW | RTLD_GLOBAL);
        if (lib == nullptr) {
            const char* e = ::dlerror();
            a.error = std::string("cannot load ") + name + " (" + (e ? e : "unknown error") +
                      "); install NCCL or point EMBER_NCCL_LIBRARY at libnccl.so.2";
            return a;
        }
        auto load = [&](auto& fn, const char* sym) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, sym));
            if (fn == nullptr && a.error.empty())
                a.error =
                    std::string(name) + " has no symbol " + sym + " (NCCL 2.10 or later is needed)";
        };
        load(a.get_unique_id, "ncclGetUniqueId");
        load(a.comm_init_rank, "ncclCommInitRank");
        load(a.comm_destroy, "ncclCommDestroy");
        load(a.comm_abort, "ncclCommAbort");
        load(a.all_reduce, "ncclAllReduce");
        load(a.broadcast, "ncclBroadcast");
        load(a.all_gather, "ncclAllGather");
        load(a.reduce_scatter, "ncclReduceScatter");
        load(a.group_start, "ncclGroupStart");
        load(a.group_end, "ncclGroupEnd");
        load(a.error_string, "ncclGetErrorString");
        return a;
    }();
    EMBER_CHECK(a.error.empty(), Device, "NcclCollective: ", a.error);
    return a;
}

void check(ncclResult_t r, const char* call) {
    if (r == ncclSuccess) [[likely]]
        return;
    EMBER_FAIL(Device, "NCCL error in ", call, ": ", api().error_string(r), " (ncclResult_t ",
               int(r), ")");
}

#define EMBER_NCCL_CHECK(call) check((call), #call)

ncclDataType_t nccl_type(DType d, const char* op, bool reduce) {
    switch (d) {
        case DType::F32:
            return ncclFloat32;
        case DType::F64:
            return ncclFloat64;
        case DType::F16:
            return ncclFloat16;
        case DType::BF16:
            return ncclBfloat16;
        case DType::I64:
            return ncclInt64;
        case DType::I32:
            return ncclInt32;
        default:
            break;
    }
    // Bytes move unchanged: any dtype can be broadcast or gathered as uint8.
    EMBER_CHECK(!reduce, DType, "NcclCollective ", op, ": cannot reduce ", dtype_name(d),
                " tensors");
    return ncclUint8;
}

std::size_t nccl_count(const Buffer& b, bool reduce) {
    const bool as_bytes = !reduce && (b.dtype == DType::Bool || is_int(b.dtype)) &&
                          b.dtype != DType::I64 && b.dtype != DType::I32;
    return as_bytes ? b.bytes() : b.count();
}

ncclRedOp_t nccl_op(ReduceOp op) {
    return op == ReduceOp::Sum ? ncclSum : ncclAvg;
}

cudaStream_t stream_of(const CudaDevice& d) {
    return ember::detail::cuda::stream(static_cast<int>(d.index));
}

}  // namespace

namespace detail {
struct NcclComm {
    ncclComm_t comm = nullptr;
    bool aborted = false;
    // all_reduce_async's stream (made on first use) and the event that ends its last op: the
    // ops on the backend's stream wait for it, so that the communicator's ops stay in the
    // order they were issued, as NCCL requires.
    cudaStream_t side = nullptr;
    cudaEvent_t tail = nullptr;
    ~NcclComm() {
        if (comm != nullptr && !aborted) api().comm_destroy(comm);
        if (tail != nullptr) cudaEventDestroy(tail);
        if (side != nullptr) cudaStreamDestroy(side);
    }
};
}  // namespace detail

bool NcclCollective::is_available() {
    try {
        (void)api();
        return ember::cuda::is_available();
    } catch (const Error&) {
        return false;
    }
}

NcclCollective::Id NcclCollective::make_id() {
    ncclUniqueId id;
    EMBER_NCCL_CHECK(api().get_unique_id(&id));
    Id out;
    std::memcpy(out.data(), &id, sizeof id);
    return out;
}

NcclCollective::NcclCollective(std::unique_ptr<detail::NcclComm> comm, std::size_t rank,
                               std::size_t world, CudaDevice device)
    : comm_(std::move(comm)), rank_(rank), world_(world), device_(device) {}

NcclCollective::~NcclCollective() = default;

std::vector<std::unique_ptr<NcclCollective>> NcclCollective::init_local(
    const Id& id, std::size_t world_size, std::size_t first_rank,
    const std::vector<CudaDevice>& devices) {
    EMBER_CHECK(!devices.empty(), Argument, "NcclCollective::init: no device given");
    EMBER_CHECK(world_size >= 1, Argument,
                "NcclCollective::init: the world size must be at least 1, got 0");
    EMBER_CHECK(first_rank + devices.size() <= world_size, Argument, "NcclCollective::init: ranks ",
                first_rank, "..", first_rank + devices.size() - 1,
                " are out of range for a world of ", world_size);
    const Api& a = api();
    ncclUniqueId uid;
    std::memcpy(&uid, id.data(), sizeof uid);
    std::vector<std::unique_ptr<detail::NcclComm>> comms;
    for (std::size_t i = 0; i < devices.size(); ++i) {
        (void)stream_of(devices[i]);  // validates the device (DeviceError) before NCCL sees it
        comms.push_back(std::make_unique<detail::NcclComm>());
    }
    // Several ranks in one thread must be initialised inside one group, or the first call waits
    // for the others forever.
    EMBER_NCCL_CHECK(a.group_start());
    ncclResult_t first_error = ncclSuccess;
    for (std::size_t i = 0; i < devices.size(); ++i) {
        ember::detail::cuda::use_device(static_cast<int>(devices[i].index));
        const ncclResult_t r =
            a.comm_init_rank(&comms[i]->comm, int(world_size), uid, int(first_rank + i));
        if (r != ncclSuccess && first_error == ncclSuccess) first_error = r;
    }
    const ncclResult_t end = a.group_end();
    check(first_error, "ncclCommInitRank");
    check(end, "ncclGroupEnd (ncclCommInitRank)");
    std::vector<std::unique_ptr<NcclCollective>> out;
    for (std::size_t i = 0; i < devices.size(); ++i)
        out.push_back(std::unique_ptr<NcclCollective>(
            new NcclCollective(std::move(comms[i]), first_rank + i, world_size, devices[i])));
    return out;
}

std::unique_ptr<NcclCollective> NcclCollective::init(const Id& id, std::size_t world_size,
                                                     std::size_t rank, CudaDevice device) {
    EMBER_CHECK(rank < world_size, Argument, "NcclCollective::init: rank ", rank,
                " is out of range for a world of ", world_size);
    return std::move(init_local(id, world_size, rank, {device}).front());
}

std::vector<std::unique_ptr<NcclCollective>> NcclCollective::init_all(
    const std::vector<CudaDevice>& devices) {
    for (std::size_t i = 0; i < devices.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            EMBER_CHECK(!(devices[i] == devices[j]), Argument,
                        "NcclCollective::init_all: ", devices[i].to_string(),
                        " is listed twice (NCCL needs one rank per device)");
    return init_local(make_id(), devices.size(), 0, devices);
}

std::unique_ptr<NcclCollective> NcclCollective::from_env(CudaDevice device) {
    const ProcessGroupEnv env = ProcessGroupEnv::from_env();
    std::chrono::milliseconds timeout(300'000);
    if (const char* t = std::getenv("EMBER_RENDEZVOUS_TIMEOUT"); t && *t)
        timeout = std::chrono::milliseconds(static_cast<long long>(std::atof(t) * 1000));
    Id id{};
    if (const char* hex = std::getenv("EMBER_NCCL_ID"); hex && *hex) {
        const auto bytes = from_hex(hex, "EMBER_NCCL_ID");
        EMBER_CHECK(bytes.size() == id.size(), Format, "EMBER_NCCL_ID: ", bytes.size(),
                    " bytes, an ncclUniqueId has ", id.size());
        std::memcpy(id.data(), bytes.data(), id.size());
    } else if (const char* file = std::getenv("EMBER_NCCL_ID_FILE"); file && *file) {
        if (env.rank == 0) {
            id = make_id();
            write_rendezvous_file(file, id);
        } else {
            const auto bytes = wait_rendezvous_file(file, timeout);
            EMBER_CHECK(bytes.size() == id.size(), Format, "EMBER_NCCL_ID_FILE '", file,
                        "': ", bytes.size(), " bytes, an ncclUniqueId has ", id.size());
            std::memcpy(id.data(), bytes.data(), id.size());
        }
    } else {
        EMBER_CHECK(env.master_addr, Argument,
                    "NcclCollective::from_env: set EMBER_NCCL_ID, EMBER_NCCL_ID_FILE or "
                    "EMBER_MASTER_ADDR to share NCCL's id between the ranks");
        if (env.rank == 0) id = make_id();
        const auto bytes = tcp_rendezvous(id, env.rank, env.world_size, *env.master_addr, timeout);
        EMBER_CHECK(bytes.size() == id.size(), Format, "tcp_rendezvous: ", bytes.size(),
                    " bytes, an ncclUniqueId has ", id.size());
        std::memcpy(id.data(), bytes.data(), id.size());
    }
    return init(id, env.world_size, env.rank, device);
}

void NcclCollective::check_buffer(const char* op, const Buffer& b) const {
    EMBER_CHECK(b.memory == Memory::Cuda && b.device == int(device_.index), Device,
                "NcclCollective ", op, ": rank ", rank_, " runs on ", device_.to_string(),
                " but was given a tensor of shape ", b.shape.to_string(), " in ",
                b.memory == Memory::Cuda ? "Cuda(" + std::to_string(b.device) + ")" : "host",
                " memory");
}

void NcclCollective::after_async() const {
    // What all_reduce_async started comes first.
    if (comm_->tail == nullptr) return;
    ember::detail::cuda::use_device(static_cast<int>(device_.index));
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream_of(device_), comm_->tail, 0));
}

namespace {
// An all-reduce on the side stream; wait() orders the backend's stream after it.
struct NcclWork final : Work {
    cudaEvent_t done = nullptr;
    cudaStream_t stream = nullptr;
    int device = 0;
    void wait() override {
        if (done == nullptr) return;
        ember::detail::cuda::use_device(device);
        const cudaError_t e = cudaStreamWaitEvent(stream, done, 0);
        cudaEventDestroy(done);
        done = nullptr;
        EMBER_CUDA_CHECK(e);
    }
    // Unwaited: the buffer may be freed on the backend's stream, which must not overtake NCCL.
    ~NcclWork() override {
        if (done == nullptr) return;
        ember::detail::cuda::use_device(device);
        cudaStreamWaitEvent(stream, done, 0);
        cudaEventDestroy(done);
    }
};
}  // namespace

std::unique_ptr<Work> NcclCollective::all_reduce_async(const Buffer& buffer, ReduceOp op) {
    check_buffer("all_reduce", buffer);
    const int dev = static_cast<int>(device_.index);
    ember::detail::cuda::use_device(dev);
    const cudaStream_t main = stream_of(device_);
    if (comm_->side == nullptr) {
        // The highest priority: the reduction's few blocks get scheduled among backward's.
        int lo = 0, hi = 0;
        EMBER_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
        EMBER_CUDA_CHECK(cudaStreamCreateWithPriority(&comm_->side, cudaStreamNonBlocking, hi));
        EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&comm_->tail, cudaEventDisableTiming));
    }
    // The side stream starts where the backend's stream is (the buffer is written there).
    cudaEvent_t ready = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    const cudaError_t recorded = cudaEventRecord(ready, main);
    const cudaError_t waited =
        recorded == cudaSuccess ? cudaStreamWaitEvent(comm_->side, ready, 0) : recorded;
    cudaEventDestroy(ready);
    EMBER_CUDA_CHECK(waited);
    EMBER_NCCL_CHECK(api().all_reduce(buffer.data, buffer.data, buffer.count(),
                                      nccl_type(buffer.dtype, "all_reduce", true), nccl_op(op),
                                      comm_->comm, comm_->side));
    auto work = std::make_unique<NcclWork>();
    work->stream = main;
    work->device = dev;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&work->done, cudaEventDisableTiming));
    EMBER_CUDA_CHECK(cudaEventRecord(work->done, comm_->side));
    EMBER_CUDA_CHECK(cudaEventRecord(comm_->tail, comm_->side));
    return work;
}

void NcclCollective::all_reduce(const Buffer& buffer, ReduceOp op) {
    check_buffer("all_reduce", buffer);
    after_async();
    EMBER_NCCL_CHECK(api().all_reduce(buffer.data, buffer.data, buffer.count(),
                                      nccl_type(buffer.dtype, "all_reduce", true), nccl_op(op),
                                      comm_->comm, stream_of(device_)));
}

void NcclCollective::broadcast(const Buffer& buffer, std::size_t root) {
    check_buffer("broadcast", buffer);
    after_async();
    EMBER_CHECK(root < world_, Argument, "NcclCollective broadcast: root ", root,
                " is out of range for a group of ", world_, " ranks");
    EMBER_NCCL_CHECK(api().broadcast(buffer.data, buffer.data, nccl_count(buffer, false),
                                     nccl_type(buffer.dtype, "broadcast", false), int(root),
                                     comm_->comm, stream_of(device_)));
}

void NcclCollective::all_gather(const Buffer& input, const Buffer& output) {
    check_buffer("all_gather", input);
    check_buffer("all_gather", output);
    after_async();
    EMBER_CHECK(output.count() == input.count() * world_ && output.dtype == input.dtype, Shape,
                "NcclCollective all_gather: an input of shape ", input.shape.to_string(),
                " needs an output of ", input.count() * world_, " elements, got ",
                output.shape.to_string());
    EMBER_NCCL_CHECK(api().all_gather(input.data, output.data, nccl_count(input, false),
                                      nccl_type(input.dtype, "all_gather", false), comm_->comm,
                                      stream_of(device_)));
}

void NcclCollective::reduce_scatter(const Buffer& input, const Buffer& output, ReduceOp op) {
    check_buffer("reduce_scatter", input);
    check_buffer("reduce_scatter", output);
    after_async();
    EMBER_CHECK(input.count() % world_ == 0 && output.count() * world_ == input.count() &&
                    output.dtype == input.dtype,
                Shape, "NcclCollective reduce_scatter: an input of shape ", input.shape.to_string(),
                " does not split into ", world_, " outputs of shape ", output.shape.to_string());
    EMBER_NCCL_CHECK(api().reduce_scatter(input.data, output.data, output.count(),
                                          nccl_type(input.dtype, "reduce_scatter", true),
                                          nccl_op(op), comm_->comm, stream_of(device_)));
}

void NcclCollective::barrier() {
    after_async();
    const int dev = static_cast<int>(device_.index);
    ember::detail::cuda::use_device(dev);  // the memset runs on this device's stream
    auto storage = ember::detail::cuda::allocate(sizeof(float), dev);
    EMBER_CUDA_CHECK(cudaMemsetAsync(storage->data, 0, sizeof(float), stream_of(device_)));
    EMBER_NCCL_CHECK(api().all_reduce(storage->data, storage->data, 1, ncclFloat32, ncclSum,
                                      comm_->comm, stream_of(device_)));
    ember::detail::cuda::synchronize(dev);
}

void NcclCollective::abort(const std::string&) {
    if (comm_->aborted) return;
    comm_->aborted = true;
    (void)api().comm_abort(comm_->comm);
}

}  // namespace ember::collective
