#pragma once
// Configs: aggregates that list their fields once with EMBER_CONFIG and get `with_<field>()`
// builders, JSON text and file round trips, and display. Defaults come from member
// initialisers; required fields come first so aggregate initialisation reads naturally:
// `LinearConfig{784, 128}.with_bias(false)`.
#include <string>
#include <string_view>
#if !EMBER_FREESTANDING  // firmware configs have their builders only: no JSON, files or streams
#include <ostream>
#endif

#include "../detail/fields.hpp"
#if !EMBER_FREESTANDING
#include "../detail/filesystem_fwd.hpp"
#endif
#include "../export.hpp"
#include "../record/serde.hpp"

namespace ember::config {

/// A type declared with EMBER_CONFIG.
template <typename T>
concept Config = ember::detail::HasFields<T> && requires { typename T::ember_config_tag; };

#if !EMBER_FREESTANDING
namespace detail {
/// A tree of plain values as JSON text (tensors and non-finite numbers are refused).
EMBER_API std::string value_to_json(const record::Value& value, bool pretty);
/// JSON text (an object) as a tree; FormatError naming `source` when malformed.
EMBER_API record::Value value_from_json(std::string_view text, std::string_view source);
/// Writes `text` to `path` atomically (temporary file, then rename).
EMBER_API void write_text(const std::filesystem::path& path, std::string_view text);
/// The file's bytes; FormatError naming the file when it cannot be read.
EMBER_API std::string read_text(const std::filesystem::path& path);
/// The path as error messages name it (path.string(), in the library: this header only
/// declares std::filesystem::path).
EMBER_API std::string path_string(const std::filesystem::path& path);
}  // namespace detail

/// The config as JSON text (pretty-printed with two-space indents when `pretty`).
template <Config C>
std::string to_json(const C& config, bool pretty = true) {
    return detail::value_to_json(record::to_value(config), pretty);
}
/// A config from JSON text; every field must be present and of its type (FormatError naming the
/// field otherwise). `source` names the text in error messages.
template <Config C>
C from_json(std::string_view text, std::string_view source = "config") {
    const record::Value tree = detail::value_from_json(text, source);
    try {
        return record::from_value<C>(tree);
    } catch (const FormatError& e) {
        EMBER_FAIL(Format, source, ": ", C::ember_type_name, ": ", e.what());
    }
}
/// Writes the config as pretty JSON, atomically (a temporary file renamed over `path`).
template <Config C>
void save(const C& config, const std::filesystem::path& path) {
    detail::write_text(path, to_json(config, true));
}
/// Reads a config written by save; FormatError naming the file and field on bad input.
template <Config C>
C load(const std::filesystem::path& path) {
    return from_json<C>(detail::read_text(path), detail::path_string(path));
}
#endif

}  // namespace ember::config

#define EMBER_DETAIL_CONFIG_WITH(Type, f)                       \
    /** A copy with this field set. */                          \
    Type with_##f(decltype(f) value) const {                    \
        Type c = *this;                                         \
        c.f = std::move(value);                                 \
        return c;                                               \
    }

/// Declares a config's fields (all of them, in order) and generates `with_<field>(value)` for
/// each, `to_json()`, `from_json(text)`, `save(path)`, `load(path)` and operator<< (JSON).
#define EMBER_CONFIG(Type, ...)                                                               \
    EMBER_DETAIL_FIELDS(Type __VA_OPT__(, ) __VA_ARGS__)                                      \
    using ember_config_tag = void;                                                            \
    __VA_OPT__(EMBER_FOR_EACH(EMBER_DETAIL_CONFIG_WITH, Type, __VA_ARGS__))                   \
    EMBER_DETAIL_CONFIG_HOSTED(Type)

#if EMBER_FREESTANDING
#define EMBER_DETAIL_CONFIG_HOSTED(Type)
#else
/// EMBER_CONFIG's JSON, file and stream members (none in firmware).
#define EMBER_DETAIL_CONFIG_HOSTED(Type)                                                      \
    /** The config as JSON text. */                                                           \
    template <typename Self = Type>                                                           \
    std::string to_json(bool pretty = true) const {                                           \
        return ::ember::config::to_json<Self>(*this, pretty);                                 \
    }                                                                                         \
    /** A config parsed from JSON text. */                                                    \
    template <typename Self = Type>                                                           \
    static Self from_json(std::string_view text) {                                            \
        return ::ember::config::from_json<Self>(text);                                        \
    }                                                                                         \
    /** Saves as pretty JSON (atomically). */                                                 \
    template <typename Self = Type>                                                           \
    void save(const std::filesystem::path& path) const {                                      \
        ::ember::config::save<Self>(*this, path);                                             \
    }                                                                                         \
    /** Loads a config saved by save(). */                                                    \
    template <typename Self = Type>                                                           \
    static Self load(const std::filesystem::path& path) {                                     \
        return ::ember::config::load<Self>(path);                                             \
    }                                                                                         \
    /** Prints the config as compact JSON. */                                                 \
    template <typename Self = Type>                                                           \
    friend std::ostream& operator<<(std::ostream& os, const Type& c) {                        \
        return os << ::ember::config::to_json<Self>(c, false);                                \
    }
#endif
