// The op handlers: one function per ONNX operator (or family), each reading its node through
// NodeCtx and writing the C++ that computes its outputs. Shapes and index lists known at import
// time are folded here; anything the generated code could not do is refused here, with the
// node and the reason. This file: elementwise ops, shapes, reductions and the handler table;
// ops_layers.cpp: layers and the less common operators.
#include <ember/record/untrusted.hpp>
#include <ember/tensor/error.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops_common.hpp"

namespace ember::onnx::ops {

using Dims = std::vector<std::int64_t>;

std::string join(const std::vector<std::string>& v, std::string_view sep) {
    std::string s;
    for (std::size_t k = 0; k < v.size(); ++k) s += (k ? std::string(sep) : "") + v[k];
    return s;
}
std::string join_ints(const Dims& v) {
    std::vector<std::string> s;
    for (auto x : v) s.push_back(std::to_string(x));
    return join(s);
}
std::string r(std::size_t rank) { return std::to_string(rank); }
std::string model_text(std::string_view s) { return record::printable(s, 80); }

Value like(const Value& a, Kind k) {
    Value v;
    v.kind = k;
    v.rank = a.rank;
    v.scalar = a.scalar;
    v.dims = a.dims;
    return v;
}

Value like_value(const Value& a) { return like(a, Kind::Float); }

// ONNX's multidirectional broadcasting of static dims (-1 where unknown).
Dims broadcast(const Value& a, const Value& b) {
    const std::size_t n = std::max(a.rank, b.rank);
    Dims out(n, -1);
    for (std::size_t k = 0; k < n; ++k) {
        const auto da = k + a.rank >= n ? a.dims[k + a.rank - n] : 1;
        const auto db = k + b.rank >= n ? b.dims[k + b.rank - n] : 1;
        out[k] = da == 1 ? db : db == 1 ? da : (da == db ? da : (da < 0 || db < 0 ? -1 : -2));
    }
    return out;
}

Value broadcast_value(NodeCtx& c, const Value& a, const Value& b, Kind k) {
    Value v;
    v.kind = k;
    v.rank = std::max(a.rank, b.rank);
    v.scalar = a.scalar && b.scalar;
    v.dims = broadcast(a, b);
    for (auto d : v.dims)
        if (d == -2) c.fail("the inputs' shapes do not broadcast");
    return v;
}

std::string scalar_literal(double s, Kind k) {
    if (k == Kind::Float) return literal(s);
    return "static_cast<std::int64_t>(" + std::to_string(static_cast<long long>(s)) + ")";
}

// ---- elementwise -------------------------------------------------------------------------------

// a op b with ONNX broadcasting; a constant of one element stays a C++ scalar.

void arithmetic(NodeCtx& c, const char* op) {
    const Value &a = c.in(0), &b = c.in(1);
    // Shape arithmetic: integer lists known element by element stay so.
    if (a.kind == Kind::Int && b.kind == Kind::Int && a.rank == 1 && b.rank == 1 &&
        (a.elems || a.constant) && (b.elems || b.constant)) {
        auto ea = c.elems(0), eb = c.elems(1);
        if (ea && eb && (ea->size() == eb->size() || ea->size() == 1 || eb->size() == 1)) {
            const std::size_t n = std::max(ea->size(), eb->size());
            std::vector<std::string> out;
            for (std::size_t k = 0; k < n; ++k) {
                const std::string& x = (*ea)[ea->size() == 1 ? 0 : k];
                const std::string& y = (*eb)[eb->size() == 1 ? 0 : k];
                if (all_literal({x}) && all_literal({y})) {
                    const long long u = std::stoll(x), w = std::stoll(y);
                    const std::string o = op;
                    c.require(!(o == "/" && w == 0), "division by zero in shape arithmetic");
                    out.push_back(std::to_string(o == "+" ? u + w : o == "-" ? u - w : o == "*" ? u * w : u / w));
                } else {
                    out.push_back("(" + x + " " + op + " " + y + ")");
                }
            }
            return out_elems(c, 0, std::move(out), a.scalar && b.scalar);
        }
    }
    const Kind k = a.kind == Kind::Float || b.kind == Kind::Float ? Kind::Float : a.kind;
    c.require(a.kind != Kind::Bool && b.kind != Kind::Bool, "arithmetic on booleans");
    Value v = broadcast_value(c, a, b, k);
    std::string e;
    if (auto s = c.scalar(1); s && b.rank <= a.rank && !a.constant) {
        e = c.t_as(0, k) + " " + op + " " + scalar_literal(*s, k);
    } else if (auto s0 = c.scalar(0); s0 && a.rank <= b.rank && !b.constant) {
        e = scalar_literal(*s0, k) + " " + op + " " + c.t_as(1, k);
    } else {
        e = c.t_rank(0, v.rank) + (a.kind == k ? "" : ".float_()") + " " + op + " " +
            c.t_rank(1, v.rank) + (b.kind == k ? "" : ".float_()");
    }
    c.out(0, std::move(v), e);
}

void pow_op(NodeCtx& c) {
    const Value &a = c.in(0), &b = c.in(1);
    if (a.kind == Kind::Int) {  // through floats, exact for the integers floats hold
        Value v = broadcast_value(c, a, b, Kind::Int);
        c.out(0, std::move(v), "(" + c.t_rank(0, v.rank) + ".float_().powf(" + c.t_rank(1, v.rank) +
                                   (b.kind == Kind::Float ? "" : ".float_()") + ")).round().int_()");
        return;
    }
    Value v = broadcast_value(c, a, b, Kind::Float);
    if (auto s = c.scalar(1); s && b.rank <= a.rank)
        c.out(0, std::move(v), c.t(0) + ".powf_scalar(" + literal(*s) + ")");
    else
        c.out(0, std::move(v), c.t_rank(0, v.rank) + ".powf(" + c.t_rank(1, v.rank) +
                                   (b.kind == Kind::Float ? "" : ".float_()") + ")");
}

void compare(NodeCtx& c, const std::string& method) {
    const Value &a = c.in(0), &b = c.in(1);
    Value v = broadcast_value(c, a, b, Kind::Bool);
    const Kind k = a.kind == Kind::Float || b.kind == Kind::Float ? Kind::Float : a.kind;
    if (auto s = c.scalar(1); s && b.rank <= a.rank && a.kind != Kind::Bool && !a.constant) {
        c.out(0, std::move(v), c.t_as(0, k) + "." + method + "_elem(" + scalar_literal(*s, k) + ")");
        return;
    }
    c.out(0, std::move(v), c.t_rank(0, v.rank) + (a.kind == k ? "" : ".float_()") + "." + method + "(" +
                               c.t_rank(1, v.rank) + (b.kind == k ? "" : ".float_()") + ")");
}

void logical(NodeCtx& c, const std::string& method) {
    const Value &a = c.in(0), &b = c.in(1);
    Value v = broadcast_value(c, a, b, Kind::Bool);
    c.out(0, std::move(v), c.t_rank(0, v.rank) + "." + method + "(" + c.t_rank(1, v.rank) + ")");
}

// A one-input op whose output is like its input: `fmt` with {x} for the input.
void unary(NodeCtx& c, const std::string& prefix, const std::string& suffix, bool float_only) {
    const Value& a = c.in(0);
    if (float_only) c.require(a.kind == Kind::Float, "needs a float input");
    c.out(0, like(a, a.kind), prefix + c.t(0) + suffix);
}

void where_op(NodeCtx& c) {
    const Value &m = c.in(0), &x = c.in(1), &y = c.in(2);
    Value v = broadcast_value(c, broadcast_value(c, m, x, x.kind), y, x.kind);
    const std::string shape = [&] {
        std::vector<std::string> d;
        return std::string();
    }();
    (void)shape;
    // y where the mask is false, x where it is true; all three broadcast to the output.
    std::string ys = c.t_rank(2, v.rank), xs = c.t_rank(1, v.rank), ms = c.t_rank(0, v.rank);
    c.out(0, std::move(v), ys + ".mask_where(" + ms + ", " + xs + ")");
}

void clip(NodeCtx& c) {
    std::optional<double> lo, hi;
    if (c.em.opset < 11) {
        if (c.has_attr("min")) lo = c.attr_float("min", 0);
        if (c.has_attr("max")) hi = c.attr_float("max", 0);
    } else {
        if (c.has(1)) {
            lo = c.scalar(1);
            c.require(lo.has_value(), "min must be a constant");
        }
        if (c.has(2)) {
            hi = c.scalar(2);
            c.require(hi.has_value(), "max must be a constant");
        }
    }
    const Value& a = c.in(0);
    const Kind k = a.kind;
    std::string e = c.t(0);
    if (lo && hi) e += ".clamp(" + scalar_literal(*lo, k) + ", " + scalar_literal(*hi, k) + ")";
    else if (lo) e += ".clamp_min(" + scalar_literal(*lo, k) + ")";
    else if (hi) e += ".clamp_max(" + scalar_literal(*hi, k) + ")";
    c.out(0, like(a, k), e);
}

void cast(NodeCtx& c) {
    const auto to = static_cast<int>(c.attr_int("to", 0));
    const auto d = dtype_of(to);
    c.require(d.has_value(), "Cast to " + std::string(onnx_type_name(to)) + ", which ember has no dtype for");
    const Kind k = kind_of(*d);
    const Value& a = c.in(0);
    if (a.constant) {
        c.out_const(0, a.constant->convert(k == Kind::Float ? DType::F32 : *d));
        return;
    }
    if (a.elems && k == Kind::Int) {
        c.out_alias(0, 0);
        return;
    }
    c.out(0, like(a, k), c.t_as(0, k));
}

void variadic(NodeCtx& c, const char* op) {  // Sum, Mean, Max, Min over any number of inputs
    c.require(c.inputs() >= 1, "needs at least one input");
    Value v = c.in(0);
    v.var.clear(), v.constant.reset(), v.elems.reset();
    for (std::size_t i = 1; i < c.inputs(); ++i) v = broadcast_value(c, v, c.in(i), v.kind);
    std::string e = c.t_rank(0, v.rank);
    for (std::size_t i = 1; i < c.inputs(); ++i) {
        const std::string o = c.t_rank(i, v.rank);
        if (std::string(op) == "max") e = e + ".mask_where(" + e + ".lower(" + o + "), " + o + ")";
        else if (std::string(op) == "min") e = e + ".mask_where(" + e + ".greater(" + o + "), " + o + ")";
        else e = "(" + e + " + " + o + ")";
    }
    if (std::string(op) == "mean") e = "(" + e + " / " + literal(double(c.inputs())) + ")";
    c.out(0, std::move(v), e);
}

// ---- shapes ------------------------------------------------------------------------------------

bool all_literal(const std::vector<std::string>& e) {
    return std::all_of(e.begin(), e.end(), [](const std::string& s) {
        return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-') &&
               s.find_first_not_of("-0123456789") == std::string::npos;
    });
}

TensorData ints_data(const std::vector<std::string>& e, bool scalar) {
    std::vector<std::int64_t> v;
    for (const auto& s : e) v.push_back(std::stoll(s));
    return TensorData(v, scalar ? Shape{} : Shape{v.size()});
}

// Output `k` as a 1-D integer value known element by element.
void out_elems(NodeCtx& c, std::size_t k, std::vector<std::string> e, bool scalar) {
    if (all_literal(e)) {
        c.out_const(k, ints_data(e, scalar));
        return;
    }
    Value v;
    v.kind = Kind::Int;
    v.rank = 1;
    v.scalar = scalar;
    v.dims = {static_cast<std::int64_t>(e.size())};
    v.elems = std::move(e);
    if (k < c.node.outputs.size()) c.em.values[c.node.outputs[k]] = std::move(v);
}

std::string dim_expr(NodeCtx& c, std::size_t i, std::size_t d) {
    const Value& x = c.in(i);
    if (x.dims[d] >= 0) return std::to_string(x.dims[d]);
    return "long(" + c.t(i) + ".dims()[" + std::to_string(d) + "])";
}

void shape_op(NodeCtx& c) {
    const Value& x = c.in(0);
    const auto rank = static_cast<std::int64_t>(x.scalar ? 0 : x.rank);
    auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
    const auto start = clampi(c.attr_int("start", 0)), end = clampi(c.attr_int("end", rank));
    std::vector<std::string> e;
    for (auto d = start; d < end; ++d) e.push_back(dim_expr(c, 0, static_cast<std::size_t>(d)));
    out_elems(c, 0, std::move(e));
}

void size_op(NodeCtx& c) {
    const Value& x = c.in(0);
    std::string e = "1";
    bool known = true;
    std::int64_t n = 1;
    for (std::size_t d = 0; d < x.rank; ++d) {
        if (x.dims[d] < 0) known = false;
        else n *= x.dims[d];
        e += " * " + dim_expr(c, 0, d);
    }
    out_elems(c, 0, {known ? std::to_string(n) : "(" + e + ")"}, true);
}

void constant(NodeCtx& c) {
    if (c.has_attr("value")) return c.out_const(0, c.attr_tensor("value"));
    if (c.has_attr("value_float")) return c.out_const(0, TensorData({float(c.attr_float("value_float", 0))}, Shape{}));
    if (c.has_attr("value_floats")) {
        auto v = c.attr_floats("value_floats");
        return c.out_const(0, TensorData(v, Shape{v.size()}));
    }
    if (c.has_attr("value_int")) return c.out_const(0, TensorData(std::vector<std::int64_t>{c.attr_int("value_int", 0)}, Shape{}));
    if (c.has_attr("value_ints")) {
        auto v = c.attr_ints("value_ints");
        return c.out_const(0, TensorData(v, Shape{v.size()}));
    }
    c.fail("a Constant without a value ember-onnx reads (value, value_float(s), value_int(s))");
}

void constant_of_shape(NodeCtx& c) {
    auto e = c.elems(0);
    c.require(e.has_value(), "the shape must be known element by element");
    TensorData value = c.has_attr("value") ? c.attr_tensor("value") : TensorData({0.0f}, Shape{1});
    const Kind k = kind_of(value.dtype());
    const double s = value.convert(DType::F64).to_vec<double>().at(0);
    if (all_literal(*e)) {
        std::vector<std::size_t> dims;
        for (const auto& x : *e) dims.push_back(static_cast<std::size_t>(std::stoll(x)));
        const Shape shape{std::span<const std::size_t>(dims)};
        TensorData one = value.convert(k == Kind::Float ? DType::F32 : value.dtype());
        const std::size_t n = shape.num_elements(), w = dtype_size(one.dtype());
        c.require(n <= (1u << 24), "a constant of more than 2^24 elements");
        std::vector<std::byte> bytes(n * w);
        for (std::size_t i = 0; i < n; ++i) std::copy_n(one.bytes().data(), w, bytes.data() + i * w);
        c.out_const(0, TensorData(std::move(bytes), shape, one.dtype()));
        return;
    }
    Value v;
    v.kind = k;
    v.rank = e->empty() ? 1 : e->size();
    v.scalar = e->empty();
    v.dims.assign(v.rank, -1);
    std::vector<std::string> sz;
    for (const auto& x : *e) sz.push_back("std::size_t(" + x + ")");
    if (sz.empty()) sz.push_back("1");
    c.out(0, std::move(v), tensor_type(k, sz.size()) + "::full(ember::Shape{" + join(sz) + "}, " +
                               scalar_literal(s, k) + ", device)");
}

void range_op(NodeCtx& c) {
    const auto start = c.scalar(0), limit = c.scalar(1), delta = c.scalar(2);
    c.require(start && limit && delta, "start, limit and delta must be constants");
    c.require(*delta != 0, "delta is 0");
    const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((*limit - *start) / *delta)));
    c.require(n <= (1 << 24), "more than 2^24 elements");
    if (is_float(c.in(0).constant->dtype())) {
        std::vector<float> v;
        for (std::int64_t k = 0; k < n; ++k) v.push_back(float(*start + double(k) * *delta));
        c.out_const(0, TensorData(v, Shape{v.size()}));
    } else {
        std::vector<std::int64_t> v;
        for (std::int64_t k = 0; k < n; ++k) v.push_back(static_cast<std::int64_t>(*start + double(k) * *delta));
        c.out_const(0, TensorData(v, Shape{v.size()}).convert(c.in(0).constant->dtype()));
    }
}

void reshape(NodeCtx& c) {
    const Value& x = c.in(0);
    auto e = c.elems(1);
    c.require(e.has_value(), "the target shape must be known element by element");
    const bool allowzero = c.attr_int("allowzero", 0) != 0;
    std::vector<std::string> dims = *e;
    Dims stat;
    for (std::size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] == "0" && !allowzero) {
            c.require(d < x.rank, "a 0 in the target shape past the input's rank");
            dims[d] = dim_expr(c, 0, d);
        }
        stat.push_back(all_literal({dims[d]}) ? std::stoll(dims[d]) : -1);
    }
    // A known -1 resolved where the input's size is known.
    if (std::count(stat.begin(), stat.end(), -1) == 1 && x.numel() >= 0) {
        std::int64_t rest = 1;
        for (auto s : stat) if (s >= 0) rest *= s;
        if (rest > 0) *std::find(stat.begin(), stat.end(), -1) = x.numel() / rest;
    }
    if (x.elems && dims.size() <= 1) {  // shape arithmetic stays element by element
        out_elems(c, 0, *x.elems, dims.empty());
        return;
    }
    if (x.constant && all_literal(dims)) {  // fold
        std::vector<long> want;
        for (auto s : stat) want.push_back(static_cast<long>(s));
        std::vector<std::size_t> sd(stat.begin(), stat.end());
        TensorData d = *x.constant;
        auto bytes = std::vector<std::byte>(d.bytes().begin(), d.bytes().end());
        c.require(Shape(std::span<const std::size_t>(sd)).num_elements() == d.num_elements(),
                  "the target shape holds a different number of elements");
        c.out_const(0, TensorData(std::move(bytes), Shape(std::span<const std::size_t>(sd)), d.dtype()));
        return;
    }
    Value v = like(x, x.kind);
    v.scalar = dims.empty();
    if (dims.empty()) dims.push_back("1"), stat = {1};
    v.rank = dims.size();
    v.dims = stat;
    c.out(0, std::move(v), c.t(0) + ".template reshape<" + r(dims.size()) + ">({" + join(dims) + "})");
}

void flatten(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::size_t rank = x.scalar ? 0 : x.rank;
    const auto a = c.attr_int("axis", 1);
    const std::size_t axis = a < 0 ? static_cast<std::size_t>(a + std::int64_t(rank)) : std::size_t(a);
    c.require(axis <= rank, "axis out of range");
    Value v = like(x, x.kind);
    v.rank = 2, v.scalar = false;
    auto prod = [&](std::size_t lo, std::size_t hi) {
        std::int64_t n = 1;
        for (std::size_t d = lo; d < hi; ++d) n = (n < 0 || x.dims[d] < 0) ? -1 : n * x.dims[d];
        return n;
    };
    v.dims = {prod(0, axis), prod(axis, rank)};
    std::string e = c.t(0);
    if (rank == 0) e += ".template reshape<2>({1, 1})";
    else if (axis == 0) e += ".template reshape<2>({1, -1})";
    else if (axis == rank) e += ".template reshape<2>({-1, 1})";
    else {
        if (axis + 1 < rank) e += ".template flatten<" + r(axis + 1) + ">(" + r(axis) + ", " + r(rank - 1) + ")";
        if (axis > 1) e += ".template flatten<2>(0, " + r(axis - 1) + ")";
    }
    c.out(0, std::move(v), e);
}

void transpose(NodeCtx& c) {
    const Value& x = c.in(0);
    Dims perm = c.attr_ints("perm");
    if (perm.empty())
        for (std::size_t d = x.rank; d-- > 0;) perm.push_back(std::int64_t(d));
    c.require(perm.size() == x.rank, "perm has " + std::to_string(perm.size()) + " entries for rank " + r(x.rank));
    Value v = like(x, x.kind);
    for (std::size_t d = 0; d < perm.size(); ++d) v.dims[d] = x.dims[c.axis(perm[d], x.rank)];
    c.out(0, std::move(v), c.t(0) + ".permute({" + join_ints(perm) + "})");
}

Dims axes_of(NodeCtx& c, std::size_t input, std::int64_t since_opset) {
    if (c.em.opset >= since_opset) return c.has(input) ? c.ints(input, "axes") : Dims{};
    return c.attr_ints("axes");
}

void unsqueeze(NodeCtx& c) {
    const Value& x = c.in(0);
    Dims axes = axes_of(c, 1, 13);
    const std::size_t in_rank = x.scalar ? 0 : x.rank, out_rank = in_rank + axes.size();
    for (auto& a : axes) a = std::int64_t(c.axis(a, out_rank));
    std::sort(axes.begin(), axes.end());
    if (x.elems && out_rank == 1) return out_elems(c, 0, *x.elems);
    if (x.constant) {
        std::vector<std::size_t> d;
        for (std::size_t k = 0, src = 0; k < out_rank; ++k)
            d.push_back(std::binary_search(axes.begin(), axes.end(), std::int64_t(k)) ? 1 : x.constant->shape()[src++]);
        TensorData t = *x.constant;
        auto bytes = std::vector<std::byte>(t.bytes().begin(), t.bytes().end());
        return c.out_const(0, TensorData(std::move(bytes), Shape(std::span<const std::size_t>(d)), t.dtype()));
    }
    Value v = like(x, x.kind);
    v.scalar = false;
    std::string e = c.t(0);
    std::size_t rank = x.rank;
    v.dims = x.scalar ? Dims{} : x.dims;
    if (x.scalar) {  // [1] standing for a scalar: the first unsqueeze is that dim
        axes.erase(axes.begin());
        v.dims = {1};
    }
    for (auto a : axes) {
        e += ".template unsqueeze_dim<" + r(rank + 1) + ">(" + std::to_string(a) + ")";
        v.dims.insert(v.dims.begin() + a, 1);
        ++rank;
    }
    v.rank = rank;
    c.out(0, std::move(v), e);
}

void squeeze(NodeCtx& c) {
    const Value& x = c.in(0);
    Dims axes = axes_of(c, 1, 13);
    if (axes.empty())
        for (std::size_t d = 0; d < x.rank; ++d) {
            c.require(x.dims[d] >= 0, "squeezing without axes needs static dims");
            if (x.dims[d] == 1) axes.push_back(std::int64_t(d));
        }
    for (auto& a : axes) a = std::int64_t(c.axis(a, x.rank));
    std::sort(axes.rbegin(), axes.rend());
    if (x.elems) return out_elems(c, 0, *x.elems, axes.size() == x.rank);
    Value v = like(x, x.kind);
    std::string e = c.t(0);
    std::size_t rank = x.rank;
    for (auto a : axes) {
        if (rank == 1) {  // to an ONNX scalar: stays [1]
            v.scalar = true;
            break;
        }
        e += ".template squeeze<" + r(rank - 1) + ">(" + std::to_string(a) + ")";
        v.dims.erase(v.dims.begin() + a);
        --rank;
    }
    v.rank = rank;
    c.out(0, std::move(v), e);
}

void concat(NodeCtx& c) {
    bool elems = true;
    for (std::size_t i = 0; i < c.inputs(); ++i) elems = elems && c.has(i) && c.elems(i).has_value() && c.in(i).rank == 1;
    if (elems) {
        std::vector<std::string> e;
        for (std::size_t i = 0; i < c.inputs(); ++i) {
            const auto part = c.elems(i);
            e.insert(e.end(), part->begin(), part->end());
        }
        return out_elems(c, 0, std::move(e));
    }
    const Value& x = c.in(0);
    const std::size_t axis = c.axis(c.attr_int("axis", 0), x.rank);
    Value v = like(x, x.kind);
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < c.inputs(); ++i) {
        if (!c.has(i)) continue;
        c.require(c.in(i).rank == x.rank, "inputs of different ranks");
        if (i) v.dims[axis] = (v.dims[axis] < 0 || c.in(i).dims[axis] < 0) ? -1 : v.dims[axis] + c.in(i).dims[axis];
        parts.push_back(c.t_as(i, x.kind));
    }
    c.out(0, std::move(v), tensor_type(x.kind, x.rank) + "::cat({" + join(parts) + "}, " + r(axis) + ")");
}

void gather(NodeCtx& c) {
    const Value& x = c.in(0);
    const Value& idx = c.in(1);
    const std::size_t axis = c.axis(c.attr_int("axis", 0), x.scalar ? 1 : x.rank);
    if (auto e = c.elems(0); e && idx.constant && x.rank == 1) {  // shape arithmetic
        std::vector<std::string> out;
        for (auto i : idx.constant->convert(DType::I64).to_vec<std::int64_t>()) {
            if (i < 0) i += std::int64_t(e->size());
            c.require(i >= 0 && i < std::int64_t(e->size()), "index out of range");
            out.push_back((*e)[std::size_t(i)]);
        }
        return out_elems(c, 0, std::move(out), idx.scalar);
    }
    c.require(idx.kind == Kind::Int, "indices must be integers");
    Value v = like(x, x.kind);
    if (idx.scalar) {  // one index: a narrow, then the dim goes
        std::string start;
        if (idx.constant) {  // known: normalised here where the dim is known
            auto i = idx.constant->convert(DType::I64).to_vec<std::int64_t>()[0];
            if (i < 0 && x.dims[axis] >= 0) i += x.dims[axis];
            start = i >= 0 ? std::to_string(i) : std::to_string(i) + " + long(" + c.t(0) + ".dims()[" + r(axis) + "])";
        } else {
            const std::string i = "long(" + c.t(1) + ".into_scalar())";
            start = i + " < 0 ? " + i + " + long(" + c.t(0) + ".dims()[" + r(axis) + "]) : " + i;
        }
        std::string sl = c.t(0) + ".narrow(" + r(axis) + ", " + start + ", 1)";
        v.dims.erase(v.dims.begin() + axis);
        if (x.rank == 1) {
            v.scalar = true, v.dims = {1};
            return c.out(0, std::move(v), sl);
        }
        v.rank = x.rank - 1;
        return c.out(0, std::move(v), sl + ".template squeeze<" + r(v.rank) + ">(" + r(axis) + ")");
    }
    if (idx.rank > 1) {  // the indices' dims replace the axis (ember::take); negatives wrap
        const std::string i = c.em.fresh("indices");
        c.em.body.push_back("const auto " + i + " = " + c.t(1) + ";");
        v.dims.erase(v.dims.begin() + long(axis));
        v.dims.insert(v.dims.begin() + long(axis), idx.dims.begin(), idx.dims.end());
        v.rank = v.dims.size();
        const std::string e = "ember::take<" + r(v.rank) + ">(" + c.t(0) + ", " + r(axis) + ", " +
                              i + ".mask_where(" + i +
                              ".lower_elem(static_cast<std::int64_t>(0)), " + i + " + long(" +
                              c.t(0) + ".dims()[" + r(axis) + "])))";
        return c.out(0, std::move(v), e);
    }
    v.dims[axis] = idx.dims[0];
    if (idx.constant && x.dims[axis] >= 0) {  // negative indices counted from the end, here
        auto list = idx.constant->convert(DType::I64).to_vec<std::int64_t>();
        for (auto& i : list) {
            if (i < 0) i += x.dims[axis];
            c.require(i >= 0 && i < x.dims[axis], "index out of range");
        }
        const std::string var = c.em.fresh("indices");
        c.em.body.push_back("const auto " + var + " = " + inline_tensor(TensorData(list, Shape{list.size()}), 1, Kind::Int) + ";");
        return c.out(0, std::move(v), c.t(0) + ".select(" + r(axis) + ", " + var + ")");
    }
    const std::string i = c.em.fresh("indices");  // negative indices count from the end
    c.em.body.push_back("const auto " + i + " = " + c.t(1) + ";");
    c.out(0, std::move(v),
          c.t(0) + ".select(" + r(axis) + ", " + i + ".mask_where(" + i +
              ".lower_elem(static_cast<std::int64_t>(0)), " + i + " + long(" + c.t(0) + ".dims()[" +
              r(axis) + "])))");
}

void slice(NodeCtx& c) {
    const Value& x = c.in(0);
    Dims starts, ends, axes, steps;
    if (c.em.opset < 10) {
        starts = c.attr_ints("starts"), ends = c.attr_ints("ends"), axes = c.attr_ints("axes");
    } else {
        starts = c.ints(1, "starts"), ends = c.ints(2, "ends");
        if (c.has(3)) axes = c.ints(3, "axes");
        if (c.has(4)) steps = c.ints(4, "steps");
    }
    if (axes.empty())
        for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(std::int64_t(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    c.require(starts.size() == ends.size() && axes.size() == starts.size() && steps.size() == starts.size(),
              "starts, ends, axes and steps differ in length");
    auto clampl = [](std::int64_t v) {
        return static_cast<long>(std::clamp<std::int64_t>(v, -(std::int64_t(1) << 40), std::int64_t(1) << 40));
    };
    if (auto e = c.elems(0); e && x.rank == 1 && steps[0] == 1) {  // shape arithmetic
        const auto n = std::int64_t(e->size());
        auto fix = [&](std::int64_t v) { return std::clamp(v < 0 ? v + n : v, std::int64_t{0}, n); };
        std::vector<std::string> out(e->begin() + fix(starts[0]), e->begin() + std::max(fix(starts[0]), fix(ends[0])));
        return out_elems(c, 0, std::move(out));
    }
    std::vector<std::string> ranges(x.rank, "ember::Slice{}");
    Value v = like(x, x.kind);
    std::string picks;  // negative steps: the elements listed here, read with select
    for (std::size_t k = 0; k < axes.size(); ++k) {
        const std::size_t a = c.axis(axes[k], x.rank);
        c.require(steps[k] != 0, "a step of 0");
        if (steps[k] < 0) {
            const auto n = x.dims[a];
            c.require(n >= 0, "negative steps along a dim whose size is not known at import");
            // ONNX's clamping for negative steps: start into [0, n-1], end into [-1, n-1].
            auto fix = [&](std::int64_t v, std::int64_t lo) {
                return std::clamp(v < 0 ? v + n : v, lo, n - 1);
            };
            const std::int64_t b = fix(starts[k], 0), e = fix(ends[k], -1);
            std::vector<std::int64_t> list;
            for (std::int64_t i = b; i > e; i += steps[k]) list.push_back(i);
            c.require(!list.empty(), "a negative-step slice with no elements");
            const std::string var = c.em.fresh("indices");
            c.em.body.push_back("const auto " + var + " = " +
                                inline_tensor(TensorData(list, Shape{list.size()}), 1, Kind::Int) +
                                ";");
            picks += ".select(" + r(a) + ", " + var + ")";
            v.dims[a] = std::int64_t(list.size());
            continue;
        }
        ranges[a] = "ember::Slice{" + std::to_string(clampl(starts[k])) + ", " + std::to_string(clampl(ends[k])) +
                    ", " + std::to_string(steps[k]) + "}";
        if (x.dims[a] >= 0) {  // ONNX clamps out-of-range bounds: done here, where the dim is known
            const auto n = x.dims[a];
            auto fix = [&](std::int64_t v) { return std::clamp(v < 0 ? v + n : v, std::int64_t{0}, n); };
            const auto b = fix(starts[k]), e = std::max(fix(starts[k]), fix(ends[k]));
            ranges[a] = "ember::Slice{" + std::to_string(b) + ", " + std::to_string(e) + ", " + std::to_string(steps[k]) + "}";
            v.dims[a] = e > b ? (e - b + steps[k] - 1) / steps[k] : 0;
        } else {
            v.dims[a] = -1;
        }
    }
    c.out(0, std::move(v), c.t(0) + ".slice({" + join(ranges) + "})" + picks);
}

void split(NodeCtx& c) {
    const Value& x = c.in(0);
    const std::size_t axis = c.axis(c.attr_int("axis", 0), x.rank);
    Dims sizes = c.em.opset >= 13 ? (c.has(1) ? c.ints(1, "split") : Dims{}) : c.attr_ints("split");
    const std::size_t n = c.node.outputs.size();
    if (sizes.empty()) {
        c.require(x.dims[axis] >= 0, "an even split needs the dim's size");
        const auto chunk = (x.dims[axis] + std::int64_t(n) - 1) / std::int64_t(n);
        for (std::size_t k = 0; k < n; ++k) sizes.push_back(std::min(chunk, x.dims[axis] - chunk * std::int64_t(k)));
    }
    c.require(sizes.size() == n, "split sizes and outputs differ in number");
    std::int64_t at = 0;
    for (std::size_t k = 0; k < n; ++k) {
        Value v = like(x, x.kind);
        v.dims[axis] = sizes[k];
        c.out(k, std::move(v), c.t(0) + ".narrow(" + r(axis) + ", " + std::to_string(at) + ", " + std::to_string(sizes[k]) + ")");
        at += sizes[k];
    }
}

void expand(NodeCtx& c) {
    const Value& x = c.in(0);
    auto e = c.elems(1);
    c.require(e.has_value(), "the shape must be known element by element");
    const std::size_t rank = std::max(x.rank, e->size());
    Value v = like(x, x.kind);
    v.rank = rank;
    v.dims.assign(rank, -1);
    std::vector<std::string> dims;
    for (std::size_t k = 0; k < rank; ++k) {
        const std::size_t off = rank - e->size();
        const bool in_shape = k >= off;
        const bool in_x = k + x.rank >= rank;
        const std::string s = in_shape ? (*e)[k - off] : "1";
        const std::string xd = in_x ? dim_expr(c, 0, k + x.rank - rank) : "1";
        const std::string d = s == "1" ? xd : (xd == "1" ? s : "std::max<long>(" + s + ", " + xd + ")");
        dims.push_back("std::size_t(" + d + ")");
        if (all_literal({d})) v.dims[k] = std::stoll(d);
    }
    c.out(0, std::move(v), c.t_rank(0, rank) + ".template expand<" + r(rank) + ">(ember::Shape{" + join(dims) + "})");
}

void tile(NodeCtx& c) {
    const Value& x = c.in(0);
    const Dims reps = c.ints(1, "repeats");
    c.require(reps.size() == x.rank, "repeats has a length other than the rank");
    Value v = like(x, x.kind);
    std::vector<std::string> s;
    for (std::size_t k = 0; k < reps.size(); ++k) {
        s.push_back(std::to_string(reps[k]));
        if (v.dims[k] >= 0) v.dims[k] *= reps[k];
    }
    c.out(0, std::move(v), c.t(0) + ".repeat({" + join(s) + "})");
}

// ---- reductions --------------------------------------------------------------------------------

void reduce(NodeCtx& c, const std::string& method, std::int64_t axes_input_since,
            const std::string& pre, const std::string& post) {
    const Value& x = c.in(0);
    Dims axes = axes_of(c, 1, axes_input_since);
    const bool keep = c.attr_int("keepdims", 1) != 0;
    if (axes.empty()) {
        if (c.attr_int("noop_with_empty_axes", 0)) return c.out_alias(0, 0);
        for (std::size_t d = 0; d < x.rank; ++d) axes.push_back(std::int64_t(d));
    }
    for (auto& a : axes) a = std::int64_t(c.axis(a, x.rank));
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    Value v = like(x, x.kind);
    std::string e = pre.empty() ? c.t(0) : "(" + pre + "(" + c.t(0) + "))";
    for (auto a : axes) {
        e += "." + method + "_dim(" + std::to_string(a) + ")";
        v.dims[a] = 1;
    }
    e += post;
    if (!keep) {
        std::size_t rank = x.rank;
        for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
            if (rank == 1) {
                v.scalar = true;
                break;
            }
            e += ".template squeeze<" + r(rank - 1) + ">(" + std::to_string(*it) + ")";
            v.dims.erase(v.dims.begin() + *it);
            --rank;
        }
        v.rank = rank;
    }
    c.out(0, std::move(v), e);
}

void arg_reduce(NodeCtx& c, const std::string& method) {
    const Value& x = c.in(0);
    const std::size_t axis = c.axis(c.attr_int("axis", 0), x.rank);
    Value v = like(x, Kind::Int);
    v.dims[axis] = 1;
    std::string e = c.t(0) + "." + method + "(" + r(axis) + ")";
    if (c.attr_int("select_last_index", 0)) {  // the last of equals: the first one, flipped
        e = "((long(" + c.t(0) + ".dims()[" + r(axis) + "]) - 1) - " + c.t(0) + ".flip({" + r(axis) + "L})." +
            method + "(" + r(axis) + "))";
    }
    if (!c.attr_int("keepdims", 1)) {
        if (x.rank == 1) v.scalar = true;
        else {
            e += ".template squeeze<" + r(x.rank - 1) + ">(" + r(axis) + ")";
            v.dims.erase(v.dims.begin() + axis);
            v.rank = x.rank - 1;
        }
    }
    c.out(0, std::move(v), e);
}

void softmax(NodeCtx& c, const std::string& fn) {
    const Value& x = c.in(0);
    const auto default_axis = c.em.opset >= 13 ? -1 : 1;
    const std::size_t axis = c.axis(c.attr_int("axis", default_axis), x.rank);
    if (c.em.opset < 13 && axis != x.rank - 1) {  // the old definition: over all dims from axis
        std::vector<std::string> dims;
        for (std::size_t d = 0; d < x.rank; ++d) dims.push_back(dim_expr(c, 0, d));
        c.out(0, like(x, Kind::Float),
              "ember::activation::" + fn + "(" + c.t(0) + ".template flatten<" + r(axis + 1) + ">(" + r(axis) +
                  ", " + r(x.rank - 1) + "), " + r(axis) + ").template reshape<" + r(x.rank) + ">({" + join(dims) + "})");
        return;
    }
    c.out(0, like(x, Kind::Float), "ember::activation::" + fn + "(" + c.t(0) + ", " + r(axis) + ")");
}

}  // namespace ember::onnx::ops

namespace ember::onnx {

using namespace ops;

void set_import_graph(const Graph* g) { ops::g_graph = g; }

const std::map<std::string, Handler>& handlers() {
    static const std::map<std::string, Handler> table = [] {
        std::map<std::string, Handler> t;
        t["Add"] = [](NodeCtx& c) { arithmetic(c, "+"); };
        t["Sub"] = [](NodeCtx& c) { arithmetic(c, "-"); };
        t["Mul"] = [](NodeCtx& c) { arithmetic(c, "*"); };
        t["Div"] = [](NodeCtx& c) {
            if (!gelu_chain(c)) arithmetic(c, "/");
        };
        t["Pow"] = pow_op;
        t["Equal"] = [](NodeCtx& c) { compare(c, "equal"); };
        t["Greater"] = [](NodeCtx& c) { compare(c, "greater"); };
        t["GreaterOrEqual"] = [](NodeCtx& c) { compare(c, "greater_equal"); };
        t["Less"] = [](NodeCtx& c) { compare(c, "lower"); };
        t["LessOrEqual"] = [](NodeCtx& c) { compare(c, "lower_equal"); };
        t["And"] = [](NodeCtx& c) { logical(c, "bool_and"); };
        t["Or"] = [](NodeCtx& c) { logical(c, "bool_or"); };
        t["Xor"] = [](NodeCtx& c) { logical(c, "not_equal"); };
        t["Not"] = [](NodeCtx& c) { unary(c, "", ".not_()", false); };
        t["Where"] = where_op;
        t["Sum"] = [](NodeCtx& c) { variadic(c, "sum"); };
        t["Mean"] = [](NodeCtx& c) { variadic(c, "mean"); };
        t["Max"] = [](NodeCtx& c) { variadic(c, "max"); };
        t["Min"] = [](NodeCtx& c) { variadic(c, "min"); };
        t["Relu"] = [](NodeCtx& c) { unary(c, "ember::activation::relu(", ")"); };
        t["Sigmoid"] = [](NodeCtx& c) { unary(c, "ember::activation::sigmoid(", ")"); };
        t["Tanh"] = [](NodeCtx& c) { unary(c, "ember::activation::tanh(", ")"); };
        t["Softplus"] = [](NodeCtx& c) { unary(c, "ember::activation::softplus(", ")"); };
        t["LeakyRelu"] = [](NodeCtx& c) {
            unary(c, "ember::activation::leaky_relu(", ", " + literal(c.attr_float("alpha", 0.01)) + ")");
        };
        t["HardSigmoid"] = [](NodeCtx& c) {
            unary(c, "ember::activation::hard_sigmoid(",
                  ", " + literal(c.attr_float("alpha", 0.2)) + ", " + literal(c.attr_float("beta", 0.5)) + ")");
        };
        t["HardSwish"] = [](NodeCtx& c) {
            const std::string x = c.t(0);
            c.out(0, like(c.in(0), Kind::Float), x + " * ember::activation::hard_sigmoid(" + x + ", 1.0 / 6.0, 0.5)");
        };
        t["Elu"] = [](NodeCtx& c) {
            const std::string x = c.t(0), a = literal(c.attr_float("alpha", 1.0));
            c.out(0, like(c.in(0), Kind::Float), x + ".clamp_min(0.0) + (" + x + ".clamp_max(0.0).exp() - 1.0) * " + a);
        };
        t["Selu"] = [](NodeCtx& c) {
            const std::string x = c.t(0), a = literal(c.attr_float("alpha", 1.67326319217681884765625)),
                              g = literal(c.attr_float("gamma", 1.05070102214813232421875));
            c.out(0, like(c.in(0), Kind::Float),
                  "(" + x + ".clamp_min(0.0) + (" + x + ".clamp_max(0.0).exp() - 1.0) * " + a + ") * " + g);
        };
        for (const char* op : {"Exp", "Log", "Sqrt", "Erf", "Floor", "Ceil", "Sin", "Cos", "Round"}) {
            std::string m = op;
            m[0] = char(std::tolower(m[0]));
            t[op] = [m](NodeCtx& c) { unary(c, "", "." + m + "()"); };
        }
        t["Abs"] = [](NodeCtx& c) { unary(c, "", ".abs()", false); };
        t["Neg"] = [](NodeCtx& c) {
            // Shape arithmetic stays known element by element (-axis feeding a ConstantOfShape).
            if (const Value& a = c.in(0);
                a.kind == Kind::Int && a.rank == 1 && (a.elems || a.constant)) {
                if (auto e = c.elems(0)) {
                    std::vector<std::string> out;
                    for (const auto& x : *e)
                        out.push_back(all_literal({x}) ? std::to_string(-std::stoll(x))
                                                       : "(-" + x + ")");
                    return out_elems(c, 0, std::move(out), a.scalar);
                }
            }
            unary(c, "-", "", false);
        };
        t["Sign"] = [](NodeCtx& c) { unary(c, "", ".sign()", false); };
        t["Reciprocal"] = [](NodeCtx& c) { unary(c, "", ".recip()"); };
        t["Clip"] = clip;
        t["Cast"] = cast;
        t["Identity"] = [](NodeCtx& c) { c.out_alias(0, 0); };
        t["Dropout"] = [](NodeCtx& c) {  // inference: the identity; the mask output is all true
            if (c.has(2)) {
                const auto training = c.scalar(2);
                c.require(training.has_value() && *training == 0.0,
                          "training_mode must be a constant false (ember-onnx imports for inference)");
            }
            c.out_alias(0, 0);
            if (c.node.outputs.size() > 1 && !c.node.outputs[1].empty())
                c.out(1, like(c.in(0), Kind::Bool), c.t(0) + ".zeros_like().equal_elem(0.0)");
        };
        t["Shape"] = shape_op;
        t["Size"] = size_op;
        t["Constant"] = constant;
        t["ConstantOfShape"] = constant_of_shape;
        t["Range"] = range_op;
        t["Reshape"] = reshape;
        t["Flatten"] = flatten;
        t["Transpose"] = transpose;
        t["Unsqueeze"] = unsqueeze;
        t["Squeeze"] = squeeze;
        t["Concat"] = concat;
        t["Gather"] = gather;
        t["Slice"] = slice;
        t["Split"] = split;
        t["Expand"] = expand;
        t["Tile"] = tile;
        t["ReduceSum"] = [](NodeCtx& c) { reduce(c, "sum", 13); };
        t["ReduceMean"] = [](NodeCtx& c) { reduce(c, "mean", 18); };
        t["ReduceMax"] = [](NodeCtx& c) { reduce(c, "max", 18); };
        t["ReduceMin"] = [](NodeCtx& c) { reduce(c, "min", 18); };
        t["ReduceProd"] = [](NodeCtx& c) { reduce(c, "prod", 18); };
        t["ArgMax"] = [](NodeCtx& c) { arg_reduce(c, "argmax"); };
        t["ArgMin"] = [](NodeCtx& c) { arg_reduce(c, "argmin"); };
        t["Softmax"] = [](NodeCtx& c) { softmax(c, "softmax"); };
        t["LogSoftmax"] = [](NodeCtx& c) { softmax(c, "log_softmax"); };
        t["MatMul"] = matmul;
        t["Gemm"] = gemm;
        t["Conv"] = conv;
        t["MaxPool"] = [](NodeCtx& c) { pool(c, true); };
        t["AveragePool"] = [](NodeCtx& c) { pool(c, false); };
        t["GlobalAveragePool"] = [](NodeCtx& c) { global_pool(c, "mean"); };
        t["GlobalMaxPool"] = [](NodeCtx& c) { global_pool(c, "max"); };
        t["BatchNormalization"] = batch_norm;
        t["LayerNormalization"] = layer_norm;
        t["LSTM"] = lstm;
        t["TopK"] = topk;
        t["Trilu"] = trilu;
        t["GatherElements"] = gather_elements;
        t["Pad"] = pad_op;
        t["OneHot"] = one_hot;
        t["InstanceNormalization"] = instance_norm;
        t["ConvTranspose"] = conv_transpose;
        t["DepthToSpace"] = [](NodeCtx& c) { depth_space(c, true); };
        t["SpaceToDepth"] = [](NodeCtx& c) { depth_space(c, false); };
        t["Resize"] = resize;
        t["EyeLike"] = eye_like;
        t["RandomNormal"] = [](NodeCtx& c) { random_op(c, true, false); };
        t["RandomUniform"] = [](NodeCtx& c) { random_op(c, false, false); };
        t["RandomNormalLike"] = [](NodeCtx& c) { random_op(c, true, true); };
        t["RandomUniformLike"] = [](NodeCtx& c) { random_op(c, false, true); };
        t["Bernoulli"] = [](NodeCtx& c) {  // 1 where a uniform draw falls below the probability
            const std::string x = c.t_as(0, Kind::Float);
            c.out(0, like_value(c.in(0)), x + ".random_like(ember::Distribution::Default).lower(" + x + ").float_()");
        };
        t["Hardmax"] = hardmax;
        t["IsNaN"] = [](NodeCtx& c) { c.out(0, like(c.in(0), Kind::Bool), c.t(0) + ".is_nan()"); };
        t["IsInf"] = [](NodeCtx& c) {
            const bool pos = c.attr_int("detect_positive", 1) != 0, neg = c.attr_int("detect_negative", 1) != 0;
            const std::string x = c.t(0), inf = "std::numeric_limits<double>::infinity()";
            std::string e = pos && neg ? x + ".abs().equal_elem(" + inf + ")"
                            : pos      ? x + ".equal_elem(" + inf + ")"
                            : neg      ? x + ".equal_elem(-" + inf + ")"
                                       : x + ".not_equal(" + x + ").bool_and(" + x + ".equal(" + x + "))";
            c.out(0, like(c.in(0), Kind::Bool), e);
        };
        t["PRelu"] = [](NodeCtx& c) {
            const Value& x = c.in(0);
            c.out(0, like(x, Kind::Float), c.t(0) + ".clamp_min(0.0) + " + c.t(0) + ".clamp_max(0.0) * " + c.t_rank(1, x.rank));
        };
        t["Softsign"] = [](NodeCtx& c) {
            const std::string x = c.t(0);
            c.out(0, like(c.in(0), Kind::Float), x + " / (" + x + ".abs() + 1.0)");
        };
        t["ThresholdedRelu"] = [](NodeCtx& c) {
            const std::string x = c.t(0);
            c.out(0, like(c.in(0), Kind::Float),
                  x + ".mask_fill(" + x + ".lower_equal_elem(" + literal(c.attr_float("alpha", 1.0)) + "), 0.0)");
        };
        t["Celu"] = [](NodeCtx& c) {
            const std::string x = c.t(0), a = literal(c.attr_float("alpha", 1.0));
            c.out(0, like(c.in(0), Kind::Float),
                  x + ".clamp_min(0.0) + ((" + x + " / " + a + ").exp() - 1.0).clamp_max(0.0) * " + a);
        };
        t["Mish"] = [](NodeCtx& c) { unary(c, "ember::activation::mish(", ")"); };
        t["Gelu"] = [](NodeCtx& c) {
            c.require(c.attr_str("approximate", "none") == "none", "only the exact Gelu is supported");
            unary(c, "ember::activation::gelu(", ")");
        };
        t["Mod"] = [](NodeCtx& c) {
            const Value &a = c.in(0), &b = c.in(1);
            Value v = broadcast_value(c, a, b, a.kind);
            const std::string x = c.t_rank(0, v.rank), y = c.t_rank(1, v.rank);
            if (c.attr_int("fmod", 0) == 0) return c.out(0, std::move(v), x + " % " + y);
            // C's fmod: the remainder with the dividend's sign.
            c.out(0, std::move(v), "(" + x + ".abs() % " + y + ".abs()) * " + x + ".sign()");
        };
        t["ReduceSumSquare"] = [](NodeCtx& c) { reduce(c, "sum", 18, "[](const auto& v) { return v * v; }"); };
        t["ReduceL1"] = [](NodeCtx& c) { reduce(c, "sum", 18, "[](const auto& v) { return v.abs(); }"); };
        t["ReduceL2"] = [](NodeCtx& c) { reduce(c, "sum", 18, "[](const auto& v) { return v * v; }", ".sqrt()"); };
        t["ReduceLogSum"] = [](NodeCtx& c) { reduce(c, "sum", 18, "", ".log()"); };
        t["ReduceLogSumExp"] = [](NodeCtx& c) { reduce(c, "sum", 18, "[](const auto& v) { return v.exp(); }", ".log()"); };
        register_quant_ops(t);  // ops_quant.cpp
        register_extra_ops(t);  // ops_extra.cpp
        return t;
    }();
    return table;
}

}  // namespace ember::onnx
