#include "ember/tensor/display.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace ember {
namespace {
std::mutex g_mu;
PrintOptions g_options;

std::string format_value(const TensorData& data, std::size_t i, const PrintOptions& o) {
    char buf[64];
    const DType dt = data.dtype();
    const double v = data.value(i);
    if (dt == DType::Bool) return v != 0 ? "true" : "false";
    if (!is_float(dt)) {
        // Read the integer itself: through a double, int64 values above 2^53 would round.
        const auto iv = detail::visit_dtype(dt, [&]<typename S>(detail::TypeTag<S>) {
            return detail::elem_cast<long long>(reinterpret_cast<const S*>(data.bytes().data())[i]);
        });
        std::snprintf(buf, sizeof buf, "%lld", iv);
        return buf;
    }
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (o.precision) {
        std::snprintf(buf, sizeof buf, "%.*f", *o.precision, v);
        return buf;
    }
    // Shortest digits that read back as the same element, laid out as Rust's `{:?}` (Burn's
    // format): positional for 1e-4 <= |v| < 1e16 with ".0" on whole numbers ("100000.0",
    // "0.001"), exponential otherwise ("1e-5", "1.5e16").
    const auto res = dt == DType::F64
                         ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific)
                         : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v),
                                         std::chars_format::scientific);
    const std::string sci(buf, res.ptr);  // [-]d[.ddd]e(+|-)xx
    const std::size_t e = sci.find('e');
    const bool neg = sci[0] == '-';
    std::string digits;
    for (std::size_t k = neg ? 1 : 0; k < e; ++k)
        if (sci[k] != '.') digits += sci[k];
    const int exp10 = std::atoi(sci.c_str() + e + 1);
    // The range test is made in the element's own precision (0.0001f is below 1e-4 as a double).
    const bool positional = dt == DType::F64
                                ? (v == 0 || (std::fabs(v) >= 1e-4 && std::fabs(v) < 1e16))
                                : (v == 0 || (std::fabs(static_cast<float>(v)) >= 1e-4f &&
                                              std::fabs(static_cast<float>(v)) < 1e16f));
    std::string s = neg ? "-" : "";
    if (positional) {
        if (exp10 < 0) {
            s += "0." + std::string(static_cast<std::size_t>(-exp10 - 1), '0') + digits;
        } else if (digits.size() <= static_cast<std::size_t>(exp10) + 1) {
            s += digits + std::string(static_cast<std::size_t>(exp10) + 1 - digits.size(), '0') + ".0";
        } else {
            s += digits.substr(0, static_cast<std::size_t>(exp10) + 1) + "." +
                 digits.substr(static_cast<std::size_t>(exp10) + 1);
        }
    } else {
        s += digits.substr(0, 1);
        if (digits.size() > 1) s += "." + digits.substr(1);
        s += "e" + std::to_string(exp10);
    }
    return s;
}

void format_rec(const TensorData& data, const PrintOptions& o, bool summarise, std::size_t dim,
                std::size_t offset, std::size_t indent, std::string& out) {
    const Shape& s = data.shape();
    if (dim == s.rank()) {
        out += format_value(data, offset, o);
        return;
    }
    std::size_t stride = 1;
    for (std::size_t d = dim + 1; d < s.rank(); ++d) stride *= s[d];
    out += '[';
    const std::size_t n = s[dim];
    const bool cut = summarise && n > 2 * o.edge_items;
    // As Burn: ", " between innermost elements, ",\n" plus indentation between the others (one
    // newline at every depth); a cut innermost dim reads "a, b, ..., y, z", a cut outer dim has
    // a line "..." without a comma.
    for (std::size_t i = 0; i < n; ++i) {
        if (cut && i == o.edge_items) {
            if (o.edge_items == 0) {
                out += "...";
                break;
            }
            if (dim + 1 == s.rank()) {
                out += "..., ";
            } else {
                out += "...\n";
                out.append(indent + 1, ' ');
            }
            i = n - o.edge_items;
        }
        format_rec(data, o, summarise, dim + 1, offset + i * stride, indent + 1, out);
        if (i + 1 < n) {
            out += ',';
            if (dim + 1 == s.rank()) {
                out += ' ';
            } else {
                out += '\n';
                out.append(indent + 1, ' ');
            }
        }
    }
    out += ']';
}
}  // namespace

void set_print_options(const PrintOptions& options) {
    std::lock_guard lock(g_mu);
    g_options = options;
}
PrintOptions print_options() {
    std::lock_guard lock(g_mu);
    return g_options;
}

namespace detail {
std::string format_data(const TensorData& data, const PrintOptions& options) {
    std::string out;
    if (data.shape().rank() == 0) return format_value(data, 0, options);
    format_rec(data, options, data.num_elements() > options.threshold, 0, 0, 0, out);
    return out;
}

std::string format_tensor(const TensorData& data, const std::string& device,
                          const std::string& backend, const char* kind,
                          const PrintOptions& options) {
    return cat_str("Tensor {\n  data:\n", format_data(data, options), ",\n  shape:  ",
                   data.shape().to_string(), ",\n  device:  ", device, ",\n  backend:  \"",
                   backend, "\",\n  kind:  \"", kind, "\",\n  dtype:  \"",
                   dtype_name(data.dtype()), "\",\n}");
}
}  // namespace detail
}  // namespace ember
