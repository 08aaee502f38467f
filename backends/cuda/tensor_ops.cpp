// Creation, transfer, views, data movement and elementwise ops of the CUDA backend. Views only
// rewrite shape, strides and offset; everything that moves data is one strided kernel launch,
// and elementwise results go into a moved-in input when its buffer is unique (as the CPU's).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "../common/transaction.hpp"
#include "graph.hpp"
#include "ops.hpp"

namespace ember::detail::cuda {

namespace {
/// A destination for a result of `shape` and `dtype`: `a`'s own buffer when it may be reused.
CudaTensor output_like(const CudaTensor& a, const Shape& shape, DType dtype) {
    if (a.is_unique() && a.shape == shape && a.dtype == dtype) return reuse(a);
    return empty_like_layout(a, shape, dtype);
}

CudaTensor to_compute(CudaTensor t, DType cd) {
    return t.dtype == cd ? t : cast(std::move(t), cd);
}

/// f16 or bf16: elementwise ops on them run the *_half kernels (f32 arithmetic in registers).
bool half_storage(DType d) {
    return d == DType::F16 || d == DType::BF16;
}

const char* binary_name(BinaryOp op) {
    return check::binary_op_name(op);
}
const char* compare_name(CompareOp op) {
    return check::compare_op_name(op);
}
bool is_reversed(BinaryOp op) {
    return op == BinaryOp::RSub || op == BinaryOp::RDiv || op == BinaryOp::RRem ||
           op == BinaryOp::RPow;
}

/// Throws `msg` when any int64 of `t` is zero (mode 1) or negative (mode 2). Waits for the
/// stream: integer division by zero must be an error, as on the CPU and in PyTorch.
void check_values(const CudaTensor& t, int mode, const char* op, const char* msg) {
    if (t.num_elements() == 0) return;
    auto flag = allocate(8, t.device());
    cudaStream_t s = stream(t.device());
    EMBER_CUDA_CHECK(cudaMemsetAsync(flag->data, 0, 8, s));
    const auto it = make_iter<1>(t.shape, {&t.strides});
    launch_check_range(it, static_cast<const std::int64_t*>(t.ptr()), 0, mode,
                       static_cast<int*>(flag->data), s);
    EMBER_CHECK(read_i64(flag->data, t.device(), op) == 0, Argument, op, msg);
}

void check_int_operand(BinaryOp op, const CudaTensor& divisor_or_exp) {
    if (op == BinaryOp::Div || op == BinaryOp::Rem || op == BinaryOp::RDiv || op == BinaryOp::RRem)
        check_values(divisor_or_exp, 1, binary_name(op), ": integer division by zero");
    if (op == BinaryOp::Pow || op == BinaryOp::RPow)
        check_values(divisor_or_exp, 2, "pow",
                     ": integers to negative integer powers are not allowed");
}

}  // namespace

// ---- creation and transfer -----------------------------------------------------------------
CudaTensor full(const Shape& shape, Scalar value, DType dtype, int device) {
    CudaTensor t = empty(shape, dtype, device);
    launch_fill(t.ptr(), dtype, static_cast<std::int64_t>(t.num_elements()), value, stream(device));
    return t;
}

CudaTensor from_data(const TensorData& data, DType dtype, int device) {
    forbid_in_capture("from_data");
    const auto gate = capture_gate();
    const TensorData conv = data.dtype() == dtype ? TensorData() : data.convert(dtype);
    const TensorData& src = data.dtype() == dtype ? data : conv;
    CudaTensor t = empty(src.shape(), dtype, device);
    if (t.num_elements() > 0)
        EMBER_CUDA_CHECK(cudaMemcpyAsync(t.ptr(), src.bytes().data(), src.bytes().size(),
                                         cudaMemcpyHostToDevice, stream(device)));
    if (dtype == DType::I64 && t.num_elements() > 0) {
        // Known bounds let index checks skip a readback (targets of a loss, say).
        const auto v = src.as_slice<std::int64_t>();
        const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
        t.storage->lo = *mn;
        t.storage->hi = *mx;
    }
    return t;
}

TensorData to_data(const CudaTensor& t0) {
    forbid_in_capture("into_data (to_data, into_scalar)");
    const auto gate = capture_gate();
    const CudaTensor t = contiguous(t0);
    std::vector<std::byte> bytes(t.num_elements() * dtype_size(t.dtype));
    if (!bytes.empty()) {
        cudaStream_t s = stream(t.device());
        EMBER_CUDA_CHECK(
            cudaMemcpyAsync(bytes.data(), t.ptr(), bytes.size(), cudaMemcpyDeviceToHost, s));
        synchronize(t.device());
    }
    return TensorData(std::move(bytes), t.shape, t.dtype);
}

std::vector<TensorData> to_data_many(std::vector<CudaTensor> tensors) {
    forbid_in_capture("into_data (Transaction::execute)");
    const auto gate = capture_gate();
    for (CudaTensor& t : tensors) t = contiguous(t);
    std::vector<std::vector<std::byte>> bytes(tensors.size());
    std::vector<bool> done(tensors.size(), false);
    // One read_many (one wait) per device the tensors live on.
    for (std::size_t first = 0; first < tensors.size(); ++first) {
        if (done[first]) continue;
        std::vector<const void*> src;
        std::vector<std::size_t> sizes;
        std::vector<std::byte*> dst;
        for (std::size_t i = first; i < tensors.size(); ++i) {
            if (done[i] || tensors[i].device() != tensors[first].device()) continue;
            done[i] = true;
            bytes[i].resize(tensors[i].num_elements() * dtype_size(tensors[i].dtype));
            if (bytes[i].empty()) continue;
            src.push_back(tensors[i].ptr());
            sizes.push_back(bytes[i].size());
            dst.push_back(bytes[i].data());
        }
        if (!src.empty()) read_many(tensors[first].device(), src, sizes, dst);
    }
    std::vector<TensorData> out;
    out.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i)
        out.emplace_back(std::move(bytes[i]), tensors[i].shape, tensors[i].dtype);
    return out;
}

void seed(std::uint64_t s) {
    seed_generator(s);
}

CudaTensor random(const Shape& shape, const Distribution& dist, DType dtype, int device) {
    check::random(dist);
    const DType gen = (dtype == DType::F64 || dtype == DType::I64) ? dtype
                      : is_float(dtype)                            ? DType::F32
                                                                   : DType::I64;
    CudaTensor t = empty(shape, gen, device);
    const RngDraw draw = next_draw(device);
    launch_random(t.ptr(), gen, static_cast<std::int64_t>(t.num_elements()), dist, draw.seed,
                  draw.counter, stream(device), draw.state);
    if (gen == DType::I64 && dist.kind == Distribution::Kind::Uniform) {
        t.storage->lo = static_cast<std::int64_t>(std::floor(dist.a));
        t.storage->hi = static_cast<std::int64_t>(std::ceil(dist.b)) - 1;  // draws are < b
    }
    return cast(std::move(t), dtype);
}

CudaTensor arange(std::int64_t start, std::int64_t end, std::int64_t step, int device) {
    // Checked in one place for every backend: INT64_MIN..INT64_MAX or a zero step is an error.
    const auto n = ember::detail::arange_length(start, end, step, "arange");
    CudaTensor t = empty(Shape{n}, DType::I64, device);
    launch_arange(static_cast<std::int64_t*>(t.ptr()), static_cast<std::int64_t>(n), start, step,
                  stream(device));
    if (n > 0) {
        // Known bounds, as from_data's: an index check on positions made by arange (a position
        // embedding's lookup) needs no readback, so a captured step may contain it.
        const std::int64_t last = start + static_cast<std::int64_t>(n - 1) * step;
        t.storage->lo = std::min(start, last);
        t.storage->hi = std::max(start, last);
    }
    return t;
}

/// `t` on `device` (a device-to-device copy when it is elsewhere).
CudaTensor to_device(CudaTensor t, int device) {
    if (t.device() == device) return t;
    t = contiguous(std::move(t));
    synchronize(t.device());  // the source's producers live on the other device's stream
    CudaTensor out = empty(t.shape, t.dtype, device);
    if (t.num_elements() > 0)
        EMBER_CUDA_CHECK(cudaMemcpyPeerAsync(out.ptr(), device, t.ptr(), t.device(),
                                             t.num_elements() * dtype_size(t.dtype),
                                             stream(device)));
    return out;
}

// ---- data movement -------------------------------------------------------------------------
CudaTensor cat(std::span<const CudaTensor> tensors, std::size_t dim) {
    const Shape out_shape = check::cat(check::operands(tensors), dim);
    const CudaTensor& first = tensors[0];
    for (const CudaTensor& t : tensors) check_same_device("cat", t, first);
    CudaTensor out = empty(out_shape, first.dtype, first.device());
    view::cat_into(out, tensors, dim, copy_into);
    return out;
}

CudaTensor slice_assign(CudaTensor t, std::span<const Slice> ranges, CudaTensor values) {
    const check::Region r = check::slice_assign(t, ranges, values);
    check_same_device("slice_assign", t, values);
    t = t.is_unique() ? reuse(std::move(t)) : fresh_copy(t);
    copy_into(view::region(t, ranges, r), values);
    return t;
}

CudaTensor flip(CudaTensor t, std::span<const std::size_t> axes) {
    const auto flipped = check::flip(t.shape, axes);
    CudaTensor out = empty(t.shape, t.dtype, t.device());
    if (out.num_elements() == 0) return out;
    // Reading through negative strides turns the flip into a plain strided copy.
    const CudaTensor src = view::flip(t, flipped);
    copy_into(out, src);
    return out;
}

CudaTensor repeat_dim(CudaTensor t, std::size_t dim, std::size_t times) {
    const Shape out_shape = check::repeat_dim(t.shape, dim, times);
    CudaTensor out = empty(out_shape, t.dtype, t.device());
    if (out.num_elements() == 0) return out;
    // One launch: the output viewed as [.., times, n, ..] reads t broadcast over `times`.
    CudaTensor dst = out, src = t;
    const std::size_t n = t.shape[dim];
    Shape s;
    Strides ds{}, ss{};
    for (std::size_t d = 0, j = 0; d < t.shape.rank(); ++d) {
        if (d == dim) {
            s.push_back(times);
            ds[j] = static_cast<std::int64_t>(n) * out.strides[d];
            ss[j] = 0;
            ++j;
        }
        s.push_back(t.shape[d]);
        ds[j] = out.strides[d];
        ss[j] = t.strides[d];
        ++j;
    }
    dst.shape = s;
    dst.strides = ds;
    src.shape = s;
    src.strides = ss;
    copy_into(dst, src);
    return out;
}

// ---- elementwise ---------------------------------------------------------------------------
CudaTensor unary(UnaryOp op, CudaTensor t) {
    if (op == UnaryOp::IsNan && !is_float(t.dtype))
        return full(t.shape, Scalar(false), DType::Bool, t.device());
    const DType result = t.dtype, cd = compute_dtype(t.dtype);
    check::unary_dtype(op, t.dtype);
    if (cd == DType::I64)
        EMBER_CHECK(op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sign ||
                        op == UnaryOp::Relu || op == UnaryOp::Not,
                    DType, "unary op ", static_cast<int>(op),
                    " is not defined for integer tensors");
    if (half_storage(t.dtype) && op != UnaryOp::IsNan) {
        CudaTensor out = output_like(t, t.shape, t.dtype);
        const auto it = make_elementwise_iter<2>(t.shape, {&out.strides, &t.strides});
        launch_unary_half(op, t.dtype, it, out.ptr(), t.ptr(), stream(t.device()));
        return out;
    }
    t = to_compute(std::move(t), cd);
    const DType od = op == UnaryOp::IsNan ? DType::Bool : cd;
    CudaTensor out = output_like(t, t.shape, od);
    const auto it = make_elementwise_iter<2>(t.shape, {&out.strides, &t.strides});
    launch_unary(op, cd, it, out.ptr(), t.ptr(), stream(t.device()));
    return op == UnaryOp::IsNan ? out : cast(std::move(out), result);
}

CudaTensor binary(BinaryOp op, CudaTensor a, CudaTensor b) {
    check_same_device(binary_name(op), a, b);
    const Shape shape = broadcast_shapes(a.shape, b.shape, check::binary_op_name(op, a.dtype));
    const DType result = promote(a.dtype, b.dtype), cd = compute_dtype(result);
    check::binary_dtype(op, result);
    // Both operands f16/bf16 of the result's dtype: the half kernels, no f32 copies.
    const bool half = half_storage(result) && a.dtype == result && b.dtype == result;
    // An f32 result of f32 and f16/bf16 operands of one shape (autocast's bf16 branch added to
    // an f32 stream): one kernel that reads the half as it is.
    if (result == DType::F32 && a.shape == b.shape && a.is_contiguous() && b.is_contiguous() &&
        ((a.dtype == DType::F32 && half_storage(b.dtype)) ||
         (half_storage(a.dtype) && b.dtype == DType::F32))) {
        CudaTensor& f = a.dtype == DType::F32 ? a : b;
        CudaTensor out = f.is_unique() ? reuse(f) : empty_like_layout(f, shape, DType::F32);
        const auto it = make_elementwise_iter<3>(shape, {&out.strides, &a.strides, &b.strides});
        if (launch_binary_mixed(op, it, out.ptr(), a.ptr(), a.dtype, b.ptr(), b.dtype,
                                stream(out.device())))
            return out;
    }
    if (!half) {
        a = to_compute(std::move(a), cd);
        b = to_compute(std::move(b), cd);
    }
    if (cd == DType::I64) check_int_operand(op, is_reversed(op) ? a : b);
    // Into a moved-in operand's buffer when one is unique and has the result's shape.
    const DType od = half ? result : cd;
    CudaTensor out = a.is_unique() && a.shape == shape   ? reuse(a)
                     : b.is_unique() && b.shape == shape ? reuse(b)
                     : a.shape == shape                  ? empty_like_layout(a, shape, od)
                                                         : empty_like_layout(b, shape, od);
    const Strides sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
    const auto it = make_elementwise_iter<3>(shape, {&out.strides, &sa, &sb});
    if (half) {
        launch_binary_half(op, od, it, out.ptr(), a.ptr(), b.ptr(), stream(out.device()));
        return out;
    }
    launch_binary(op, cd, it, out.ptr(), a.ptr(), b.ptr(), stream(out.device()));
    return cast(std::move(out), result);
}

CudaTensor binary_scalar(BinaryOp op, CudaTensor a, Scalar s) {
    const DType result = a.dtype, cd = compute_dtype(result);
    check::binary_dtype(op, result);
    if (half_storage(result)) {
        CudaTensor out = output_like(a, a.shape, result);
        const auto it = make_elementwise_iter<2>(a.shape, {&out.strides, &a.strides});
        launch_binary_scalar_half(op, result, it, out.ptr(), a.ptr(), s, stream(a.device()));
        return out;
    }
    a = to_compute(std::move(a), cd);
    if (cd == DType::I64) {
        EMBER_CHECK(!((op == BinaryOp::Div || op == BinaryOp::Rem) && s.i == 0), Argument,
                    binary_name(op), ": integer division by zero");
        EMBER_CHECK(!(op == BinaryOp::Pow && s.i < 0), Argument,
                    "pow: integers to negative integer powers are not allowed");
        if (op == BinaryOp::RDiv || op == BinaryOp::RRem || op == BinaryOp::RPow)
            check_int_operand(op, a);
    }
    CudaTensor out = output_like(a, a.shape, cd);
    const auto it = make_elementwise_iter<2>(a.shape, {&out.strides, &a.strides});
    launch_binary_scalar(op, cd, it, out.ptr(), a.ptr(), s, stream(a.device()));
    return cast(std::move(out), result);
}

CudaTensor compare(CompareOp op, CudaTensor a, CudaTensor b) {
    check_same_device(compare_name(op), a, b);
    const Shape shape = broadcast_shapes(a.shape, b.shape, compare_name(op));
    const DType cd = compute_dtype(promote(a.dtype, b.dtype));
    a = to_compute(std::move(a), cd);
    b = to_compute(std::move(b), cd);
    CudaTensor out = empty(shape, DType::Bool, a.device());
    const Strides sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
    const auto it = make_elementwise_iter<3>(shape, {&out.strides, &sa, &sb});
    launch_compare(op, cd, it, out.ptr(), a.ptr(), b.ptr(), stream(out.device()));
    return out;
}

CudaTensor compare_scalar(CompareOp op, CudaTensor a, Scalar s) {
    const DType cd = compute_dtype(a.dtype);
    a = to_compute(std::move(a), cd);
    CudaTensor out = empty(a.shape, DType::Bool, a.device());
    const auto it = make_elementwise_iter<2>(a.shape, {&out.strides, &a.strides});
    launch_compare_scalar(op, cd, it, out.ptr(), a.ptr(), s, stream(a.device()));
    return out;
}

/// mask ? a : b with broadcasting.
CudaTensor where(CudaTensor mask, CudaTensor a, CudaTensor b) {
    const Shape shape = check::mask_where(b, mask, a);  // mask_where(t = b, mask, value = a)
    check_same_device("mask_where", mask, a);
    check_same_device("mask_where", a, b);
    const DType result = promote(a.dtype, b.dtype), cd = compute_dtype(result);
    a = to_compute(std::move(a), cd);
    b = to_compute(std::move(b), cd);
    CudaTensor out = empty(shape, cd, a.device());
    const Strides sm = broadcast_strides(mask, shape), sa = broadcast_strides(a, shape),
                  sb = broadcast_strides(b, shape);
    const auto it = make_elementwise_iter<4>(shape, {&out.strides, &sm, &sa, &sb});
    launch_where(cd, it, out.ptr(), mask.ptr(), a.ptr(), b.ptr(), stream(out.device()));
    return cast(std::move(out), result);
}

CudaTensor mask_fill(CudaTensor t, CudaTensor mask, Scalar value) {
    check::mask_fill(t, mask);
    const Shape& shape = t.shape;
    // The value as a one-element tensor seen through stride-0 dims: one where() launch.
    CudaTensor v = full(Shape{1}, value, compute_dtype(t.dtype), t.device());
    v = expand(std::move(v), shape);
    const DType result = t.dtype;
    return cast(where(std::move(mask), std::move(v), std::move(t)), result);
}

CudaTensor clamp(CudaTensor t, Scalar lo, Scalar hi) {
    EMBER_CHECK(is_float(t.dtype) ? lo.f <= hi.f : lo.i <= hi.i, Argument, "clamp: min ", lo.f,
                " is greater than max ", hi.f);
    const DType result = t.dtype, cd = compute_dtype(t.dtype);
    t = to_compute(std::move(t), cd);
    CudaTensor out = output_like(t, t.shape, cd);
    const auto it = make_elementwise_iter<2>(t.shape, {&out.strides, &t.strides});
    launch_clamp(cd, it, out.ptr(), t.ptr(), lo, hi, stream(t.device()));
    return cast(std::move(out), result);
}

namespace {
/// An optimizer step's operands (one shape, checked by the caller) in the compute dtype, f32
/// for f16/bf16, which it returns, all laid out as the parameter (the first) is: contiguous, or
/// channels-last for a convolution's weight stored so; the kernels walk them flat. `op` names
/// the step in the error.
DType optimizer_operands(const char* op, std::initializer_list<CudaTensor*> ts) {
    const CudaTensor& first = **ts.begin();
    EMBER_CHECK(is_float(first.dtype), DType, op, ": needs float tensors, got ",
                dtype_name(first.dtype));
    const DType cd = compute_dtype(first.dtype);
    const bool cl = is_channels_last(first);
    for (CudaTensor* t : ts) *t = to_layout(to_compute(std::move(*t), cd), cl);
    return cd;
}
}  // namespace

std::array<CudaTensor, 3> adam_step(CudaTensor p, CudaTensor g, CudaTensor m, CudaTensor v,
                                    const AdamStepScalars& s) {
    EMBER_CHECK(p.shape == g.shape && p.shape == m.shape && p.shape == v.shape, Shape,
                "adam_step: param ", p.shape, ", grad ", g.shape, ", moments ", m.shape, " and ",
                v.shape, " must have one shape");
    const DType result = p.dtype, cd = optimizer_operands("adam_step", {&p, &g, &m, &v});
    // Inside a captured step the update is in place, as PyTorch's: the next replay reads the
    // parameter and moments where this one wrote them (graph.cpp).
    const double* replayed = adam_slot(p.device(), s);
    CudaTensor po = replayed ? reuse(p) : output_like(p, p.shape, cd),
               mo = replayed ? reuse(m) : output_like(m, p.shape, cd),
               vo = replayed ? reuse(v) : output_like(v, p.shape, cd);
    launch_adam(cd, static_cast<std::int64_t>(p.num_elements()), po.ptr(), mo.ptr(), vo.ptr(),
                p.ptr(), g.ptr(), m.ptr(), v.ptr(), s, stream(p.device()), replayed);
    return {cast(std::move(po), result), cast(std::move(mo), result), cast(std::move(vo), result)};
}

std::pair<CudaTensor, CudaTensor> sgd_step(CudaTensor p, CudaTensor g, CudaTensor v,
                                           const SgdStepScalars& s) {
    EMBER_CHECK(p.shape == g.shape && p.shape == v.shape, Shape, "sgd_step: param ", p.shape,
                ", grad ", g.shape, " and velocity ", v.shape, " must have one shape");
    const DType result = p.dtype, cd = optimizer_operands("sgd_step", {&p, &g, &v});
    // Inside a captured step the update is in place, as Adam's: the next replay reads the
    // parameter and velocity where this one wrote them, and its learning rate from the slot
    // the graph rewrites (graph.cpp; no bias corrections: they stay 1).
    const double* replayed = adam_slot(p.device(), AdamStepScalars{0.0, 0.0, 0.0, s.lr, 1.0, 1.0});
    CudaTensor po = replayed ? reuse(p) : output_like(p, p.shape, cd),
               vo = replayed ? reuse(v) : output_like(v, p.shape, cd);
    launch_sgd(cd, static_cast<std::int64_t>(p.num_elements()), po.ptr(), vo.ptr(), p.ptr(),
               g.ptr(), v.ptr(), s, stream(p.device()), replayed);
    return {cast(std::move(po), result), cast(std::move(vo), result)};
}

}  // namespace ember::detail::cuda

// ---- CudaBackend's ops on the functions above ----
namespace ember {
namespace k = detail::cuda;

auto CudaBackend::seed(std::uint64_t s) -> void {
    k::seed(s);
}
auto CudaBackend::float_from_data(const TensorData& data, const Device& d) -> FT {
    // As Burn: data enters as the backend's float type; `cast` makes other float dtypes.
    return k::from_data(data, DType::F32, k::ordinal(d));
}
auto CudaBackend::int_from_data(const TensorData& data, const Device& d) -> IT {
    return k::from_data(data, DType::I64, k::ordinal(d));
}
auto CudaBackend::bool_from_data(const TensorData& data, const Device& d) -> BT {
    return k::from_data(data, DType::Bool, k::ordinal(d));
}
auto CudaBackend::float_into_data(FT t) -> TensorData {
    return k::to_data(t);
}
auto CudaBackend::int_into_data(IT t) -> TensorData {
    return k::to_data(t);
}
auto CudaBackend::bool_into_data(BT t) -> TensorData {
    return k::to_data(t);
}
TransactionData CudaBackend::tr_execute(TransactionPrimitive<FT, IT, BT> p) {
    return detail::read_transaction(std::move(p),
                                    [](auto all) { return k::to_data_many(std::move(all)); });
}
auto CudaBackend::float_empty(const Shape& s, const Device& d) -> FT {
    return k::empty(s, DType::F32, k::ordinal(d));
}
auto CudaBackend::int_empty(const Shape& s, const Device& d) -> IT {
    return k::empty(s, DType::I64, k::ordinal(d));
}
auto CudaBackend::bool_empty(const Shape& s, const Device& d) -> BT {
    return k::empty(s, DType::Bool, k::ordinal(d));
}
auto CudaBackend::float_full(const Shape& s, Scalar v, const Device& d) -> FT {
    return k::full(s, v, DType::F32, k::ordinal(d));
}
auto CudaBackend::int_full(const Shape& s, Scalar v, const Device& d) -> IT {
    return k::full(s, v, DType::I64, k::ordinal(d));
}
auto CudaBackend::bool_full(const Shape& s, Scalar v, const Device& d) -> BT {
    return k::full(s, v, DType::Bool, k::ordinal(d));
}
auto CudaBackend::float_random(const Shape& s, const Distribution& dist, const Device& d) -> FT {
    return k::random(s, dist, DType::F32, k::ordinal(d));
}
auto CudaBackend::int_random(const Shape& s, const Distribution& dist, const Device& d) -> IT {
    return k::random(s, dist, DType::I64, k::ordinal(d));
}
auto CudaBackend::float_unary(UnaryOp op, FT t) -> FT {
    return k::unary(op, std::move(t));
}
auto CudaBackend::float_unary_backward(UnaryOp op, const FT& grad, const FT& v)
    -> std::optional<FT> {
    if (grad.shape != v.shape || grad.dtype != v.dtype || grad.device() != v.device())
        return std::nullopt;
    // Flat over both buffers, in v's layout (contiguous or channels-last): a gradient laid out
    // otherwise (a pooling's contiguous one reaching a channels-last activation) is relaid
    // first, so the result and what follows it keep the activation's layout.
    const bool v_cl = k::is_channels_last(v);
    if (!v_cl && !v.is_contiguous()) return std::nullopt;
    const FT g = k::to_layout_of(grad, v);
    FT out = k::empty_like_layout(v, v.shape, v.dtype);
    if (!k::launch_unary_backward(op, v.dtype, static_cast<std::int64_t>(v.num_elements()),
                                  out.ptr(), g.ptr(), v.ptr(), k::stream(v.device())))
        return std::nullopt;
    return out;
}
auto CudaBackend::int_unary(UnaryOp op, IT t) -> IT {
    return k::unary(op, std::move(t));
}
auto CudaBackend::bool_not(BT t) -> BT {
    return k::unary(UnaryOp::Not, std::move(t));
}
auto CudaBackend::float_binary(BinaryOp op, FT a, FT b) -> FT {
    return k::binary(op, std::move(a), std::move(b));
}
auto CudaBackend::int_binary(BinaryOp op, IT a, IT b) -> IT {
    return k::binary(op, std::move(a), std::move(b));
}
auto CudaBackend::bool_binary(BinaryOp op, BT a, BT b) -> BT {
    return k::binary(op, std::move(a), std::move(b));
}
auto CudaBackend::float_binary_scalar(BinaryOp op, FT a, Scalar s) -> FT {
    return k::binary_scalar(op, std::move(a), s);
}
auto CudaBackend::int_binary_scalar(BinaryOp op, IT a, Scalar s) -> IT {
    return k::binary_scalar(op, std::move(a), s);
}
auto CudaBackend::float_compare(CompareOp op, FT a, FT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
auto CudaBackend::int_compare(CompareOp op, IT a, IT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
auto CudaBackend::bool_compare(CompareOp op, BT a, BT b) -> BT {
    return k::compare(op, std::move(a), std::move(b));
}
auto CudaBackend::float_compare_scalar(CompareOp op, FT a, Scalar s) -> BT {
    return k::compare_scalar(op, std::move(a), s);
}
auto CudaBackend::int_compare_scalar(CompareOp op, IT a, Scalar s) -> BT {
    return k::compare_scalar(op, std::move(a), s);
}
auto CudaBackend::float_mask_where(FT t, BT mask, FT value) -> FT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
auto CudaBackend::int_mask_where(IT t, BT mask, IT value) -> IT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
auto CudaBackend::bool_mask_where(BT t, BT mask, BT value) -> BT {
    return k::where(std::move(mask), std::move(value), std::move(t));
}
auto CudaBackend::float_mask_fill(FT t, BT mask, Scalar v) -> FT {
    return k::mask_fill(std::move(t), std::move(mask), v);
}
auto CudaBackend::int_mask_fill(IT t, BT mask, Scalar v) -> IT {
    return k::mask_fill(std::move(t), std::move(mask), v);
}
auto CudaBackend::float_clamp(FT t, Scalar lo, Scalar hi) -> FT {
    return k::clamp(std::move(t), lo, hi);
}
auto CudaBackend::int_clamp(IT t, Scalar lo, Scalar hi) -> IT {
    return k::clamp(std::move(t), lo, hi);
}
auto CudaBackend::float_adam_step(FT param, FT grad, FT m, FT v, const AdamStepScalars& s)
    -> std::array<FT, 3> {
    return k::adam_step(std::move(param), std::move(grad), std::move(m), std::move(v), s);
}
auto CudaBackend::float_sgd_step(FT param, FT grad, FT velocity, const SgdStepScalars& s)
    -> std::pair<FT, FT> {
    return k::sgd_step(std::move(param), std::move(grad), std::move(velocity), s);
}
auto CudaBackend::float_reshape(FT t, const Shape& s) -> FT {
    return k::reshape(std::move(t), s);
}
auto CudaBackend::int_reshape(IT t, const Shape& s) -> IT {
    return k::reshape(std::move(t), s);
}
auto CudaBackend::bool_reshape(BT t, const Shape& s) -> BT {
    return k::reshape(std::move(t), s);
}
auto CudaBackend::float_permute(FT t, std::span<const std::size_t> axes) -> FT {
    return k::permute(std::move(t), axes);
}
auto CudaBackend::int_permute(IT t, std::span<const std::size_t> axes) -> IT {
    return k::permute(std::move(t), axes);
}
auto CudaBackend::bool_permute(BT t, std::span<const std::size_t> axes) -> BT {
    return k::permute(std::move(t), axes);
}
auto CudaBackend::float_expand(FT t, const Shape& s) -> FT {
    return k::expand(std::move(t), s);
}
auto CudaBackend::int_expand(IT t, const Shape& s) -> IT {
    return k::expand(std::move(t), s);
}
auto CudaBackend::bool_expand(BT t, const Shape& s) -> BT {
    return k::expand(std::move(t), s);
}
auto CudaBackend::float_slice(FT t, std::span<const Slice> r) -> FT {
    return k::slice(std::move(t), r);
}
auto CudaBackend::int_slice(IT t, std::span<const Slice> r) -> IT {
    return k::slice(std::move(t), r);
}
auto CudaBackend::bool_slice(BT t, std::span<const Slice> r) -> BT {
    return k::slice(std::move(t), r);
}
auto CudaBackend::float_slice_assign(FT t, std::span<const Slice> r, FT v) -> FT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
auto CudaBackend::int_slice_assign(IT t, std::span<const Slice> r, IT v) -> IT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
auto CudaBackend::bool_slice_assign(BT t, std::span<const Slice> r, BT v) -> BT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
auto CudaBackend::float_flip(FT t, std::span<const std::size_t> axes) -> FT {
    return k::flip(std::move(t), axes);
}
auto CudaBackend::int_flip(IT t, std::span<const std::size_t> axes) -> IT {
    return k::flip(std::move(t), axes);
}
auto CudaBackend::bool_flip(BT t, std::span<const std::size_t> axes) -> BT {
    return k::flip(std::move(t), axes);
}
auto CudaBackend::float_cat(std::vector<FT> ts, std::size_t dim) -> FT {
    return k::cat(ts, dim);
}
auto CudaBackend::int_cat(std::vector<IT> ts, std::size_t dim) -> IT {
    return k::cat(ts, dim);
}
auto CudaBackend::bool_cat(std::vector<BT> ts, std::size_t dim) -> BT {
    return k::cat(ts, dim);
}
auto CudaBackend::float_repeat_dim(FT t, std::size_t dim, std::size_t times) -> FT {
    return k::repeat_dim(std::move(t), dim, times);
}
auto CudaBackend::int_repeat_dim(IT t, std::size_t dim, std::size_t times) -> IT {
    return k::repeat_dim(std::move(t), dim, times);
}
auto CudaBackend::bool_repeat_dim(BT t, std::size_t dim, std::size_t times) -> BT {
    return k::repeat_dim(std::move(t), dim, times);
}
auto CudaBackend::float_into_int(FT t) -> IT {
    return k::cast(std::move(t), DType::I64);
}
auto CudaBackend::float_cast(FT t, DType d) -> FT {
    EMBER_CHECK(is_float(d), DType, "cast: float tensors cast to float dtypes, got ",
                dtype_name(d));
    return k::cast(std::move(t), d);
}
auto CudaBackend::int_into_float(IT t) -> FT {
    return k::cast(std::move(t), DType::F32);
}
auto CudaBackend::int_cast(IT t, DType d) -> IT {
    EMBER_CHECK(is_int(d), DType, "cast: int tensors cast to int dtypes, got ", dtype_name(d));
    return k::cast(std::move(t), d);
}
auto CudaBackend::bool_into_int(BT t) -> IT {
    return k::cast(std::move(t), DType::I64);
}
auto CudaBackend::bool_into_float(BT t) -> FT {
    return k::cast(std::move(t), DType::F32);
}
auto CudaBackend::int_arange(std::int64_t a, std::int64_t b, std::int64_t step, const Device& d)
    -> IT {
    return k::arange(a, b, step, k::ordinal(d));
}
auto CudaBackend::float_to_device(FT t, const Device& d) -> FT {
    return k::to_device(std::move(t), k::ordinal(d));
}
auto CudaBackend::int_to_device(IT t, const Device& d) -> IT {
    return k::to_device(std::move(t), k::ordinal(d));
}
auto CudaBackend::bool_to_device(BT t, const Device& d) -> BT {
    return k::to_device(std::move(t), k::ordinal(d));
}

}  // namespace ember
