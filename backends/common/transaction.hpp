#pragma once
// A Transaction read in one pass, for backends whose float, int and bool tensors are one type:
// every tensor goes to the backend's `read_many` at once (so a GPU backend waits for the device
// once), and the data come back sorted into the kinds they were registered as.
#include <iterator>
#include <utility>
#include <vector>

#include <ember/tensor/backend.hpp>

namespace ember::detail {

template <typename T, typename ReadMany>
TransactionData read_transaction(TransactionPrimitive<T, T, T> p, ReadMany read_many) {
    const std::size_t nf = p.floats.size(), ni = p.ints.size();
    std::vector<T> all = std::move(p.floats);
    all.insert(all.end(), std::make_move_iterator(p.ints.begin()),
               std::make_move_iterator(p.ints.end()));
    all.insert(all.end(), std::make_move_iterator(p.bools.begin()),
               std::make_move_iterator(p.bools.end()));
    std::vector<TensorData> data = read_many(std::move(all));
    TransactionData out;
    for (std::size_t i = 0; i < data.size(); ++i)
        (i < nf ? out.floats : i < nf + ni ? out.ints : out.bools).push_back(std::move(data[i]));
    return out;
}

}  // namespace ember::detail
