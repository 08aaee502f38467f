// Convolutions through cuDNN 9's convolution API. cuDNN is loaded with dlopen on first use
// (libcudnn.so.9, a small library that loads its sub-libraries and exports the whole API), so
// that ember::cuda builds and runs without it: where it is absent, switched off (EMBER_CUDNN=0,
// ember::cuda::set_use_cudnn) or refuses a configuration, conv.cpp runs its im2col kernels.
// Only cudnn.h's types and signatures are used at compile time; without cudnn.h the functions
// below report cuDNN as absent.
//
// A configuration (direction, dtype, layout, shapes, stride, padding, dilation, groups, TF32
// setting)
// gets one Plan per device: its descriptors and the algorithm cudnnFind*AlgorithmEx measured
// fastest, found at its first run outside a CUDA-graph capture and reused afterwards. A capture
// cannot measure (Find waits for the device): a configuration first met inside a capture runs
// the algorithm cuDNN's heuristics (cudnnGet*Algorithm_v7) rank first, and is measured at its
// next eager run. Workspaces come from the backend's caching pool (a capture's private pool
// inside a capture), on the device's stream.
#include "cudnn.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ember/backend/cudnn.hpp"
#include "graph.hpp"

#if __has_include(<cudnn.h>)
#include <cudnn.h>

#include "cudnn_engines.hpp"
#define EMBER_HAVE_CUDNN_H 1
#else
#define EMBER_HAVE_CUDNN_H 0
#endif

namespace ember::detail::cuda::cudnn {

namespace {

std::atomic<int> g_use{-1};  // -1: EMBER_CUDNN not read yet
std::atomic<std::uint64_t> g_runs{0};

bool use_setting() {
    int u = g_use.load(std::memory_order_relaxed);
    if (u >= 0) [[likely]]
        return u == 1;
    const char* e = std::getenv("EMBER_CUDNN");
    const std::string_view v = e != nullptr ? e : "";
    const int want = (v == "0" || v == "off" || v == "false") ? 0 : 1;
    int expected = -1;
    g_use.compare_exchange_strong(expected, want);  // a set_use_cudnn() meanwhile wins
    return g_use.load() == 1;
}

#if EMBER_HAVE_CUDNN_H

// The cuDNN entry points, resolved once.
struct Api {
    std::string error;  // why cuDNN cannot be used ("" when it can)
    std::size_t version = 0;
    decltype(&cudnnGetVersion) get_version = nullptr;
    decltype(&cudnnGetErrorString) error_string = nullptr;
    decltype(&cudnnCreate) create = nullptr;
    decltype(&cudnnSetStream) set_stream = nullptr;
    decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
    decltype(&cudnnSetTensorNdDescriptor) set_tensor = nullptr;
    decltype(&cudnnCreateFilterDescriptor) create_filter = nullptr;
    decltype(&cudnnSetFilterNdDescriptor) set_filter = nullptr;
    decltype(&cudnnCreateConvolutionDescriptor) create_conv = nullptr;
    decltype(&cudnnSetConvolutionNdDescriptor) set_conv = nullptr;
    decltype(&cudnnSetConvolutionGroupCount) set_groups = nullptr;
    decltype(&cudnnSetConvolutionMathType) set_math = nullptr;
    decltype(&cudnnFindConvolutionForwardAlgorithmEx) fwd_find = nullptr;
    decltype(&cudnnGetConvolutionForwardAlgorithm_v7) fwd_heuristic = nullptr;
    decltype(&cudnnGetConvolutionForwardWorkspaceSize) fwd_workspace = nullptr;
    decltype(&cudnnConvolutionForward) fwd_run = nullptr;
    decltype(&cudnnFindConvolutionBackwardDataAlgorithmEx) data_find = nullptr;
    decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) data_heuristic = nullptr;
    decltype(&cudnnGetConvolutionBackwardDataWorkspaceSize) data_workspace = nullptr;
    decltype(&cudnnConvolutionBackwardData) data_run = nullptr;
    decltype(&cudnnFindConvolutionBackwardFilterAlgorithmEx) filter_find = nullptr;
    decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) filter_heuristic = nullptr;
    decltype(&cudnnGetConvolutionBackwardFilterWorkspaceSize) filter_workspace = nullptr;
    decltype(&cudnnConvolutionBackwardFilter) filter_run = nullptr;
    engines::Functions graph;  // the graph API (optional: unused where incomplete)
};

const Api& api() {
    static const Api a = [] {
        Api a;
        const char* name = std::getenv("EMBER_CUDNN_LIBRARY");
        if (name == nullptr || *name == '\0') name = "libcudnn.so.9";
        void* lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            const char* e = ::dlerror();
            a.error = std::string("cannot load ") + name + " (" + (e ? e : "unknown error") +
                      "); install cuDNN 9 or point EMBER_CUDNN_LIBRARY at libcudnn.so.9";
            return a;
        }
        auto load = [&](auto& fn, const char* sym) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, sym));
            if (fn == nullptr && a.error.empty())
                a.error = std::string(name) + " has no symbol " + sym + " (cuDNN 9 is needed)";
        };
        load(a.get_version, "cudnnGetVersion");
        load(a.error_string, "cudnnGetErrorString");
        load(a.create, "cudnnCreate");
        load(a.set_stream, "cudnnSetStream");
        load(a.create_tensor, "cudnnCreateTensorDescriptor");
        load(a.set_tensor, "cudnnSetTensorNdDescriptor");
        load(a.create_filter, "cudnnCreateFilterDescriptor");
        load(a.set_filter, "cudnnSetFilterNdDescriptor");
        load(a.create_conv, "cudnnCreateConvolutionDescriptor");
        load(a.set_conv, "cudnnSetConvolutionNdDescriptor");
        load(a.set_groups, "cudnnSetConvolutionGroupCount");
        load(a.set_math, "cudnnSetConvolutionMathType");
        load(a.fwd_find, "cudnnFindConvolutionForwardAlgorithmEx");
        load(a.fwd_heuristic, "cudnnGetConvolutionForwardAlgorithm_v7");
        load(a.fwd_workspace, "cudnnGetConvolutionForwardWorkspaceSize");
        load(a.fwd_run, "cudnnConvolutionForward");
        load(a.data_find, "cudnnFindConvolutionBackwardDataAlgorithmEx");
        load(a.data_heuristic, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
        load(a.data_workspace, "cudnnGetConvolutionBackwardDataWorkspaceSize");
        load(a.data_run, "cudnnConvolutionBackwardData");
        load(a.filter_find, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
        load(a.filter_heuristic, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
        load(a.filter_workspace, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
        load(a.filter_run, "cudnnConvolutionBackwardFilter");
        if (!a.error.empty()) return a;
        auto optional = [&](auto& fn, const char* sym) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, sym));
        };
        optional(a.graph.create, "cudnnBackendCreateDescriptor");
        optional(a.graph.destroy, "cudnnBackendDestroyDescriptor");
        optional(a.graph.set, "cudnnBackendSetAttribute");
        optional(a.graph.get, "cudnnBackendGetAttribute");
        optional(a.graph.finalize, "cudnnBackendFinalize");
        optional(a.graph.execute, "cudnnBackendExecute");
        a.version = a.get_version();
        // The convolution API's types and signatures are those of cudnn.h 9.x: another major
        // version may differ.
        if (a.version / 10000 != 9)
            a.error = std::string(name) + " is cuDNN version " + std::to_string(a.version) +
                      "; ember needs cuDNN 9";
        return a;
    }();
    return a;
}

/// cuDNN's status classes (cuDNN 9 numbers each class in its own thousand): a bad parameter
/// or an unsupported configuration means "run the im2col kernels instead".
bool refusal(cudnnStatus_t s) {
    const int c = static_cast<int>(s) / 1000;
    return c == 2 || c == 3;
}

[[noreturn]] void fail(cudnnStatus_t s, const char* call) {
    EMBER_FAIL(Device, "cuDNN error in ", call, ": ", api().error_string(s), " (cudnnStatus_t ",
               static_cast<int>(s), ")");
}

/// Why cudnnCreate failed on a device ("" while it has not), for cudnn_unavailable_reason.
std::mutex g_handle_error_mu;
std::string g_handle_error;

enum class Kind { Forward, Data, Filter };

/// One configuration's descriptors and algorithm. The forward convolution's input is x, its
/// output y, whatever the direction.
struct Plan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnMathType_t requested = CUDNN_DEFAULT_MATH;  ///< the math the dtype and TF32 allow
    bool refused = false;  ///< cuDNN refused it: the im2col kernels run it from now on
    bool tuned = false;    ///< algo was measured by cudnnFind (not a heuristic's pick)
    bool chosen = false;   ///< algo, math and workspace hold a choice
    int algo = 0;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    std::size_t workspace = 0;
    /// The configuration for the graph API (f16, bf16 and f32: f32 engines use tensor cores
    /// only where TF32 is allowed), and the engine that beat the legacy algorithm, if one did
    /// (the legacy choice stays for operands too little aligned for the engine).
    bool graph_eligible = false;
    engines::Problem problem;
    std::unique_ptr<engines::Engine> engine;
    int engine_rank = -1;  ///< the engine's rank among the heuristics' results (-1: none)
};

/// A device's handle (bound to the device's stream) and plans; `mu` serialises their use (a
/// cuDNN handle is not to be used by two threads at once).
struct DeviceCtx {
    std::mutex mu;
    cudnnHandle_t handle = nullptr;
    bool handle_failed = false;
    std::map<std::vector<long long>, std::unique_ptr<Plan>> plans;
};

// Handles and descriptors live as long as the process: destroying them from static
// destructors could run after the CUDA runtime has been torn down.
DeviceCtx& device_ctx(int device) {
    static std::mutex mu;
    static std::map<int, std::unique_ptr<DeviceCtx>> ctxs;
    std::lock_guard lock(mu);
    auto& c = ctxs[device];
    if (!c) c = std::make_unique<DeviceCtx>();
    return *c;
}

bool cudnn_types(DType d, cudnnDataType_t* data, cudnnDataType_t* compute) {
    switch (d) {
        case DType::F32:
            *data = *compute = CUDNN_DATA_FLOAT;
            return true;
        case DType::F64:
            *data = *compute = CUDNN_DATA_DOUBLE;
            return true;
        case DType::F16:
            *data = CUDNN_DATA_HALF;
            *compute = CUDNN_DATA_FLOAT;
            return true;
        case DType::BF16:
            *data = CUDNN_DATA_BFLOAT16;
            *compute = CUDNN_DATA_FLOAT;
            return true;
        default:
            return false;
    }
}

/// Whether y is what convolving x with w under p gives (cuDNN checks it too, but this keeps
/// shapes it would misread, such as a transposed convolution's large output padding, out).
bool consistent(const Shape& xs, const Shape& ws, const Shape& ys, const ConvParams& p) {
    const std::size_t r = p.n + 2;
    if (xs.rank() != r || ws.rank() != r || ys.rank() != r || p.groups == 0) return false;
    if (xs.num_elements() == 0 || ws.num_elements() == 0 || ys.num_elements() == 0) return false;
    if (xs[0] != ys[0] || ws[0] != ys[1] || ws[1] * p.groups != xs[1] || ws[0] % p.groups != 0)
        return false;
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t span = p.dilation[d] * (ws[2 + d] - 1) + 1,
                          in = xs[2 + d] + 2 * p.padding[d];
        if (p.stride[d] == 0 || in < span || (in - span) / p.stride[d] + 1 != ys[2 + d])
            return false;
    }
    return true;
}

/// cuDNN wants 4-d tensors or more: a 1-d convolution runs as a 2-d one over a height of 1.
/// The strides are contiguous ones, or channels-last ones (2-d convolutions only). Returns false
/// for sizes an int cannot hold (cuDNN's descriptors take ints).
bool dims_of(const Shape& s, std::size_t n, bool channels_last, std::vector<int>* dims,
             std::vector<int>* strides) {
    dims->clear();
    for (std::size_t d = 0; d < s.rank(); ++d) {
        if (s[d] > static_cast<std::size_t>(INT_MAX)) return false;
        if (n == 1 && d == 2) dims->push_back(1);
        dims->push_back(static_cast<int>(s[d]));
    }
    if (s.num_elements() > static_cast<std::size_t>(INT_MAX)) return false;
    const Strides st = channels_last ? channels_last_strides(s) : contiguous_strides(s);
    strides->assign(dims->size(), 1);
    for (std::size_t d = 0, j = 0; d < s.rank(); ++d, ++j) {
        if (n == 1 && d == 2) {  // the unit height: the stride of the length's dim times its size
            (*strides)[j] = static_cast<int>(st[2] * static_cast<std::int64_t>(s[2]));
            ++j;
        }
        (*strides)[j] = static_cast<int>(st[d]);
    }
    return true;
}

/// Creates the plan's descriptors; false when cuDNN refuses them.
bool describe(const Api& a, Plan& pl, DType dt, bool channels_last, const Shape& xs,
              const Shape& ws, const Shape& ys, const ConvParams& p) {
    cudnnDataType_t data, compute;
    if (!cudnn_types(dt, &data, &compute)) return false;
    std::vector<int> xd, xst, wd, wst, yd, yst;
    if (!dims_of(xs, p.n, channels_last, &xd, &xst) ||
        !dims_of(ws, p.n, channels_last, &wd, &wst) ||
        !dims_of(ys, p.n, channels_last, &yd, &yst))
        return false;
    std::vector<int> pad, stride, dil;
    if (p.n == 1) {  // the unit height
        pad.push_back(0);
        stride.push_back(1);
        dil.push_back(1);
    }
    for (std::size_t d = 0; d < p.n; ++d) {
        if (p.padding[d] > INT_MAX || p.stride[d] > INT_MAX || p.dilation[d] > INT_MAX)
            return false;
        pad.push_back(static_cast<int>(p.padding[d]));
        stride.push_back(static_cast<int>(p.stride[d]));
        dil.push_back(static_cast<int>(p.dilation[d]));
    }
    const int nd = static_cast<int>(xd.size());
    auto ok = [](cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; };
    if (!ok(a.create_tensor(&pl.x)) || !ok(a.create_tensor(&pl.y)) || !ok(a.create_filter(&pl.w)) ||
        !ok(a.create_conv(&pl.conv)))
        return false;
    if (!ok(a.set_tensor(pl.x, data, nd, xd.data(), xst.data())) ||
        !ok(a.set_tensor(pl.y, data, nd, yd.data(), yst.data())) ||
        !ok(a.set_filter(pl.w, data, channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, nd,
                         wd.data())) ||
        !ok(a.set_conv(pl.conv, nd - 2, pad.data(), stride.data(), dil.data(),
                       CUDNN_CROSS_CORRELATION, compute)) ||
        !ok(a.set_groups(pl.conv, static_cast<int>(p.groups))))
        return false;
    pl.graph_eligible = dt == DType::F16 || dt == DType::BF16 || dt == DType::F32;
    pl.problem.tensor_cores = dt != DType::F32 || tf32_allowed();
    auto wide = [](const std::vector<int>& v) {
        return std::vector<std::int64_t>(v.begin(), v.end());
    };
    pl.problem.data = data;
    pl.problem.compute = compute;
    pl.problem.x_dims = wide(xd);
    pl.problem.x_strides = wide(xst);
    pl.problem.w_dims = wide(wd);
    // The filter's strides: KRSC for channels-last, KCRS otherwise (the legacy API's formats).
    pl.problem.w_strides = wide(wst);
    pl.problem.y_dims = wide(yd);
    pl.problem.y_strides = wide(yst);
    pl.problem.padding = wide(pad);
    pl.problem.stride = wide(stride);
    pl.problem.dilation = wide(dil);
    // f32 stays f32 unless TF32 is allowed (CUDNN_FMA_MATH rules tensor cores out; the default
    // lets TF32 in, as ember::cuda::set_allow_tf32 does for matmuls); f16/bf16 use tensor cores.
    if (dt == DType::F32)
        pl.requested = tf32_allowed() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    else if (dt == DType::F64)
        pl.requested = CUDNN_DEFAULT_MATH;
    else
        pl.requested = CUDNN_TENSOR_OP_MATH;
    return ok(a.set_math(pl.conv, pl.requested));
}

/// The operands of one run: for Forward (x, w → y), Data (dy, w → dx), Filter (x, dy → dw).
struct Operands {
    const void* a;
    const void* b;
    void* out;
};

/// Each direction's cuDNN calls, in one shape.
template <Kind K>
struct Calls;

template <>
struct Calls<Kind::Forward> {
    using Perf = cudnnConvolutionFwdAlgoPerf_t;
    using Algo = cudnnConvolutionFwdAlgo_t;
    static constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    static cudnnStatus_t find(const Api& a, cudnnHandle_t h, const Plan& p, const Operands& o,
                              int* got, Perf* r, void* ws, std::size_t bytes) {
        return a.fwd_find(h, p.x, o.a, p.w, o.b, p.conv, p.y, o.out, kCount, got, r, ws, bytes);
    }
    static cudnnStatus_t heuristic(const Api& a, cudnnHandle_t h, const Plan& p, int* got,
                                   Perf* r) {
        return a.fwd_heuristic(h, p.x, p.w, p.conv, p.y, kCount, got, r);
    }
    static cudnnStatus_t workspace(const Api& a, cudnnHandle_t h, const Plan& p, int algo,
                                   std::size_t* bytes) {
        return a.fwd_workspace(h, p.x, p.w, p.conv, p.y, static_cast<Algo>(algo), bytes);
    }
    static cudnnStatus_t run(const Api& a, cudnnHandle_t h, const Plan& p, const Operands& o,
                             const void* one, const void* zero, void* ws) {
        return a.fwd_run(h, one, p.x, o.a, p.w, o.b, p.conv, static_cast<Algo>(p.algo), ws,
                         p.workspace, zero, p.y, o.out);
    }
    static constexpr const char* kRun = "cudnnConvolutionForward";
};

template <>
struct Calls<Kind::Data> {
    using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
    using Algo = cudnnConvolutionBwdDataAlgo_t;
    static constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    static cudnnStatus_t find(const Api& a, cudnnHandle_t h, const Plan& p, const Operands& o,
                              int* got, Perf* r, void* ws, std::size_t bytes) {
        return a.data_find(h, p.w, o.b, p.y, o.a, p.conv, p.x, o.out, kCount, got, r, ws, bytes);
    }
    static cudnnStatus_t heuristic(const Api& a, cudnnHandle_t h, const Plan& p, int* got,
                                   Perf* r) {
        return a.data_heuristic(h, p.w, p.y, p.conv, p.x, kCount, got, r);
    }
    static cudnnStatus_t workspace(const Api& a, cudnnHandle_t h, const Plan& p, int algo,
                                   std::size_t* bytes) {
        return a.data_workspace(h, p.w, p.y, p.conv, p.x, static_cast<Algo>(algo), bytes);
    }
    static cudnnStatus_t run(const Api& a, cudnnHandle_t h, const Plan& p, const Operands& o,
                             const void* one, const void* zero, void* ws) {
        return a.data_run(h, one, p.w, o.b, p.y, o.a, p.conv, static_cast<Algo>(p.algo), ws,
                          p.workspace, zero, p.x, o.out);
    }
    static constexpr const char* kRun = "cudnnConvolutionBackwardData";
};

template <>
struct Calls<Kind::Filter> {
    using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
    using Algo = cudnnConvolutionBwdFilterAlgo_t;
    static constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    static cudnnStatus_t find(const Api& a, cudnnHandle_t h, const Plan& p, const Operands& o,
                              int* got, Perf* r, void* ws, std::size_t bytes) {
        return a.filter_find(h, p.x, o.a, p.y, o.b, p.conv, p.w, o.out, kCount, got, r, ws, bytes);
    }
    static cudnnStatus_t heuristic(const Api& a, cudnnHandle_t h, const Plan& p, int* got,
                                   Perf* r) {
        return a.filter_heuristic(h, p.x, p.y, p.conv, p.w, kCount, got, r);
    }
    static cudnnStatus_t workspace(const Api& a, cudnnHandle_t h, const Plan& p, int algo,
                                   std::size_t* bytes) {
        return a.filter_workspace(h, p.x, p.y, p.conv, p.w, static_cast<Algo>(algo), bytes);
    }
    static cudnnStatus_t run(const Api& a, cudnnHandle_t h, const Plan& p, const Operands& o,
                             const void* one, const void* zero, void* ws) {
        return a.filter_run(h, one, p.x, o.a, p.y, o.b, p.conv, static_cast<Algo>(p.algo), ws,
                            p.workspace, zero, p.w, o.out);
    }
    static constexpr const char* kRun = "cudnnConvolutionBackwardFilter";
};

/// The most workspace a convolution may take: algorithms that want more are passed over.
/// EMBER_CUDNN_WORKSPACE_MIB sets it (read once). The default, 1 GiB, admits the FFT
/// algorithms of large f32 batches: the guide CNN's data gradient at batch 4096 takes between
/// 256 MiB and 1 GiB, and its step fell from 4.67 to 3.79 ms on an H200 with it (2026-11-30).
std::size_t max_workspace() {
    static const std::size_t bytes = [] {
        const char* v = std::getenv("EMBER_CUDNN_WORKSPACE_MIB");
        const long long mib = v != nullptr ? std::atoll(v) : 0;
        return static_cast<std::size_t>(mib > 0 ? mib : 1024) << 20;
    }();
    return bytes;
}

/// Takes the first usable result (cuDNN orders them fastest first): measured or ranked without
/// error, within `limit` bytes of workspace, and without tensor-core math that would round an
/// f32/f64 operand to a narrower type.
template <Kind K>
bool choose(const Api& a, cudnnHandle_t h, Plan& pl, DType dt, const typename Calls<K>::Perf* r,
            int got, std::size_t limit) {
    for (int i = 0; i < got; ++i) {
        if (r[i].status != CUDNN_STATUS_SUCCESS || r[i].memory > limit) continue;
        cudnnMathType_t m = r[i].mathType;
        if (dt == DType::F32 || dt == DType::F64) {
            if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
            if (pl.requested == CUDNN_FMA_MATH) {
                if (m == CUDNN_TENSOR_OP_MATH) continue;
                m = CUDNN_FMA_MATH;  // keep TF32 out whatever the result calls its math
            }
        }
        if (a.set_math(pl.conv, m) != CUDNN_STATUS_SUCCESS) continue;
        std::size_t bytes = 0;
        if (Calls<K>::workspace(a, h, pl, static_cast<int>(r[i].algo), &bytes) !=
                CUDNN_STATUS_SUCCESS ||
            bytes > limit)
            continue;
        pl.algo = static_cast<int>(r[i].algo);
        pl.math = m;
        pl.workspace = std::max(bytes, static_cast<std::size_t>(r[i].memory));
        pl.chosen = true;
        return true;
    }
    (void)a.set_math(pl.conv, pl.requested);
    return false;
}

/// A workspace of `bytes` from the caching pool (an empty tensor for 0).
CudaTensor workspace_tensor(std::size_t bytes, int device) {
    return empty(Shape{bytes}, DType::U8, device);
}

/// EMBER_CUDNN_PLANS=<file>: every algorithm cudnnFind picks is appended to the file (one line
/// a configuration: its key, algorithm, math type and workspace), and a configuration the file
/// already holds takes that pick without measuring. A run under a kernel profiler, whose cost
/// per launch skews Find's timings towards single-kernel algorithms, so replays what a normal
/// run of the same program chose.
struct PlanFile {
    std::mutex mu;
    bool loaded = false;
    std::string path;
    std::map<std::vector<long long>, std::array<long long, 4>> picks;
};

PlanFile& plan_file() {
    static PlanFile f;
    std::lock_guard lock(f.mu);
    if (!f.loaded) {
        f.loaded = true;
        if (const char* e = std::getenv("EMBER_CUDNN_PLANS"); e && *e) f.path = e;
        if (!f.path.empty()) {
            std::ifstream in(f.path);
            std::string line;
            while (std::getline(in, line)) {
                std::istringstream ls(line);
                std::size_t n = 0;
                if (!(ls >> n) || n > 64) continue;
                std::vector<long long> key(n);
                std::array<long long, 4> pick{};
                for (auto& k : key) ls >> k;
                for (auto& v : pick) ls >> v;
                if (ls) f.picks[key] = pick;
            }
        }
    }
    return f;
}

/// Takes the file's pick for `key`, if it holds one that cuDNN still accepts.
bool recorded(const Api& a, cudnnHandle_t h, Plan& pl, const std::vector<long long>& key,
              int direction) {
    std::array<long long, 4> pick{};
    {
        PlanFile& f = plan_file();
        std::lock_guard lock(f.mu);
        const auto it = f.picks.find(key);
        if (it == f.picks.end()) return false;
        pick = it->second;
    }
    const auto m = static_cast<cudnnMathType_t>(pick[1]);
    if (a.set_math(pl.conv, m) != CUDNN_STATUS_SUCCESS) return false;
    pl.algo = static_cast<int>(pick[0]);
    pl.math = m;
    pl.workspace = static_cast<std::size_t>(pick[2]);
    pl.chosen = pl.tuned = true;
    if (pick[3] >= 0 && pl.graph_eligible && a.graph.complete()) {
        pl.problem.direction = direction;
        pl.engine = engines::at_rank(a.graph, h, pl.problem, static_cast<int>(pick[3]));
        pl.engine_rank = pl.engine ? static_cast<int>(pick[3]) : -1;
    }
    return true;
}

/// Appends a measured pick to the file (when EMBER_CUDNN_PLANS names one).
void record(const Plan& pl, const std::vector<long long>& key) {
    PlanFile& f = plan_file();
    std::lock_guard lock(f.mu);
    if (f.path.empty()) return;
    std::ofstream out(f.path, std::ios::app);
    out << key.size();
    for (long long k : key) out << ' ' << k;
    out << ' ' << pl.algo << ' ' << static_cast<long long>(pl.math) << ' ' << pl.workspace << ' '
        << pl.engine_rank << '\n';
    f.picks[key] = {pl.algo, static_cast<long long>(pl.math), static_cast<long long>(pl.workspace),
                    pl.engine_rank};
}

constexpr int direction_of(Kind k) {
    return k == Kind::Forward ? 0 : k == Kind::Data ? 1 : 2;
}

/// A run's operands as the forward convolution's x, w and y (the graph API's tensors).
template <Kind K>
std::array<void*, 3> xwy(const Operands& o) {
    void* a = const_cast<void*>(o.a);
    void* b = const_cast<void*>(o.b);
    if constexpr (K == Kind::Forward) return {a, b, o.out};
    if constexpr (K == Kind::Data) return {o.out, b, a};  // a = dy, out = dx
    return {a, o.out, b};                                 // Filter: a = x, b = dy, out = dw
}

/// Milliseconds a run of `run` takes on `st` (the mean of three after one untimed run); a
/// very large figure where it fails.
template <typename F>
float time_runs(cudaStream_t st, F&& run) {
    constexpr float kFailed = 1e30f;
    if (!run()) return kFailed;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    if (cudaEventCreate(&e0) != cudaSuccess) return kFailed;
    if (cudaEventCreate(&e1) != cudaSuccess) {
        cudaEventDestroy(e0);
        return kFailed;
    }
    bool ran = cudaEventRecord(e0, st) == cudaSuccess;
    for (int i = 0; i < 3 && ran; ++i) ran = run();
    float ms = kFailed;
    if (ran && cudaEventRecord(e1, st) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
        cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess)
        ms /= 3;
    else
        ms = kFailed;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms;
}

/// Whether a pointer meets the graph API tensors' promised 16-byte alignment.
bool aligned(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

/// EMBER_CUDNN_ENGINES: unset, the race below; `0`, the legacy algorithm only; `all`, the
/// fastest engine whether or not it beats the legacy algorithm (to test the engines' path).
/// Read at each race: a race happens once per configuration.
int engines_setting() {
    const char* e = std::getenv("EMBER_CUDNN_ENGINES");
    const std::string_view v = e != nullptr ? e : "";
    return v == "0" ? 0 : v == "all" ? 2 : 1;
}

/// Lets the graph API's engines race the legacy algorithm just chosen, on the operands: the
/// heuristics' top configurations (8 at most that build, compute as the problem asks: see
/// cudnn_engines.hpp, and fit the workspace cap) and the legacy choice are each timed, and
/// the fastest kept. The legacy API picks among a handful of algorithm numbers and lets cuDNN
/// choose the kernel inside; on an H200 an engine beat that choice for every convolution of a
/// bf16 ResNet-18 at batch 256 (forward, data and filter: the step 3.90 → 3.63 ms).
template <Kind K>
void race(const Api& a, cudnnHandle_t h, Plan& pl, const Operands& o, int device) {
    const int setting = engines_setting();
    if (setting == 0 || !pl.graph_eligible || !a.graph.complete()) return;
    const auto ptrs = xwy<K>(o);
    for (void* q : ptrs)
        if (!aligned(q)) return;
    pl.problem.direction = direction_of(K);
    auto cands =
        engines::candidates(a.graph, h, pl.problem, static_cast<std::int64_t>(max_workspace()), 8);
    if (cands.empty()) return;
    std::int64_t most = static_cast<std::int64_t>(pl.workspace);
    for (const auto& c : cands) most = std::max(most, c.second->workspace());
    CudaTensor ws;
    try {
        ws = workspace_tensor(static_cast<std::size_t>(most), device);
    } catch (const DeviceError&) {
        return;
    }
    const cudaStream_t st = stream(device);
    const float one = 1.0f, zero = 0.0f;
    float best = setting == 2 ? 1e38f : time_runs(st, [&] {
        return Calls<K>::run(a, h, pl, o, &one, &zero, pl.workspace ? ws.ptr() : nullptr) ==
               CUDNN_STATUS_SUCCESS;
    });
    int pick = -1;
    for (std::size_t i = 0; i < cands.size(); ++i) {
        const float t = time_runs(st, [&] {
            return cands[i].second->run(h, ptrs.data(), most ? ws.ptr() : nullptr) ==
                   CUDNN_STATUS_SUCCESS;
        });
        if (t < best) {
            best = t;
            pick = static_cast<int>(i);
        }
    }
    if (pick < 0) return;
    pl.engine_rank = cands[static_cast<std::size_t>(pick)].first;
    pl.engine = std::move(cands[static_cast<std::size_t>(pick)].second);
}

/// Measures the algorithms (cudnnFind, outside a capture) or asks the heuristics (inside one);
/// false when no algorithm is usable.
template <Kind K>
bool tune(const Api& a, cudnnHandle_t h, Plan& pl, DType dt, const Operands& o, int device,
          const std::vector<long long>& key) {
    using C = Calls<K>;
    typename C::Perf r[C::kCount];
    int got = 0;
    if (recorded(a, h, pl, key, direction_of(K))) return true;
    if (a.set_math(pl.conv, pl.requested) != CUDNN_STATUS_SUCCESS) return false;
    if (capturing(device) != nullptr) {
        if (C::heuristic(a, h, pl, &got, r) != CUDNN_STATUS_SUCCESS) return false;
        return choose<K>(a, h, pl, dt, r, got, max_workspace());
    }
    // Find gets as much workspace as the hungriest algorithm wants, within the cap (less if
    // the device has less free).
    std::size_t want = 0;
    for (int algo = 0; algo < C::kCount; ++algo) {
        std::size_t bytes = 0;
        if (C::workspace(a, h, pl, algo, &bytes) == CUDNN_STATUS_SUCCESS &&
            bytes <= max_workspace())
            want = std::max(want, bytes);
    }
    CudaTensor ws;
    try {
        ws = workspace_tensor(want, device);
    } catch (const DeviceError&) {
        want = 0;  // out of memory: measure the algorithms that need none
        ws = workspace_tensor(0, device);
    }
    const cudnnStatus_t s = C::find(a, h, pl, o, &got, r, want ? ws.ptr() : nullptr, want);
    if (s != CUDNN_STATUS_SUCCESS) {
        if (refusal(s)) return false;
        fail(s, "cudnnFindConvolution*AlgorithmEx");
    }
    if (!choose<K>(a, h, pl, dt, r, got, want)) return false;
    pl.tuned = true;
    race<K>(a, h, pl, o, device);
    record(pl, key);
    return true;
}

/// Runs one direction: finds or makes the plan, chooses its algorithm, and launches it.
template <Kind K>
bool convolve(const CudaTensor& xt, const CudaTensor& wt, const CudaTensor& yt, const Operands& o,
              DType dt, bool channels_last, int device, const ConvParams& p) {
    if (!wanted()) return false;
    if (!consistent(xt.shape, wt.shape, yt.shape, p)) return false;
    const Api& a = api();
    DeviceCtx& c = device_ctx(device);
    std::lock_guard lock(c.mu);
    if (c.handle_failed) return false;
    if (c.handle == nullptr) {
        use_device(device);
        cudnnHandle_t h = nullptr;
        if (const cudnnStatus_t s = a.create(&h); s != CUDNN_STATUS_SUCCESS) {
            c.handle_failed = true;  // e.g. a cuDNN built for other GPUs: im2col from now on
            std::lock_guard elock(g_handle_error_mu);
            g_handle_error = std::string("cudnnCreate failed on device ") + std::to_string(device) +
                             ": " + a.error_string(s) + " (cudnnStatus_t " +
                             std::to_string(static_cast<int>(s)) + ")";
            return false;
        }
        const cudnnStatus_t s = a.set_stream(h, stream(device));
        if (s != CUDNN_STATUS_SUCCESS) fail(s, "cudnnSetStream");
        c.handle = h;
    }
    std::vector<long long> key{static_cast<long long>(K),
                               static_cast<long long>(dt),
                               dt == DType::F32 && tf32_allowed(),
                               channels_last,
                               static_cast<long long>(p.n),
                               static_cast<long long>(p.groups)};
    for (const Shape* s : {&xt.shape, &wt.shape, &yt.shape})
        for (std::size_t d = 0; d < s->rank(); ++d) key.push_back(static_cast<long long>((*s)[d]));
    for (std::size_t d = 0; d < p.n; ++d) {
        key.push_back(static_cast<long long>(p.stride[d]));
        key.push_back(static_cast<long long>(p.padding[d]));
        key.push_back(static_cast<long long>(p.dilation[d]));
    }
    std::unique_ptr<Plan>& slot = c.plans[key];
    if (!slot) {
        slot = std::make_unique<Plan>();
        if (!describe(a, *slot, dt, channels_last, xt.shape, wt.shape, yt.shape, p))
            slot->refused = true;
    }
    Plan& pl = *slot;
    if (pl.refused) return false;
    use_device(device);
    if (!pl.tuned && (!pl.chosen || capturing(device) == nullptr)) {
        if (!tune<K>(a, c.handle, pl, dt, o, device, key)) {
            pl.refused = true;
            return false;
        }
    }
    if (pl.engine) {
        const auto ptrs = xwy<K>(o);
        if (aligned(ptrs[0]) && aligned(ptrs[1]) && aligned(ptrs[2])) {
            CudaTensor ews =
                workspace_tensor(static_cast<std::size_t>(pl.engine->workspace()), device);
            const cudnnStatus_t s =
                pl.engine->run(c.handle, ptrs.data(), pl.engine->workspace() ? ews.ptr() : nullptr);
            if (s != CUDNN_STATUS_SUCCESS) fail(s, "cudnnBackendExecute");
            g_runs.fetch_add(1, std::memory_order_relaxed);
            return true;
        }
    }
    CudaTensor ws = workspace_tensor(pl.workspace, device);
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;
    const bool f64 = dt == DType::F64;
    const cudnnStatus_t s = Calls<K>::run(
        a, c.handle, pl, o, f64 ? static_cast<const void*>(&one_d) : &one_f,
        f64 ? static_cast<const void*>(&zero_d) : &zero_f, pl.workspace ? ws.ptr() : nullptr);
    if (s != CUDNN_STATUS_SUCCESS) {
        if (!refusal(s)) fail(s, Calls<K>::kRun);
        pl.refused = true;
        return false;
    }
    g_runs.fetch_add(1, std::memory_order_relaxed);
    return true;
}

/// The three tensors' common layout where they share one dtype cuDNN computes in, one device
/// and one layout (0 contiguous, 1 channels-last, for 2-d convolutions); -1 otherwise.
int layout(const CudaTensor& a, const CudaTensor& b, const CudaTensor& out, const ConvParams& p) {
    const DType d = out.dtype;
    if (a.dtype != d || b.dtype != d ||
        !(d == DType::F32 || d == DType::F64 || d == DType::F16 || d == DType::BF16) ||
        a.device() != out.device() || b.device() != out.device())
        return -1;
    if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) return 0;
    // Each of them channels-last, or contiguous where that is the same (C or H·W of 1).
    auto cl = [](const CudaTensor& t) {
        if (is_channels_last(t)) return true;
        if (!t.is_contiguous()) return false;
        const Strides want = channels_last_strides(t.shape);
        for (std::size_t d = 0; d < t.shape.rank(); ++d)
            if (t.shape[d] != 1 && t.strides[d] != want[d]) return false;
        return true;
    };
    return p.n == 2 && cl(a) && cl(b) && cl(out) ? 1 : -1;
}

#endif  // EMBER_HAVE_CUDNN_H

}  // namespace

bool wanted() {
#if EMBER_HAVE_CUDNN_H
    return use_setting() && api().error.empty();
#else
    return false;
#endif
}

DType native_dtype(DType x, DType w) {
    if (x == w && (x == DType::F32 || x == DType::F64 || x == DType::F16 || x == DType::BF16))
        return x;
    return x == DType::F64 || w == DType::F64 ? DType::F64 : DType::F32;
}

bool forward(const CudaTensor& x, const CudaTensor& w, const CudaTensor& y, const ConvParams& p) {
#if EMBER_HAVE_CUDNN_H
    const int l = layout(x, w, y, p);
    if (l < 0) return false;
    return convolve<Kind::Forward>(x, w, y, Operands{x.ptr(), w.ptr(), y.ptr()}, y.dtype, l == 1,
                                   y.device(), p);
#else
    (void)x, (void)w, (void)y, (void)p;
    return false;
#endif
}

bool backward_data(const CudaTensor& dy, const CudaTensor& w, const CudaTensor& dx,
                   const ConvParams& p) {
#if EMBER_HAVE_CUDNN_H
    const int l = layout(dy, w, dx, p);
    if (l < 0) return false;
    return convolve<Kind::Data>(dx, w, dy, Operands{dy.ptr(), w.ptr(), dx.ptr()}, dx.dtype, l == 1,
                                dx.device(), p);
#else
    (void)dy, (void)w, (void)dx, (void)p;
    return false;
#endif
}

bool backward_filter(const CudaTensor& x, const CudaTensor& dy, const CudaTensor& dw,
                     const ConvParams& p) {
#if EMBER_HAVE_CUDNN_H
    const int l = layout(x, dy, dw, p);
    if (l < 0) return false;
    return convolve<Kind::Filter>(x, dw, dy, Operands{x.ptr(), dy.ptr(), dw.ptr()}, dw.dtype,
                                  l == 1, dw.device(), p);
#else
    (void)x, (void)dy, (void)dw, (void)p;
    return false;
#endif
}

}  // namespace ember::detail::cuda::cudnn

namespace ember::cuda {

bool cudnn_available() {
    return cudnn_unavailable_reason().empty();
}

std::string cudnn_unavailable_reason() {
#if EMBER_HAVE_CUDNN_H
    namespace c = detail::cuda::cudnn;
    if (!c::api().error.empty()) return c::api().error;
    std::lock_guard lock(c::g_handle_error_mu);
    return c::g_handle_error;
#else
    return "ember was built without cudnn.h";
#endif
}

std::size_t cudnn_version() {
#if EMBER_HAVE_CUDNN_H
    const auto& a = detail::cuda::cudnn::api();
    return a.error.empty() ? a.version : 0;
#else
    return 0;
#endif
}

void set_use_cudnn(bool use) {
    detail::cuda::cudnn::g_use.store(use ? 1 : 0);
}

bool use_cudnn() {
    return detail::cuda::cudnn::use_setting();
}

std::uint64_t cudnn_convolutions() {
    return detail::cuda::cudnn::g_runs.load(std::memory_order_relaxed);
}

}  // namespace ember::cuda
