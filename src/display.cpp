#include "ember/tensor/display.hpp"

#include <cmath>
#include <cstdio>
#include <mutex>

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
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
        return buf;
    }
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (o.precision) {
        std::snprintf(buf, sizeof buf, "%.*f", *o.precision, v);
        return buf;
    }
    // Shortest form that reads back as the same element, with ".0" on whole numbers.
    const int digits = dt == DType::F64 ? 17 : (dt == DType::F32 ? 9 : 5);
    for (int p = 1; p <= digits; ++p) {
        std::snprintf(buf, sizeof buf, "%.*g", p, v);
        const double back = std::strtod(buf, nullptr);
        const bool same = dt == DType::F64 ? back == v
                                           : static_cast<float>(back) == static_cast<float>(v);
        if (same) break;
    }
    std::string s = buf;
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
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
    for (std::size_t i = 0; i < n; ++i) {
        if (cut && i == o.edge_items) {
            out += dim + 1 == s.rank() ? "..., " : "...,\n" + std::string(indent + 1, ' ');
            i = n - o.edge_items;
        }
        format_rec(data, o, summarise, dim + 1, offset + i * stride, indent + 1, out);
        if (i + 1 < n) {
            out += ',';
            if (dim + 1 == s.rank()) {
                out += ' ';
            } else {
                out.append(s.rank() - dim - 1, '\n');
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
