// Reductions, softmax, indexing and sorting on the GPU. Index tensors are validated by a kernel
// whose verdict is read back before anything is written, so a bad index throws an IndexError
// (as on the CPU) instead of reading or writing out of bounds.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "../common/norm_check.hpp"
#include "ops.hpp"

namespace ember::detail::cuda {

namespace {

constexpr const char* reduce_name(ReduceOp op) {
    constexpr const char* names[] = {"sum", "mean", "prod", "max", "min", "any", "all"};
    return names[static_cast<int>(op)];
}

/// The dtype reductions compute in: bools and narrow ints as int64, halves as f32.
DType reduce_compute(DType d) {
    return d == DType::Bool ? DType::I64 : compute_dtype(d);
}

/// The output dtype of a reduction of dtype d.
DType reduce_result(ReduceOp op, DType d) {
    if (op == ReduceOp::Any || op == ReduceOp::All) return DType::Bool;
    if (d == DType::Bool && (op == ReduceOp::Sum || op == ReduceOp::Prod)) return DType::I64;
    return d;
}

/// Indices as int64 (narrower ints widened; anything else is an error).
CudaTensor index_tensor(CudaTensor indices, const char* op) {
    check::index_dtype(op, indices.dtype);
    return cast(std::move(indices), DType::I64);
}

/// Throws IndexError when an index is outside [0, size) (waits for the stream).
void check_indices(const CudaTensor& indices, std::size_t size, std::size_t dim, const char* op) {
    if (indices.num_elements() == 0) return;
    const Storage& st = *indices.storage;
    if (st.lo <= st.hi) {  // bounds known on the host: no readback
        if (st.lo < 0 || st.hi >= static_cast<std::int64_t>(size))
            check::index_out_of_range(op, st.lo < 0 ? st.lo : st.hi, dim, size);
        return;
    }
    auto flag = allocate(8, indices.device());
    cudaStream_t s = stream(indices.device());
    EMBER_CUDA_CHECK(cudaMemsetAsync(flag->data, 0, 8, s));
    const auto it = make_iter<1>(indices.shape, {&indices.strides});
    launch_check_range(it, static_cast<const std::int64_t*>(indices.ptr()),
                       static_cast<std::int64_t>(size), 0, static_cast<int*>(flag->data), s);
    if (read_i64(flag->data, indices.device(), op) == 0) return;
    // The error path only: read the indices back to name the first bad one, as every backend.
    const TensorData host = to_data(indices);
    for (const std::int64_t v : host.as_slice<std::int64_t>())
        if (v < 0 || v >= static_cast<std::int64_t>(size))
            check::index_out_of_range(op, v, dim, size);
}

/// Moves `dim` last: the permutation and its inverse.
void last_dim_perm(std::size_t rank, std::size_t dim, std::array<std::size_t, kMaxRank>& fwd,
                   std::array<std::size_t, kMaxRank>& inv) {
    for (std::size_t i = 0, j = 0; i < rank; ++i)
        if (i != dim) fwd[j++] = i;
    fwd[rank - 1] = dim;
    for (std::size_t i = 0; i < rank; ++i) inv[fwd[i]] = i;
}

}  // namespace

CudaTensor reduce_all(ReduceOp op, CudaTensor t) {
    check::reduce_all(reduce_name(op), op != ReduceOp::Max && op != ReduceOp::Min, t.shape);
    EMBER_CHECK(op != ReduceOp::Mean || is_float(t.dtype), DType, reduce_name(op),
                ": needs a float tensor, got ", dtype_name(t.dtype));
    const DType result = reduce_result(op, t.dtype), cd = reduce_compute(t.dtype);
    t = contiguous(cast(std::move(t), cd));
    const bool logical = op == ReduceOp::Any || op == ReduceOp::All;
    CudaTensor out = empty(Shape{1}, logical ? DType::Bool : cd, t.device());
    auto scratch = allocate(1024 * 8, t.device());
    launch_reduce_all(op, cd, static_cast<std::int64_t>(t.num_elements()), out.ptr(), t.ptr(),
                      scratch->data, stream(t.device()));
    return cast(std::move(out), result);
}

CudaTensor reduce_dim(ReduceOp op, CudaTensor t, std::size_t dim) {
    check::reduce_dim(reduce_name(op), op != ReduceOp::Max && op != ReduceOp::Min, dim, t.shape);
    EMBER_CHECK(op != ReduceOp::Mean || is_float(t.dtype), DType, reduce_name(op),
                ": needs a float tensor, got ", dtype_name(t.dtype));
    const DType result = reduce_result(op, t.dtype), cd = reduce_compute(t.dtype);
    const auto k = static_cast<std::int64_t>(t.shape[dim]);
    // The strided path reads f16/bf16 itself: no f32 copy of a whole bias gradient first.
    const bool half = t.dtype == DType::F16 || t.dtype == DType::BF16;
    if (!(half && cd == DType::F32 && reduce_dim_strided(k, t.strides[dim])))
        t = cast(std::move(t), cd);
    const bool logical = op == ReduceOp::Any || op == ReduceOp::All;
    Shape out_shape = t.shape;
    out_shape[dim] = 1;
    CudaTensor out = empty(out_shape, logical ? DType::Bool : cd, t.device());
    Strides ts = t.strides;
    ts[dim] = 0;
    const auto it = make_iter<2>(out_shape, {&out.strides, &ts});
    const std::size_t bytes = reduce_dim_scratch(it.n, k, t.strides[dim]);
    auto scratch = bytes ? allocate(bytes, t.device()) : nullptr;
    launch_reduce_dim(op, cd, t.dtype, it, k, t.strides[dim], out.ptr(), t.ptr(),
                      scratch ? scratch->data : nullptr, stream(t.device()));
    return cast(std::move(out), result);
}

CudaTensor arg_reduce(ArgReduceOp op, CudaTensor t, std::size_t dim) {
    const char* name = op == ArgReduceOp::ArgMax ? "argmax" : "argmin";
    check::nonempty_dim(name, dim, t.shape);
    t = cast(std::move(t), reduce_compute(t.dtype));
    Shape out_shape = t.shape;
    out_shape[dim] = 1;
    CudaTensor out = empty(out_shape, DType::I64, t.device());
    Strides ts = t.strides;
    ts[dim] = 0;
    const auto it = make_iter<2>(out_shape, {&out.strides, &ts});
    launch_arg_reduce(op, t.dtype, it, static_cast<std::int64_t>(t.shape[dim]), t.strides[dim],
                      static_cast<std::int64_t*>(out.ptr()), t.ptr(), stream(t.device()));
    return out;
}

CudaTensor softmax(CudaTensor t, std::size_t dim, bool log) {
    const char* name = log ? "log_softmax" : "softmax";
    check::dim(name, dim, t.shape);
    EMBER_CHECK(is_float(t.dtype), DType, name, ": needs a float tensor, got ",
                dtype_name(t.dtype));
    const DType result = t.dtype, cd = compute_dtype(t.dtype);
    const std::size_t rank = t.shape.rank();
    std::array<std::size_t, kMaxRank> fwd{}, inv{};
    last_dim_perm(rank, dim, fwd, inv);
    const bool moved = dim != rank - 1;
    if (moved) t = permute(std::move(t), std::span<const std::size_t>(fwd.data(), rank));
    t = contiguous(cast(std::move(t), cd));
    CudaTensor out = t.is_unique() ? reuse(t) : empty(t.shape, cd, t.device());
    const auto cols = static_cast<std::int64_t>(t.shape[rank - 1]);
    const std::int64_t rows = cols == 0 ? 0 : static_cast<std::int64_t>(t.num_elements()) / cols;
    launch_softmax(log, cd, rows, cols, out.ptr(), t.ptr(), stream(t.device()));
    if (moved) out = permute(std::move(out), std::span<const std::size_t>(inv.data(), rank));
    return cast(std::move(out), result);
}

/// Layer norm over the last dim: {y, mean, rstd} (see BackendBase::float_layer_norm).
std::array<CudaTensor, 3> layer_norm(CudaTensor x, std::optional<CudaTensor> gamma,
                                     std::optional<CudaTensor> beta, double eps) {
    const std::size_t c = norm::check_layer_norm(x, gamma, beta);
    const DType result = x.dtype, cd = compute_dtype(x.dtype);
    for (auto* p : {&gamma, &beta}) {
        if (!*p) continue;
        **p = contiguous(cast(std::move(**p), cd));
    }
    x = contiguous(cast(std::move(x), cd));
    Shape stat_shape = x.shape;
    stat_shape[stat_shape.rank() - 1] = 1;
    CudaTensor y = x.is_unique() ? reuse(x) : empty(x.shape, cd, x.device());
    CudaTensor mean = empty(stat_shape, cd, x.device()), rstd = empty(stat_shape, cd, x.device());
    const auto cols = static_cast<std::int64_t>(c);
    const std::int64_t rows = cols == 0 ? 0 : static_cast<std::int64_t>(x.num_elements()) / cols;
    launch_layer_norm(cd, rows, cols, x.ptr(), gamma ? gamma->ptr() : nullptr,
                      beta ? beta->ptr() : nullptr, eps, y.ptr(), mean.ptr(), rstd.ptr(),
                      stream(x.device()));
    return {cast(std::move(y), result), cast(std::move(mean), result),
            cast(std::move(rstd), result)};
}

CudaTensor gather(std::size_t dim, CudaTensor t, CudaTensor indices) {
    check::gather(dim, t, indices);
    check_same_device("gather", t, indices);
    indices = index_tensor(std::move(indices), "gather");
    check_indices(indices, t.shape[dim], dim, "gather");
    CudaTensor out = empty(indices.shape, t.dtype, t.device());
    Strides ts = t.strides;
    ts[dim] = 0;
    const auto it = make_iter<3>(indices.shape, {&out.strides, &indices.strides, &ts});
    launch_gather(static_cast<int>(dtype_size(t.dtype)), it, t.strides[dim], out.ptr(),
                  static_cast<const std::int64_t*>(indices.ptr()), t.ptr(), stream(t.device()));
    return out;
}

CudaTensor scatter_add(std::size_t dim, CudaTensor t, CudaTensor indices, CudaTensor values) {
    check::scatter_add(dim, t, indices, values);
    check_same_device("scatter_add", t, indices);
    check_same_device("scatter_add", t, values);
    indices = index_tensor(std::move(indices), "scatter_add");
    check_indices(indices, t.shape[dim], dim, "scatter_add");
    const DType result = t.dtype, cd = reduce_compute(t.dtype);
    t = cast(std::move(t), cd);
    CudaTensor out = t.is_unique() ? reuse(std::move(t)) : fresh_copy(t);
    values = cast(std::move(values), cd);
    Strides os = out.strides;
    os[dim] = 0;
    const auto it = make_iter<3>(indices.shape, {&os, &indices.strides, &values.strides});
    launch_scatter_add(cd, it, out.strides[dim], out.ptr(),
                       static_cast<const std::int64_t*>(indices.ptr()), values.ptr(),
                       stream(out.device()));
    return cast(std::move(out), result);
}

CudaTensor select(CudaTensor t, std::size_t dim, CudaTensor indices) {
    const Shape out_shape = check::select(t, dim, indices);
    check_same_device("select", t, indices);
    indices = index_tensor(std::move(indices), "select");
    check_indices(indices, t.shape[dim], dim, "select");
    CudaTensor out = empty(out_shape, t.dtype, t.device());
    // index_select is a gather whose index tensor is the 1-d indices broadcast along dim.
    Strides is{}, ts = t.strides;
    is[dim] = indices.shape.rank() == 0 ? 0 : indices.strides[0];
    ts[dim] = 0;
    const auto it = make_iter<3>(out_shape, {&out.strides, &is, &ts});
    launch_gather(static_cast<int>(dtype_size(t.dtype)), it, t.strides[dim], out.ptr(),
                  static_cast<const std::int64_t*>(indices.ptr()), t.ptr(), stream(t.device()));
    return out;
}

CudaTensor select_assign(CudaTensor t, std::size_t dim, CudaTensor indices, CudaTensor values) {
    check::select_assign(t, dim, indices, values);
    check_same_device("select_assign", t, indices);
    check_same_device("select_assign", t, values);
    indices = index_tensor(std::move(indices), "select_assign");
    check_indices(indices, t.shape[dim], dim, "select_assign");
    const DType result = t.dtype, cd = reduce_compute(t.dtype);
    t = cast(std::move(t), cd);
    CudaTensor out = t.is_unique() ? reuse(std::move(t)) : fresh_copy(t);
    values = cast(std::move(values), cd);
    Strides is{}, os = out.strides;
    is[dim] = indices.shape.rank() == 0 ? 0 : indices.strides[0];
    os[dim] = 0;
    const auto it = make_iter<3>(values.shape, {&os, &is, &values.strides});
    launch_scatter_add(cd, it, out.strides[dim], out.ptr(),
                       static_cast<const std::int64_t*>(indices.ptr()), values.ptr(),
                       stream(out.device()));
    return cast(std::move(out), result);
}

CudaTensor argwhere(CudaTensor t) {
    if (t.dtype == DType::F16 || t.dtype == DType::BF16) t = cast(std::move(t), DType::F32);
    const std::size_t rank = t.shape.rank(), n = t.num_elements();
    if (n == 0) return empty(Shape{0, rank}, DType::I64, t.device());
    cudaStream_t s = stream(t.device());
    CudaTensor pos = empty(Shape{n + 1}, DType::I64, t.device());
    auto count = allocate(8, t.device());
    const auto it = make_iter<1>(t.shape, {&t.strides});
    // The coordinates come from the linear index over the full shape, not the merged one.
    Iter<1> full_it;
    full_it.rank = static_cast<int>(rank);
    full_it.n = static_cast<std::int64_t>(n);
    for (std::size_t d = 0; d < rank; ++d) {
        full_it.shape[d] = static_cast<std::int64_t>(t.shape[d]);
        full_it.strides[0][d] = t.strides[d];
    }
    launch_argwhere_scan(full_it, t.dtype, t.ptr(), static_cast<std::int64_t*>(pos.ptr()),
                         static_cast<std::int64_t*>(count->data), t.device(), s);
    const auto total = static_cast<std::size_t>(read_i64(count->data, t.device(), "argwhere"));
    CudaTensor out = empty(Shape{total, rank}, DType::I64, t.device());
    if (total == 0 || rank == 0) return out;
    launch_argwhere_write(full_it, t.dtype, t.ptr(), static_cast<const std::int64_t*>(pos.ptr()),
                          static_cast<int>(rank), full_it.shape,
                          static_cast<std::int64_t*>(out.ptr()), s);
    (void)it;
    return out;
}

std::pair<CudaTensor, CudaTensor> sort_with_indices(CudaTensor t, std::size_t dim,
                                                    bool descending) {
    check::dim("sort", dim, t.shape);
    const DType result = t.dtype, cd = reduce_compute(t.dtype);
    const std::size_t rank = t.shape.rank();
    std::array<std::size_t, kMaxRank> fwd{}, inv{};
    last_dim_perm(rank, dim, fwd, inv);
    t = permute(std::move(t), std::span<const std::size_t>(fwd.data(), rank));
    t = contiguous(cast(std::move(t), cd));
    CudaTensor keys = empty(t.shape, cd, t.device());
    CudaTensor idx = empty(t.shape, DType::I64, t.device());
    const auto cols = static_cast<std::int64_t>(t.shape[rank - 1]);
    const std::int64_t rows = cols == 0 ? 0 : static_cast<std::int64_t>(t.num_elements()) / cols;
    launch_sort_rows(cd, rows, cols, t.ptr(), keys.ptr(), static_cast<std::int64_t*>(idx.ptr()),
                     descending, t.device(), stream(t.device()));
    keys = permute(std::move(keys), std::span<const std::size_t>(inv.data(), rank));
    idx = permute(std::move(idx), std::span<const std::size_t>(inv.data(), rank));
    return {cast(std::move(keys), result), std::move(idx)};
}

std::pair<CudaTensor, CudaTensor> topk(CudaTensor t, std::size_t k, std::size_t dim, bool largest) {
    check::topk(k, dim, t.shape);
    auto [v, i] = sort_with_indices(std::move(t), dim, largest);
    std::array<Slice, kMaxRank> r{};
    r[dim] = Slice{0, static_cast<long>(k)};
    std::span<const Slice> rs(r.data(), dim + 1);
    return {slice(std::move(v), rs), slice(std::move(i), rs)};
}

}  // namespace ember::detail::cuda

// ---- CudaBackend's ops on the functions above ----
namespace ember {
namespace k = detail::cuda;

auto CudaBackend::float_reduce(ReduceOp op, FT t) -> FT {
    return k::reduce_all(op, std::move(t));
}
auto CudaBackend::int_reduce(ReduceOp op, IT t) -> IT {
    return k::reduce_all(op, std::move(t));
}
auto CudaBackend::bool_reduce(ReduceOp op, BT t) -> BT {
    return k::reduce_all(op, std::move(t));
}
auto CudaBackend::float_reduce_dim(ReduceOp op, FT t, std::size_t dim) -> FT {
    return k::reduce_dim(op, std::move(t), dim);
}
auto CudaBackend::int_reduce_dim(ReduceOp op, IT t, std::size_t dim) -> IT {
    return k::reduce_dim(op, std::move(t), dim);
}
auto CudaBackend::bool_reduce_dim(ReduceOp op, BT t, std::size_t dim) -> BT {
    return k::reduce_dim(op, std::move(t), dim);
}
auto CudaBackend::float_arg_reduce(ArgReduceOp op, FT t, std::size_t dim) -> IT {
    return k::arg_reduce(op, std::move(t), dim);
}
auto CudaBackend::int_arg_reduce(ArgReduceOp op, IT t, std::size_t dim) -> IT {
    return k::arg_reduce(op, std::move(t), dim);
}
auto CudaBackend::float_gather(std::size_t dim, FT t, IT i) -> FT {
    return k::gather(dim, std::move(t), std::move(i));
}
auto CudaBackend::int_gather(std::size_t dim, IT t, IT i) -> IT {
    return k::gather(dim, std::move(t), std::move(i));
}
auto CudaBackend::bool_gather(std::size_t dim, BT t, IT i) -> BT {
    return k::gather(dim, std::move(t), std::move(i));
}
auto CudaBackend::float_scatter(std::size_t dim, FT t, IT i, FT v) -> FT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
auto CudaBackend::int_scatter(std::size_t dim, IT t, IT i, IT v) -> IT {
    return k::scatter_add(dim, std::move(t), std::move(i), std::move(v));
}
auto CudaBackend::float_select(FT t, std::size_t dim, IT i) -> FT {
    return k::select(std::move(t), dim, std::move(i));
}
auto CudaBackend::int_select(IT t, std::size_t dim, IT i) -> IT {
    return k::select(std::move(t), dim, std::move(i));
}
auto CudaBackend::bool_select(BT t, std::size_t dim, IT i) -> BT {
    return k::select(std::move(t), dim, std::move(i));
}
auto CudaBackend::float_select_assign(FT t, std::size_t dim, IT i, FT v) -> FT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
auto CudaBackend::int_select_assign(IT t, std::size_t dim, IT i, IT v) -> IT {
    return k::select_assign(std::move(t), dim, std::move(i), std::move(v));
}
auto CudaBackend::float_sort_with_indices(FT t, std::size_t dim, bool desc) -> std::pair<FT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
auto CudaBackend::int_sort_with_indices(IT t, std::size_t dim, bool desc) -> std::pair<IT, IT> {
    return k::sort_with_indices(std::move(t), dim, desc);
}
auto CudaBackend::float_topk(FT t, std::size_t kk, std::size_t dim, bool largest)
    -> std::pair<FT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
auto CudaBackend::int_topk(IT t, std::size_t kk, std::size_t dim, bool largest)
    -> std::pair<IT, IT> {
    return k::topk(std::move(t), kk, dim, largest);
}
auto CudaBackend::float_softmax(FT t, std::size_t dim) -> FT {
    return k::softmax(std::move(t), dim, false);
}
auto CudaBackend::float_log_softmax(FT t, std::size_t dim) -> FT {
    return k::softmax(std::move(t), dim, true);
}
auto CudaBackend::float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta,
                                   double eps) -> std::array<FT, 3> {
    return k::layer_norm(std::move(x), std::move(gamma), std::move(beta), eps);
}
auto CudaBackend::float_layer_norm_backward(const FT& x, const FT& grad,
                                            const std::optional<FT>& gamma, const FT& mean,
                                            const FT& rstd, const std::optional<FT>& acc)
    -> std::optional<std::array<FT, 3>> {
    // Dense f32/f64 operands of one dtype only; anything else composes in Autodiff.
    const DType cd = x.dtype;
    if ((cd != DType::F32 && cd != DType::F64) || x.shape.rank() == 0) return std::nullopt;
    for (const FT* t : {&x, &grad, &mean, &rstd, gamma ? &*gamma : &x})
        if ((t != &grad && t->dtype != cd) || !t->is_contiguous() || t->device() != x.device())
            return std::nullopt;
    if (!is_float(grad.dtype)) return std::nullopt;
    const std::size_t c = x.shape[x.shape.rank() - 1];
    const std::size_t rows = c == 0 ? 0 : x.num_elements() / c;
    if (grad.shape != x.shape || mean.num_elements() != rows || rstd.num_elements() != rows ||
        (gamma && gamma->num_elements() != c))
        return std::nullopt;
    const int dev = x.device();
    FT dx = k::empty(x.shape, cd, dev);
    const Shape vec{c};
    FT dgamma = k::empty(gamma ? vec : Shape{0}, cd, dev);
    FT dbeta = k::empty(gamma ? vec : Shape{0}, cd, dev);
    const auto r = static_cast<std::int64_t>(rows), n = static_cast<std::int64_t>(c);
    // A 16-bit gradient where the one-pass kernel does not read it: cast to x's dtype.
    const FT g = k::layer_norm_backward_reads(cd, grad.dtype, n, x.ptr(), grad.ptr(),
                                              gamma ? gamma->ptr() : nullptr, dx.ptr())
                     ? grad
                     : k::cast(grad, cd);
    auto scratch = gamma ? k::allocate(k::layer_norm_backward_scratch(cd, r, n), dev) : nullptr;
    // The addend joins the kernel's pass where it can (dense, x's dtype and shape, aligned).
    const bool fold =
        acc && acc->dtype == cd && acc->shape == x.shape && acc->is_contiguous() &&
        acc->device() == dev &&
        k::layer_norm_backward_adds(cd, g.dtype, n, x.ptr(), g.ptr(),
                                    gamma ? gamma->ptr() : nullptr, dx.ptr(), acc->ptr());
    k::launch_layer_norm_backward(
        cd, g.dtype, r, n, x.ptr(), g.ptr(), gamma ? gamma->ptr() : nullptr, mean.ptr(), rstd.ptr(),
        dx.ptr(), gamma ? dgamma.ptr() : nullptr, gamma ? dbeta.ptr() : nullptr,
        scratch ? scratch->data : nullptr, k::stream(dev), fold ? acc->ptr() : nullptr);
    if (acc && !fold) dx = k::binary(BinaryOp::Add, std::move(dx), *acc);
    return std::array<FT, 3>{std::move(dx), std::move(dgamma), std::move(dbeta)};
}
auto CudaBackend::float_add_layer_norm(FT x, FT residual, std::optional<FT> gamma,
                                       std::optional<FT> beta, double eps, std::optional<DType> out)
    -> std::optional<std::array<FT, 4>> {
    // EMBER_CUDA_ADD_LAYER_NORM=0 declines every call: the caller composes (to compare).
    static const bool enabled = [] {
        const char* v = std::getenv("EMBER_CUDA_ADD_LAYER_NORM");
        return v == nullptr || std::string_view(v) != "0";
    }();
    if (!enabled) return std::nullopt;
    const DType yd = out.value_or(x.dtype);
    if (x.dtype != DType::F32 || x.shape != residual.shape || x.shape.rank() == 0 ||
        !x.is_contiguous() || !residual.is_contiguous() || residual.device() != x.device())
        return std::nullopt;
    const std::size_t c = x.shape[x.shape.rank() - 1];
    for (const auto* p : {&gamma, &beta})
        if (*p && ((*p)->dtype != DType::F32 || !(*p)->is_contiguous() ||
                   (*p)->device() != x.device() || (*p)->num_elements() != c))
            return std::nullopt;
    if (!k::add_layer_norm_fits(residual.dtype, yd, static_cast<std::int64_t>(c), x.ptr(),
                                residual.ptr(), gamma ? gamma->ptr() : nullptr,
                                beta ? beta->ptr() : nullptr))
        return std::nullopt;
    const int dev = x.device();
    Shape stat_shape = x.shape;
    stat_shape[stat_shape.rank() - 1] = 1;
    FT sum = k::empty(x.shape, DType::F32, dev), y = k::empty(x.shape, yd, dev);
    FT mean = k::empty(stat_shape, DType::F32, dev), rstd = k::empty(stat_shape, DType::F32, dev);
    const auto cols = static_cast<std::int64_t>(c);
    k::launch_add_layer_norm(residual.dtype, yd, static_cast<std::int64_t>(x.num_elements()) / cols,
                             cols, x.ptr(), residual.ptr(), gamma ? gamma->ptr() : nullptr,
                             beta ? beta->ptr() : nullptr, eps, sum.ptr(), y.ptr(), mean.ptr(),
                             rstd.ptr(), k::stream(dev));
    return std::array<FT, 4>{std::move(sum), std::move(y), std::move(mean), std::move(rstd)};
}
auto CudaBackend::bool_argwhere(BT t) -> IT {
    return k::argwhere(std::move(t));
}

}  // namespace ember
