// safetensors: the header is JSON (nlohmann), the body raw little-endian bytes. The checks follow
// the format's rules: a header length that fits the file, a JSON object whose entries each have
// a known dtype, a shape and [begin, end) offsets, sizes that agree with the shapes, and offsets
// that tile the body exactly (sorted, no holes, no overlap, nothing left over).
#include "ember/record/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "codec.hpp"

namespace ember::record {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors bodies are little-endian; big-endian hosts would need byte swaps");

constexpr std::string_view kFormat = "safetensors";
constexpr std::string_view kMetadataKey = "__metadata__";
// The reference implementation refuses headers above 100 MB: a hostile length must not make
// us allocate it.
constexpr std::uint64_t kMaxHeader = 100'000'000;

struct DTypeName {
    DType dtype;
    std::string_view name;
};
constexpr DTypeName kDTypes[] = {{DType::F64, "F64"},   {DType::F32, "F32"}, {DType::F16, "F16"},
                                 {DType::BF16, "BF16"}, {DType::I64, "I64"}, {DType::I32, "I32"},
                                 {DType::I16, "I16"},   {DType::I8, "I8"},   {DType::U8, "U8"},
                                 {DType::Bool, "BOOL"}};

std::string_view name_of(DType d) {
    for (const auto& e : kDTypes)
        if (e.dtype == d) return e.name;
    EMBER_FAIL(Argument, "safetensors: dtype ", dtype_name(d), " has no code");
}

}  // namespace

const TensorData* SafetensorsFile::find(std::string_view name) const {
    for (const auto& [n, t] : tensors)
        if (n == name) return &t;
    return nullptr;
}

std::vector<std::byte> encode_safetensors(const SafetensorsFile& file) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!file.metadata.empty()) {
        nlohmann::ordered_json meta = nlohmann::ordered_json::object();
        for (const auto& [k, v] : file.metadata) meta[k] = v;
        header[std::string(kMetadataKey)] = std::move(meta);
    }
    std::uint64_t offset = 0;
    for (const auto& [name, t] : file.tensors) {
        EMBER_CHECK(name != kMetadataKey, Argument,
                    "safetensors: a tensor may not be called '__metadata__'");
        EMBER_CHECK(!header.contains(name), Argument, "safetensors: the name '", name,
                    "' is used twice");
        const std::uint64_t size = t.bytes().size();
        const auto dims = t.shape().dims();
        header[name] = {{"dtype", name_of(t.dtype())},
                        {"shape", std::vector<std::uint64_t>(dims.begin(), dims.end())},
                        {"data_offsets", {offset, offset + size}}};
        offset += size;
    }
    std::string text = header.dump();
    // Padded with spaces to a multiple of 8, so that the body starts aligned (as the reference
    // writer does).
    text.append((8 - (8 + text.size()) % 8) % 8, ' ');
    std::vector<std::byte> out(8 + text.size() + offset);
    const std::uint64_t n = text.size();
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, text.data(), text.size());
    std::byte* body = out.data() + 8 + text.size();
    for (const auto& [name, t] : file.tensors) {
        std::memcpy(body, t.bytes().data(), t.bytes().size());
        body += t.bytes().size();
    }
    return out;
}

SafetensorsFile decode_safetensors(std::span<const std::byte> bytes, std::string_view source) {
    const detail::Source src{source, kFormat};
    if (bytes.size() < 8)
        src.fail("the file has ", bytes.size(), " bytes, fewer than the 8 of its header length");
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    if (n > kMaxHeader) src.fail("the header claims ", n, " bytes (at most ", kMaxHeader, ")");
    if (n > bytes.size() - 8)
        src.fail("the header claims ", n, " bytes but only ", bytes.size() - 8, " follow");
    const auto* text = reinterpret_cast<const char*>(bytes.data() + 8);
    // A key given twice would silently keep the last value: JSON leaves that undefined, and
    // two readers could see two different tensors. Every object's keys are tracked while parsing.
    std::vector<std::vector<std::string>> keys;  // one list per object being parsed
    std::string duplicate;
    auto on_event = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (event == E::object_start) {
            keys.emplace_back();
        } else if (event == E::object_end && !keys.empty()) {
            keys.pop_back();
        } else if (event == E::key && !keys.empty() && parsed.is_string()) {
            auto& seen = keys.back();
            const auto& k = parsed.get_ref<const std::string&>();
            if (std::find(seen.begin(), seen.end(), k) != seen.end()) {
                if (duplicate.empty()) duplicate = k;
            } else {
                seen.push_back(k);
            }
        }
        return true;
    };
    nlohmann::json header = nlohmann::json::parse(text, text + n, on_event, false);
    if (header.is_discarded() || !header.is_object()) src.fail("the header is not a JSON object");
    if (!duplicate.empty())
        src.fail("the header names '", printable(duplicate),
                 "' twice in one object (which of the two is meant is undefined)");
    const std::span<const std::byte> body = bytes.subspan(8 + n);

    struct Entry {
        std::string name;
        DType dtype;
        std::vector<std::uint64_t> dims;
        std::uint64_t begin, end;
    };
    std::vector<Entry> entries;
    SafetensorsFile out;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        const auto& v = it.value();
        if (name == kMetadataKey) {
            if (!v.is_object()) src.fail("__metadata__ is not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    src.fail("__metadata__ '", printable(m.key()), "' is not a string");
                out.metadata.emplace_back(m.key(), m.value().get<std::string>());
            }
            continue;
        }
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
            !v.contains("data_offsets"))
            src.fail("tensor '", printable(name), "' lacks dtype, shape or data_offsets");
        const auto& dt = v["dtype"];
        if (!dt.is_string())
            src.fail("tensor '", printable(name), "' has a dtype that is not a string");
        const std::string dname = dt.get<std::string>();
        const auto* known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                         [&](const DTypeName& d) { return d.name == dname; });
        if (known == std::end(kDTypes))
            src.fail(
                "tensor '", printable(name), "' has dtype ", printable(dname),
                ", which ember does not have (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
        Entry e{name, known->dtype, {}, 0, 0};
        const auto& shape = v["shape"];
        if (!shape.is_array())
            src.fail("tensor '", printable(name), "' has a shape that is not a list");
        for (const auto& d : shape) {
            if (!d.is_number_unsigned())
                src.fail("tensor '", printable(name),
                         "' has a dim that is not a non-negative integer");
            e.dims.push_back(d.get<std::uint64_t>());
        }
        const auto& off = v["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
            !off[1].is_number_unsigned())
            src.fail("tensor '", printable(name),
                     "' has data_offsets that are not two non-negative integers");
        e.begin = off[0].get<std::uint64_t>();
        e.end = off[1].get<std::uint64_t>();
        if (e.begin > e.end || e.end > body.size())
            src.fail("tensor '", printable(name), "' has bytes [", e.begin, ", ", e.end,
                     ") outside the body of ", body.size(), " bytes");
        entries.push_back(std::move(e));
    }
    // The ranges must tile the body: sorted by offset, each starting where the last ended.
    std::vector<const Entry*> order;
    for (const auto& e : entries) order.push_back(&e);
    std::sort(order.begin(), order.end(),
              [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
    std::uint64_t at = 0;
    for (const Entry* e : order) {
        if (e->begin != at)
            src.fail("tensor '", printable(e->name), "' starts at byte ", e->begin, " where ", at,
                     " was expected (the ranges overlap or leave a hole)");
        at = e->end;
    }
    if (at != body.size())
        src.fail("the tensors cover ", at, " of the body's ", body.size(), " bytes");
    // File order is body order (JSON objects keep no order of their own).
    for (const Entry* e : order) {
        const auto part = body.subspan(e->begin, e->end - e->begin);
        try {
            out.tensors.emplace_back(e->name, detail::make_tensor(e->dtype, e->dims, part, src));
        } catch (const FormatError& err) {
            EMBER_FAIL(Format, err.what(), " (tensor '", printable(e->name), "')");
        }
    }
    return out;
}

void save_safetensors(const SafetensorsFile& file, const std::filesystem::path& path) {
    detail::write_bytes_atomic(path, encode_safetensors(file), "safetensors file");
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
    return decode_safetensors(detail::read_bytes(path, "safetensors file"), path.string());
}

}  // namespace ember::record
