#pragma once
// The collective ops on tensors: every rank of a group calls the same function with a tensor of
// the same shape and gets the result as a new tensor on the device its input was on.
//
//   using namespace ember::collective;
//   auto g = all_reduce(comm, grad, ReduceOp::Mean);   // the mean over ranks
//   auto w = broadcast(comm, weights, 0);               // rank 0's weights everywhere
//   auto all = all_gather(comm, x);                     // [W·n, ...]: every rank's x, by rank
//   auto part = reduce_scatter(comm, y);                // [n/W, ...]: rank r's share of the sum
//
// Tensors whose memory the backend lends (Backend::lend_memory) and the endpoint accepts are
// passed in place (CUDA tensors to NCCL, on the backend's stream, without waiting; a fusion
// backend computes pending values first and lends its inner backend's memory); the others make
// a round trip through host memory. On an autodiff backend the op runs on the inner tensor: a
// collective is never part of a graph.
// Integer tensors reduce too (a mean rounds toward zero); bool tensors do not.
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "../tensor/tensor.hpp"
#include "collective.hpp"

namespace ember::collective {

namespace detail {

/// The memory an endpoint may be handed in place, as the collective layer names it.
inline Memory memory_of(MemorySpace s) {
    return s == MemorySpace::Cuda ? Memory::Cuda : Memory::Host;
}

/// An autodiff backend over another one (Autodiff<B>): its tensors go through their inner
/// backend's. Not ember::Dispatch, whose inner backend is itself: its tensors, on a device with
/// or without autodiff, go through host memory as they are.
template <typename B>
concept AutodiffWrapper = AutodiffBackend<B> && !std::same_as<InnerBackend<B>, B>;

/// Asks the backend to lend `p`'s memory (Backend::lend_memory) when the endpoint accepts that
/// memory: a Buffer over it, or nullopt (the caller goes through host memory).
template <Backend B, typename P>
std::optional<Buffer> lent_buffer(Collective& c, P& p, const Shape& shape, DType dtype) {
    const std::optional<LentMemory> m = B::lend_memory(p);
    if (!m || !c.accepts(memory_of(m->space))) return std::nullopt;
    return Buffer{m->data, shape, dtype, memory_of(m->space), m->device};
}

/// Runs `fn(input, output)` on `t`'s elements and an output of `out_shape` (in place when
/// `in_place`: output = input), on the device when the backend lends its memory and the
/// endpoint accepts it.
template <Backend B, std::size_t D, typename K, typename Fn>
Tensor<B, D, K> run(Collective& c, Tensor<B, D, K> t, const Shape& out_shape, bool in_place,
                    Fn&& fn) {
    static_assert(!std::same_as<K, Bool>, "ember::collective: bool tensors cannot be reduced");
    if constexpr (AutodiffWrapper<B>) {
        return Tensor<B, D, K>::from_inner(
            run(c, t.inner(), out_shape, in_place, std::forward<Fn>(fn)));
    } else {
        using T = Tensor<B, D, K>;
        const Device<B> device = t.device();
        const Shape shape = t.shape();
        const DType dtype = t.dtype();
        auto p = std::move(t).into_primitive();
        if (const auto in = lent_buffer<B>(c, p, shape, dtype)) {
            if (in_place) {
                fn(*in, *in);
                return T::from_primitive(std::move(p));
            }
            auto out = T::empty(out_shape, device);
            if constexpr (std::same_as<K, Float>) out = out.cast(dtype);
            auto q = std::move(out).into_primitive();
            const auto o = lent_buffer<B>(c, q, out_shape, dtype);
            EMBER_CHECK(o.has_value(), Argument,
                        "collective: the backend lent the input's memory but not the output's");
            fn(*in, *o);
            return T::from_primitive(std::move(q));
        }
        TensorData data = T::from_primitive(std::move(p)).into_data();
        const Buffer in{data.bytes_mut().data(), data.shape(), data.dtype()};
        if (in_place) {
            fn(in, in);
            return T::from_data(data, device);
        }
        TensorData out(std::vector<std::byte>(out_shape.num_elements() * dtype_size(data.dtype())),
                       out_shape, data.dtype());
        fn(in, Buffer{out.bytes_mut().data(), out_shape, data.dtype()});
        return T::from_data(out, device);
    }
}

/// `s` with its first dim multiplied (`mul`) or divided (floor) by `n`.
inline Shape scale_dim0(Shape s, std::size_t n, bool mul) {
    s[0] = mul ? s[0] * n : s[0] / n;
    return s;
}

}  // namespace detail

/// The reduction over ranks of every rank's `t` (same shape and dtype on every rank).
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> all_reduce(Collective& c, Tensor<B, D, K> t, ReduceOp op = ReduceOp::Sum) {
    const Shape s = t.shape();
    return detail::run(c, std::move(t), s, true,
                       [&](const Buffer& in, const Buffer&) { c.all_reduce(in, op); });
}

/// An all-reduce started by all_reduce_async.
template <Backend B, std::size_t D, typename K>
class PendingAllReduce {
  public:
    /// Wraps a started op and what makes its result tensor once it is done.
    PendingAllReduce(std::unique_ptr<Work> work, std::function<Tensor<B, D, K>()> result)
        : result_(std::move(result)), work_(std::move(work)) {}
    /// The reduction over ranks, once the op is done (throws its error).
    Tensor<B, D, K> wait() && {
        work_->wait();
        return result_();
    }

  private:
    // The buffer (held by result_) outlives the op: work_, declared last, goes first, and an
    // op that was never waited for is finished (or ordered) by its destructor.
    std::function<Tensor<B, D, K>()> result_;
    std::unique_ptr<Work> work_;
};

/// Starts the reduction over ranks of `t` (Collective::all_reduce_async: it may run beside the
/// caller's later work) and returns at once; wait() gives the result. Every rank starts the
/// same all-reduces in the same order.
template <Backend B, std::size_t D, typename K>
PendingAllReduce<B, D, K> all_reduce_async(Collective& c, Tensor<B, D, K> t,
                                           ReduceOp op = ReduceOp::Sum) {
    static_assert(!std::same_as<K, Bool>, "ember::collective: bool tensors cannot be reduced");
    if constexpr (detail::AutodiffWrapper<B>) {
        auto inner = std::make_shared<PendingAllReduce<InnerBackend<B>, D, K>>(
            all_reduce_async(c, t.inner(), op));
        return {std::make_unique<detail::DoneWork>(),
                [inner] { return Tensor<B, D, K>::from_inner(std::move(*inner).wait()); }};
    } else {
        using T = Tensor<B, D, K>;
        const Shape shape = t.shape();
        const DType dtype = t.dtype();
        auto p = std::move(t).into_primitive();
        if (const auto in = detail::lent_buffer<B>(c, p, shape, dtype)) {
            auto work = c.all_reduce_async(*in, op);  // reduced in place
            auto result = std::make_shared<T>(T::from_primitive(std::move(p)));
            return {std::move(work), [result] { return *result; }};
        }
        t = T::from_primitive(std::move(p));
        const Device<B> device = t.device();
        auto data = std::make_shared<TensorData>(std::move(t).into_data());
        auto work =
            c.all_reduce_async(Buffer{data->bytes_mut().data(), data->shape(), data->dtype()}, op);
        return {std::move(work),
                [data, device] { return Tensor<B, D, K>::from_data(*data, device); }};
    }
}

/// Rank `root`'s `t` on every rank (every rank passes a tensor of the same shape).
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> broadcast(Collective& c, Tensor<B, D, K> t, std::size_t root) {
    const Shape s = t.shape();
    return detail::run(c, std::move(t), s, true,
                       [&](const Buffer& in, const Buffer&) { c.broadcast(in, root); });
}

/// Every rank's `t` concatenated along dim 0 in rank order: [world_size · n, ...].
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> all_gather(Collective& c, Tensor<B, D, K> t) {
    const Shape s = detail::scale_dim0(t.shape(), c.world_size(), true);
    return detail::run(c, std::move(t), s, false,
                       [&](const Buffer& in, const Buffer& out) { c.all_gather(in, out); });
}

/// Rank r's share of the reduction: dim 0 of `t` (a multiple of the world size) split into
/// world_size equal parts, part r reduced over ranks: [n / world_size, ...].
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> reduce_scatter(Collective& c, Tensor<B, D, K> t, ReduceOp op = ReduceOp::Sum) {
    const Shape s = detail::scale_dim0(t.shape(), c.world_size(), false);
    return detail::run(c, std::move(t), s, false,
                       [&](const Buffer& in, const Buffer& out) { c.reduce_scatter(in, out, op); });
}

}  // namespace ember::collective
