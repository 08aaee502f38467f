#pragma once
// What the record targets share: every tree a decoder accepts is walked to the last tensor byte
// (so a tensor whose byte count disagrees with its shape shows as a sanitizer report or a failed
// check) and read back into a typed struct, as loading a module or optimizer state does.
#include <ember/record/recorder.hpp>
#include <ember/record/serde.hpp>

#include <array>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz.hpp"

namespace ember::fuzz {

/// A record of the shapes that modules and optimizers save: scalars of each kind, an optional,
/// a fixed-size array, a map of tensors (a module's parameters) and a list of them (moments).
struct ProbeRecord {
    std::int64_t step = 0;
    double lr = 0;
    bool flag = false;
    std::string name;
    std::optional<float> clip;
    std::array<std::uint8_t, 2> pair{};
    std::int32_t small = 0;
    std::map<std::string, TensorData> params;
    std::vector<TensorData> moments;
    EMBER_RECORD(ProbeRecord, step, lr, flag, name, clip, pair, small, params, moments)
};

/// Reads every tensor byte of `v` and checks that the byte count matches shape and dtype.
inline std::uint64_t walk(const record::Value& v, int depth = 0) {
    if (depth > 10000) throw std::logic_error("fuzz: record tree deeper than any decoder allows");
    std::uint64_t sum = 0;
    if (const auto* t = std::get_if<TensorData>(&v.variant())) {
        if (t->bytes().size() != t->num_elements() * dtype_size(t->dtype()))
            throw std::logic_error("fuzz: a decoded tensor's bytes disagree with its shape");
        for (std::byte b : t->bytes()) sum += std::to_integer<unsigned>(b);
    } else if (const auto* l = std::get_if<record::List>(&v.variant())) {
        for (const auto& e : *l) sum += walk(e, depth + 1);
    } else if (const auto* m = std::get_if<record::Map>(&v.variant())) {
        for (const auto& [k, e] : *m) sum += k.size() + walk(e, depth + 1);
    } else if (const auto* s = std::get_if<std::string>(&v.variant())) {
        sum += s->size();
    }
    return sum;
}

/// Decodes `bytes` as `format`; what decodes is walked and read as a ProbeRecord.
inline void decode_record(Input bytes, record::detail::Format format) {
    refused_or_fine([&] {
        const record::Value tree = record::detail::decode(bytes, format, "fuzz");
        volatile std::uint64_t sink = walk(tree);
        (void)sink;
        refused_or_fine([&] { (void)record::from_value<ProbeRecord>(tree, "item"); });
    });
}

}  // namespace ember::fuzz
