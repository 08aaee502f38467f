// cuDNN's graph API for one convolution (see cudnn_engines.hpp). A problem becomes tensor,
// convolution and operation descriptors in one operation graph; the heuristics (mode A) rank
// engine configurations for it; each configuration that builds into an execution plan is a
// candidate. Descriptors are owned by a small RAII holder and destroyed as soon as the plan is
// built (a finalized plan keeps what it needs).
#if __has_include(<cudnn.h>)
#include "cudnn_engines.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace ember::detail::cuda::cudnn::engines {

namespace {

using i64 = std::int64_t;

/// One backend descriptor, destroyed with its holder.
struct Desc {
    const Functions* f = nullptr;
    cudnnBackendDescriptor_t d = nullptr;
    explicit Desc(const Functions& fn) : f(&fn) {}
    Desc(const Functions& fn, cudnnBackendDescriptorType_t type) : f(&fn) {
        if (f->create(type, &d) != CUDNN_STATUS_SUCCESS) d = nullptr;
    }
    ~Desc() {
        if (d != nullptr) f->destroy(d);
    }
    Desc(const Desc&) = delete;
    Desc& operator=(const Desc&) = delete;
    Desc(Desc&& o) noexcept : f(o.f), d(std::exchange(o.d, nullptr)) {}
    Desc& operator=(Desc&& o) noexcept {
        if (this != &o) {
            if (d != nullptr) f->destroy(d);
            f = o.f;
            d = std::exchange(o.d, nullptr);
        }
        return *this;
    }
    explicit operator bool() const { return d != nullptr; }
    /// Hands the descriptor over (the holder no longer destroys it).
    cudnnBackendDescriptor_t release() { return std::exchange(d, nullptr); }
};

bool ok(cudnnStatus_t s) {
    return s == CUDNN_STATUS_SUCCESS;
}

template <typename T>
bool set(const Functions& f, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
         cudnnBackendAttributeType_t type, const T* v, i64 n = 1) {
    return ok(f.set(d, name, type, n, v));
}

/// A finalized tensor descriptor.
bool tensor(const Functions& f, Desc& t, cudnnDataType_t data, const std::vector<i64>& dims,
            const std::vector<i64>& strides, i64 uid) {
    // ember's pool hands out 256-byte aligned blocks; views at an offset may be less aligned,
    // which Engine::run's caller checks against this promise.
    const i64 align = 16;
    const i64 n = static_cast<i64>(dims.size());
    return t && set(f, t.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &data) &&
           set(f, t.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), n) &&
           set(f, t.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), n) &&
           set(f, t.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid) &&
           set(f, t.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align) &&
           ok(f.finalize(t.d));
}

/// A problem's descriptors: its operation graph and every descriptor the graph refers to,
/// kept alive as long as a plan built from it.
struct Graph {
    explicit Graph(const Functions& f)
        : x(f, CUDNN_BACKEND_TENSOR_DESCRIPTOR),
          w(f, CUDNN_BACKEND_TENSOR_DESCRIPTOR),
          y(f, CUDNN_BACKEND_TENSOR_DESCRIPTOR),
          conv(f, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR),
          op(f),
          g(f) {}
    Desc x, w, y, conv, op, g;
};

/// The problem's operation graph (finalized), or null.
std::shared_ptr<Graph> graph(const Functions& f, cudnnHandle_t handle, const Problem& p) {
    auto gr = std::make_shared<Graph>(f);
    Desc &x = gr->x, &w = gr->w, &y = gr->y, &conv = gr->conv;
    if (!tensor(f, x, p.data, p.x_dims, p.x_strides, 'x') ||
        !tensor(f, w, p.data, p.w_dims, p.w_strides, 'w') ||
        !tensor(f, y, p.data, p.y_dims, p.y_strides, 'y'))
        return nullptr;
    const i64 sd = static_cast<i64>(p.padding.size());
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    if (!conv ||
        !set(f, conv.d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &p.compute) ||
        !set(f, conv.d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode) ||
        !set(f, conv.d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &sd) ||
        !set(f, conv.d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, p.padding.data(),
             sd) ||
        !set(f, conv.d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, p.padding.data(),
             sd) ||
        !set(f, conv.d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, p.dilation.data(),
             sd) ||
        !set(f, conv.d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, p.stride.data(),
             sd) ||
        !ok(f.finalize(conv.d)))
        return nullptr;
    // Alpha and beta are in the compute type's host form (float for every non-double type).
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;
    const bool f64 = p.compute == CUDNN_DATA_DOUBLE;
    const cudnnBackendAttributeType_t st = f64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
    const void* one = f64 ? static_cast<const void*>(&one_d) : &one_f;
    const void* zero = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
    struct Names {
        cudnnBackendDescriptorType_t type;
        cudnnBackendAttributeName_t alpha, beta, conv, a, b, c;
    };
    // Per direction: the operation and its three tensors' attribute names, for x, w, y.
    static constexpr std::array<Names, 3> kNames = {{
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
    }};
    const Names& n = kNames[static_cast<std::size_t>(p.direction)];
    gr->op = Desc(f, n.type);
    Desc& op = gr->op;
    if (!op || !set(f, op.d, n.alpha, st, one) || !set(f, op.d, n.beta, st, zero) ||
        !set(f, op.d, n.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, &conv.d) ||
        !set(f, op.d, n.a, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x.d) ||
        !set(f, op.d, n.b, CUDNN_TYPE_BACKEND_DESCRIPTOR, &w.d) ||
        !set(f, op.d, n.c, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y.d) || !ok(f.finalize(op.d)))
        return nullptr;
    gr->g = Desc(f, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    Desc& g = gr->g;
    if (!g || !set(f, g.d, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, &op.d) ||
        !set(f, g.d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle) ||
        !ok(f.finalize(g.d)))
        return nullptr;
    return gr;
}

/// The heuristics' ranked engine configurations for a graph.
std::vector<Desc> ranked(const Functions& f, const Graph& gr) {
    const Desc& g = gr.g;
    std::vector<Desc> cfgs;
    Desc heur(f, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    if (!heur ||
        !set(f, heur.d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR,
             &g.d) ||
        !set(f, heur.d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode) ||
        !ok(f.finalize(heur.d)))
        return cfgs;
    i64 count = 0;
    if (!ok(f.get(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                  nullptr)) ||
        count <= 0)
        return cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (i64 i = 0; i < count; ++i) {
        cfgs.emplace_back(f, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        if (!cfgs.back()) return {};
        raw.push_back(cfgs.back().d);
    }
    i64 got = 0;
    if (!ok(f.get(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                  raw.data())))
        return {};
    cfgs.erase(cfgs.begin() + std::min(got, count), cfgs.end());
    return cfgs;
}

/// Whether a configuration's engine computes other than the problem asks: nondeterministic,
/// converting the inputs down, reducing in reduced precision, or on tensor cores where the
/// problem allows none.
bool unwanted(const Functions& f, const Desc& cfg, const Problem& p) {
    Desc engine(f, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    i64 n = 0;
    if (!engine || !ok(f.get(cfg.d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                             &n, &engine.d)))
        return true;
    std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
    if (!ok(f.get(engine.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                  static_cast<i64>(notes.size()), &n, notes.data())))
        return true;
    for (i64 i = 0; i < n && i < static_cast<i64>(notes.size()); ++i) {
        switch (notes[static_cast<std::size_t>(i)]) {
            case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
            case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
            case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
                return true;
            case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
                if (!p.tensor_cores) return true;
                break;
            default:
                break;
        }
    }
    return false;
}

/// The execution plan of one configuration, or null; the plan keeps the graph and the
/// configuration alive.
std::unique_ptr<Engine> build(const Functions& f, cudnnHandle_t handle,
                              const std::shared_ptr<Graph>& gr, Desc cfg) {
    Desc plan(f, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    if (!plan || !set(f, plan.d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle) ||
        !set(f, plan.d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
             &cfg.d) ||
        !ok(f.finalize(plan.d)))
        return nullptr;
    i64 ws = 0, n = 0;
    if (!ok(f.get(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws)))
        return nullptr;
    auto keep = std::make_shared<std::pair<std::shared_ptr<Graph>, Desc>>(gr, std::move(cfg));
    return std::make_unique<Engine>(f, plan.release(), ws, std::move(keep));
}

}  // namespace

Engine::~Engine() {
    f_.destroy(plan_);
}

cudnnStatus_t Engine::run(cudnnHandle_t handle, void* const ptrs[3], void* ws) const {
    Desc pack(f_, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    if (!pack) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    const std::array<i64, 3> uids = {'x', 'w', 'y'};
    cudnnStatus_t s =
        f_.set(pack.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (ok(s))
        s = f_.set(pack.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data());
    if (ok(s)) s = f_.set(pack.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (ok(s)) s = f_.finalize(pack.d);
    if (ok(s)) s = f_.execute(handle, plan_, pack.d);
    return s;
}

std::vector<std::pair<int, std::unique_ptr<Engine>>> candidates(const Functions& f,
                                                                cudnnHandle_t handle,
                                                                const Problem& p,
                                                                std::int64_t max_workspace,
                                                                int most) {
    std::vector<std::pair<int, std::unique_ptr<Engine>>> out;
    const auto g = graph(f, handle, p);
    if (!g) return out;
    std::vector<Desc> cfgs = ranked(f, *g);
    for (std::size_t i = 0; i < cfgs.size() && static_cast<int>(out.size()) < most; ++i) {
        if (unwanted(f, cfgs[i], p)) continue;
        auto e = build(f, handle, g, std::move(cfgs[i]));
        if (e && e->workspace() <= max_workspace)
            out.emplace_back(static_cast<int>(i), std::move(e));
    }
    return out;
}

std::unique_ptr<Engine> at_rank(const Functions& f, cudnnHandle_t handle, const Problem& p,
                                int rank) {
    const auto g = graph(f, handle, p);
    if (!g || rank < 0) return nullptr;
    std::vector<Desc> cfgs = ranked(f, *g);
    if (static_cast<std::size_t>(rank) >= cfgs.size()) return nullptr;
    return build(f, handle, g, std::move(cfgs[static_cast<std::size_t>(rank)]));
}

}  // namespace ember::detail::cuda::cudnn::engines
#endif  // __has_include(<cudnn.h>)
