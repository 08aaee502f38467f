// Config JSON: record trees of plain values (maps, lists, numbers, strings, bools, nulls) to and
// from JSON text, with messages that name the file and the field.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ember/module/config.hpp"
#include "ember/record/recorder.hpp"
#include "ember/record/untrusted.hpp"

namespace ember::config::detail {
namespace {

constexpr int kMaxDepth = 256;

nlohmann::ordered_json to_json(const record::Value& v, std::string_view path, int depth) {
    EMBER_CHECK(depth < kMaxDepth, Argument, "config: nesting deeper than ", kMaxDepth, " at '",
                path, "'");
    return std::visit(
        [&](const auto& x) -> nlohmann::ordered_json {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::monostate>) {
                return nullptr;
            } else if constexpr (std::is_same_v<T, double>) {
                EMBER_CHECK(std::isfinite(x), Argument, "config: '", path, "' = ", x,
                            " cannot be written as JSON (not finite)");
                return x;
            } else if constexpr (std::is_same_v<T, TensorData>) {
                EMBER_FAIL(Argument, "config: '", path,
                           "' is a tensor; configs hold plain values (save tensors in records)");
            } else if constexpr (std::is_same_v<T, record::List>) {
                auto out = nlohmann::ordered_json::array();
                for (std::size_t i = 0; i < x.size(); ++i)
                    out.push_back(to_json(x[i], record::Value::join_path(path, std::to_string(i)),
                                          depth + 1));
                return out;
            } else if constexpr (std::is_same_v<T, record::Map>) {
                auto out = nlohmann::ordered_json::object();
                for (const auto& [k, e] : x)
                    out[k] = to_json(e, record::Value::join_path(path, k), depth + 1);
                return out;
            } else {
                return x;  // bool, int64, string
            }
        },
        v.variant());
}

record::Value from_json(const nlohmann::ordered_json& j, std::string_view source, int depth) {
    EMBER_CHECK(depth < kMaxDepth, Format, source, ": JSON nested deeper than ", kMaxDepth);
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null: return {};
        case nlohmann::ordered_json::value_t::boolean: return j.get<bool>();
        case nlohmann::ordered_json::value_t::number_integer: return j.get<std::int64_t>();
        case nlohmann::ordered_json::value_t::number_unsigned: {
            const auto u = j.get<std::uint64_t>();
            EMBER_CHECK(u <= std::uint64_t(std::numeric_limits<std::int64_t>::max()), Format,
                        source, ": integer ", u, " is too large");
            return std::int64_t(u);
        }
        case nlohmann::ordered_json::value_t::number_float: return j.get<double>();
        case nlohmann::ordered_json::value_t::string: return j.get<std::string>();
        case nlohmann::ordered_json::value_t::array: {
            record::List out;
            for (const auto& e : j) out.push_back(from_json(e, source, depth + 1));
            return out;
        }
        case nlohmann::ordered_json::value_t::object: {
            record::Map out;
            for (const auto& [k, e] : j.items()) out.emplace_back(k, from_json(e, source, depth + 1));
            return out;
        }
        default: EMBER_FAIL(Format, source, ": unsupported JSON value");
    }
}

}  // namespace

std::string value_to_json(const record::Value& value, bool pretty) {
    const auto j = to_json(value, "", 0);
    return pretty ? j.dump(2) + "\n" : j.dump();
}

record::Value value_from_json(std::string_view text, std::string_view source) {
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
        // parse_error, and out_of_range for a number beyond double ("1e999";
        // tests/fuzz/crashes/config)
        EMBER_FAIL(Format, record::printable(source), ": not valid JSON (",
                   record::printable(e.what()), ")");
    }
    EMBER_CHECK(j.is_object(), Format, source, ": a config must be a JSON object, found ",
                j.type_name());
    return from_json(j, source, 0);
}

void write_text(const std::filesystem::path& path, std::string_view text) {
    record::detail::write_bytes_atomic(
        path, {reinterpret_cast<const std::byte*>(text.data()), text.size()}, "config");
}

std::string read_text(const std::filesystem::path& path) {
    auto bytes = record::detail::read_bytes(path, "config");
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string path_string(const std::filesystem::path& path) {
    return path.string();
}

}  // namespace ember::config::detail
