#pragma once
// Transaction<B>: Burn's Transaction, several tensors read back to the host in one round trip.
//
//   auto [loss, accuracy, preds] = ember::Transaction<B>{}
//       .register_(loss).register_(accuracy).register_(preds).execute_array<3>();
//
// On a GPU backend each `to_data()` waits for the device; a Transaction queues every copy and
// waits once (the backend hook `tr_execute`; on the CPU the reads are plain copies).
#include <array>
#include <cstddef>
#include <utility>
#include <vector>

#include "tensor.hpp"

namespace ember {

/// Tensors of any rank and kind on backend B, read together by execute().
template <Backend B>
class Transaction {
  public:
    /// Adds `t` (a handle copy; the tensor stays usable); its data comes back at this position.
    /// (`register` is a C++ keyword: spelled with a trailing underscore.)
    template <std::size_t D, TensorKind K>
    Transaction& register_(const Tensor<B, D, K>& t) & {
        auto& list = kind_list<K>();
        order_.push_back({kind_index<K>(), list.size()});
        list.push_back(t.primitive());
        return *this;
    }
    /// register_ on a temporary Transaction (`Transaction<B>{}.register_(a).register_(b)`).
    template <std::size_t D, TensorKind K>
    Transaction&& register_(const Tensor<B, D, K>& t) && {
        return std::move(register_(t));
    }
    /// How many tensors are registered.
    std::size_t size() const { return order_.size(); }
    /// Reads every registered tensor; their data in registration order. The Transaction is
    /// left empty (its handles were handed to the backend).
    std::vector<TensorData> execute() {
        TransactionData read = B::tr_execute(std::move(prims_));
        prims_ = {};
        std::vector<TensorData> out;
        out.reserve(order_.size());
        for (const auto& [kind, i] : order_) {
            auto& from = kind == 0 ? read.floats : kind == 1 ? read.ints : read.bools;
            out.push_back(std::move(from[i]));
        }
        order_.clear();
        return out;
    }
    /// execute() into an array of N, for structured bindings; throws ArgumentError unless
    /// exactly N tensors are registered (checked before anything is read).
    template <std::size_t N>
    std::array<TensorData, N> execute_array() {
        EMBER_CHECK(order_.size() == N, Argument, "Transaction::execute_array: ", order_.size(),
                    " tensors registered, ", N, " expected");
        auto v = execute();
        std::array<TensorData, N> out;
        for (std::size_t i = 0; i < N; ++i) out[i] = std::move(v[i]);
        return out;
    }

  private:
    using Prims =
        TransactionPrimitive<typename B::FloatTensorPrimitive, typename B::IntTensorPrimitive,
                             typename B::BoolTensorPrimitive>;
    template <TensorKind K>
    static constexpr int kind_index() {
        return std::same_as<K, Float> ? 0 : std::same_as<K, Int> ? 1 : 2;
    }
    template <TensorKind K>
    auto& kind_list() {
        if constexpr (std::same_as<K, Float>)
            return prims_.floats;
        else if constexpr (std::same_as<K, Int>)
            return prims_.ints;
        else
            return prims_.bools;
    }
    Prims prims_;
    std::vector<std::pair<int, std::size_t>> order_;  // (kind, index in its kind's list)
};

}  // namespace ember
