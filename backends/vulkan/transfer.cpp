// Host ↔ device transfers (through the context's staging ring) and moves between devices.
#include <algorithm>
#include <cstring>

#include "../common/transaction.hpp"
#include "graph.hpp"
#include "kernels.hpp"

namespace ember::detail::vk {

VT from_data(const TensorData& data, DType dtype, std::uint32_t device) {
    forbid_in_capture("from_data");
    const Class c = class_of(dtype);
    // The device representation: f32 words, int64, or u32 0/1 for bools.
    const DType host = c == kF32 ? DType::F32 : (c == kI64 ? DType::I64 : DType::Bool);
    TensorData conv = data.dtype() == host ? TensorData() : data.convert(host);
    const TensorData& src = data.dtype() == host ? data : conv;
    VT t = empty(data.shape(), dtype, device);
    const std::size_t n = data.num_elements();
    if (n == 0) return t;
    Context& cx = ctx(t);
    if (c == kBool) {
        std::vector<std::uint32_t> words(n);
        const auto bytes = src.bytes();
        for (std::size_t i = 0; i < n; ++i) words[i] = bytes[i] != std::byte{0} ? 1u : 0u;
        cx.upload(words.data(), n * 4, bind(t, true));
    } else {
        cx.upload(src.bytes().data(), n * device_size(dtype), bind(t, true));
    }
    if (c == kI64) {  // index checks against these values then need no readback
        const auto v = src.as_slice<i64>();
        const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
        t.buffer->lo = *mn;
        t.buffer->hi = *mx;
    }
    if (c == kF32 && dtype != DType::F32 && dtype != DType::F64) return cast(std::move(t), dtype);
    if (c == kI64 && dtype != DType::I64) return cast(std::move(t), dtype);
    return t;
}

namespace {
// The host data of contiguous `t` from the device words `bytes` read of it.
TensorData host_data(const VT& t, std::vector<std::byte> bytes) {
    const std::size_t n = t.num_elements();
    if (class_of(t.dtype) == kBool) {
        std::vector<std::byte> flags(n);
        for (std::size_t i = 0; i < n; ++i) {
            std::uint32_t w;
            std::memcpy(&w, bytes.data() + 4 * i, 4);
            flags[i] = w ? std::byte{1} : std::byte{0};
        }
        return TensorData(std::move(flags), t.shape, DType::Bool);
    }
    TensorData d(std::move(bytes), t.shape, class_of(t.dtype) == kF32 ? DType::F32 : DType::I64);
    return d.dtype() == t.dtype ? d : d.convert(t.dtype);
}
// The binding of contiguous `t`'s elements.
Binding elements(const VT& t) {
    const std::size_t esz = device_size(t.dtype);
    Binding b = bind(t, false);
    b.offset += static_cast<VkDeviceSize>(t.offset) * esz;
    b.range = t.num_elements() * esz;
    return b;
}
}  // namespace

TensorData to_data(const VT& tensor) {
    forbid_in_capture("into_data (to_data, into_scalar)");
    const VT t = contiguous(tensor);
    std::vector<std::byte> bytes(t.num_elements() * device_size(t.dtype));
    if (!bytes.empty()) ctx(t).download(elements(t), bytes.data(), bytes.size());
    return host_data(t, std::move(bytes));
}

std::vector<TensorData> to_data_many(std::vector<VT> tensors) {
    forbid_in_capture("into_data (Transaction::execute)");
    for (VT& t : tensors) t = contiguous(t);
    std::vector<std::vector<std::byte>> bytes(tensors.size());
    // One download_many (one wait) per device the tensors live on.
    std::vector<bool> done(tensors.size(), false);
    for (std::size_t first = 0; first < tensors.size(); ++first) {
        if (done[first]) continue;
        std::vector<Binding> srcs;
        std::vector<void*> dsts;
        for (std::size_t i = first; i < tensors.size(); ++i) {
            if (done[i] || tensors[i].device != tensors[first].device) continue;
            done[i] = true;
            bytes[i].resize(tensors[i].num_elements() * device_size(tensors[i].dtype));
            if (bytes[i].empty()) continue;
            srcs.push_back(elements(tensors[i]));
            dsts.push_back(bytes[i].data());
        }
        if (!srcs.empty()) ctx(tensors[first]).download_many(srcs, dsts);
    }
    std::vector<TensorData> out;
    out.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i)
        out.push_back(host_data(tensors[i], std::move(bytes[i])));
    return out;
}

VT to_device(VT t, std::uint32_t device) {
    if (t.device == device) return t;
    return from_data(to_data(t), t.dtype, device);
}

std::vector<i64> read_ints(const VT& t) {
    return to_data(cast(t, DType::I64)).to_vec<i64>();
}

bool any_true(const VT& t) {
    if (t.num_elements() == 0) return false;
    return to_data(reduce_all(ReduceOp::Any, t)).to_vec<std::uint8_t>()[0] != 0;
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::float_to_device(FT t, const Device& d) -> FT {
    return k::to_device(std::move(t), d.resolved());
}
auto VulkanBackend::int_to_device(IT t, const Device& d) -> IT {
    return k::to_device(std::move(t), d.resolved());
}
auto VulkanBackend::bool_to_device(BT t, const Device& d) -> BT {
    return k::to_device(std::move(t), d.resolved());
}
auto VulkanBackend::float_from_data(const TensorData& data, const Device& d) -> FT {
    // As Burn: data enters as the backend's float type; `cast` makes other float dtypes.
    return k::from_data(data, DType::F32, d.resolved());
}
auto VulkanBackend::int_from_data(const TensorData& data, const Device& d) -> IT {
    return k::from_data(data, DType::I64, d.resolved());
}
auto VulkanBackend::bool_from_data(const TensorData& data, const Device& d) -> BT {
    return k::from_data(data, DType::Bool, d.resolved());
}
auto VulkanBackend::float_into_data(FT t) -> TensorData {
    return k::to_data(t);
}
auto VulkanBackend::int_into_data(IT t) -> TensorData {
    return k::to_data(t);
}
auto VulkanBackend::bool_into_data(BT t) -> TensorData {
    return k::to_data(t);
}
TransactionData VulkanBackend::tr_execute(TransactionPrimitive<FT, IT, BT> p) {
    return detail::read_transaction(std::move(p),
                                    [](auto all) { return k::to_data_many(std::move(all)); });
}

}  // namespace ember
