// The generator's machinery (lower.hpp) and the walk over the graph that assembles the header.
#include "lower.hpp"

#include <ember/module/param.hpp>
#include <ember/tensor/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "import.hpp"

namespace ember::onnx {

std::int64_t Value::numel() const {
    std::int64_t n = 1;
    for (auto d : dims) {
        if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;  // unknown, or absurd
    }
    return n;
}

namespace {

// Words no identifier of the generated code may be: C++'s keywords and alternative tokens,
// and lower-case macros the C and POSIX headers (or GNU modes) define.
const std::set<std::string, std::less<>>& keywords() {
    static const std::set<std::string, std::less<>> words = {
        // keywords (C++20) and alternative tokens
        "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
        "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
        "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
        "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
        "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
        "if", "import", "inline", "int", "long", "module", "mutable", "namespace", "new",
        "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected",
        "public", "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof",
        "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
        "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union",
        "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
        "final", "override",
        // lower-case macros of the C/POSIX headers and GNU modes
        "assert", "errno", "stdin", "stdout", "stderr", "offsetof", "setjmp", "va_arg", "va_start",
        "va_end", "va_copy", "linux", "unix", "i386", "major", "minor", "makedev"};
    return words;
}

// The names the generated struct declares or uses itself (its functions, EMBER_MODULE's
// members, forward's locals), which a field or local made from an ONNX name must not take.
// Names starting with "ember" are refused separately: EMBER_MODULE declares ember_* members.
const std::set<std::string, std::less<>>& generated_names() {
    static const std::set<std::string, std::less<>> words = {
        "device",      "input",         "init",
        "forward",     "record",        "std",
        "from_file",   "from_embedded", "load_file",
        "load_record", "save_file",     "into_record",
        "visit",       "map",           "num_params",
        "devices",     "to_device",     "fork",
        "no_grad",     "valid",         "quantize_weights",
        "recorder"};
    return words;
}

}  // namespace

std::string Emitter::fresh(std::string_view hint) {
    std::string id;
    for (char c : hint) id += std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(c)) : '_';
    while (id.find("__") != std::string::npos) id.erase(id.find("__"), 1);
    while (!id.empty() && id.front() == '_') id.erase(0, 1);
    while (!id.empty() && id.back() == '_') id.pop_back();
    if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0]))) id = "v" + id;
    if (id.size() > 40) id.resize(40);
    // "ember..." may name an EMBER_MODULE member (ember_fields, ember_type_name...).
    if (id.rfind("ember", 0) == 0) id = "v_" + id;
    std::string name = id;
    for (int k = 2; taken_.count(name) || keywords().count(name) || generated_names().count(name);
         ++k)
        name = id + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
}

std::string comment_text(std::string_view text, std::size_t max_chars) {
    // Only printable ASCII is kept as is, except the characters that could end or extend a
    // comment or start a trigraph: a newline or carriage return ends a `//` comment, a
    // backslash before one splices the next line into it, `??/` is a backslash where trigraphs
    // are on, `*/` ends a block comment. Those and every other byte become %XX.
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (out.size() >= max_chars) {
            out += "...";
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '?' && c != '*' && c != '%') {
            out += ch;
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

bool is_identifier(std::string_view s) {
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return !keywords().count(s);
}

std::string to_identifier(std::string_view s) {
    std::string id;
    for (char c : s) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0]))) id = "m_" + id;
    if (!is_identifier(id)) id += "_";  // a keyword
    return id;
}

// ---- NodeCtx ---------------------------------------------------------------------------------

void NodeCtx::fail(const std::string& why) const {
    EMBER_FAIL(Argument, "ember-onnx: node ", node.describe(), ": ", why);
}

const Value& NodeCtx::in(std::size_t i) const {
    if (!has(i)) fail("input " + std::to_string(i) + " is missing");
    auto it = em.values.find(node.inputs[i]);
    if (it == em.values.end()) fail("input '" + node.inputs[i] + "' is defined by no earlier node");
    return it->second;
}

std::size_t NodeCtx::axis(std::int64_t dim, std::size_t rank) const {
    const auto r = static_cast<std::int64_t>(rank);
    if (dim < -r || dim >= r)
        fail("axis " + std::to_string(dim) + " is out of range for rank " + std::to_string(rank));
    return static_cast<std::size_t>(dim < 0 ? dim + r : dim);
}

std::string tensor_type(Kind k, std::size_t rank) {
    const std::string r = std::to_string(rank);
    switch (k) {
        case Kind::Float: return "ember::Tensor<B, " + r + ">";
        case Kind::Int: return "ember::Tensor<B, " + r + ", ember::Int>";
        case Kind::Bool: return "ember::Tensor<B, " + r + ", ember::Bool>";
    }
    return {};
}

std::string literal(double v) {
    if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
    if (std::isinf(v)) return v > 0 ? "std::numeric_limits<double>::infinity()"
                                     : "-std::numeric_limits<double>::infinity()";
    if (v == std::floor(v) && std::fabs(v) < 1e15) {
        std::ostringstream s;
        s << static_cast<long long>(v) << ".0";
        return s.str();
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

Kind kind_of(DType d) {
    if (is_float(d)) return Kind::Float;
    return d == DType::Bool ? Kind::Bool : Kind::Int;
}

Kind kind_of(int onnx_type) {
    const auto d = dtype_of(onnx_type);
    EMBER_CHECK(d.has_value(), Argument, "ember-onnx: ONNX type ", onnx_type_name(onnx_type),
                " has no ember kind");
    return kind_of(*d);
}

namespace {

std::string shape_literal(const std::vector<std::int64_t>& dims) {
    std::string s = "ember::Shape{";
    for (std::size_t k = 0; k < dims.size(); ++k) s += (k ? ", " : "") + std::to_string(dims[k]);
    return s + "}";
}

std::vector<std::int64_t> ember_dims(const Shape& s) {
    std::vector<std::int64_t> d;
    for (std::size_t k = 0; k < s.rank(); ++k) d.push_back(static_cast<std::int64_t>(s[k]));
    if (d.empty()) d.push_back(1);  // ONNX scalars are held as [1]
    return d;
}

}  // namespace

std::string inline_tensor(const TensorData& data, std::size_t rank, Kind kind) {
    std::ostringstream s;
    const auto dims = ember_dims(data.shape());
    std::vector<std::int64_t> shape = dims;
    while (shape.size() < rank) shape.insert(shape.begin(), 1);
    if (kind == Kind::Float) {
        s << "ember::Tensor<B, " << rank << ">::from_data(ember::TensorData(std::vector<float>{";
        const auto v = data.convert(DType::F32).to_vec<float>();
        for (std::size_t k = 0; k < v.size(); ++k) {
            char buf[40];
            std::snprintf(buf, sizeof buf, "%.9g", double(v[k]));
            std::string f = buf;
            if (f.find_first_of(".e") == std::string::npos) f += ".0";
            s << (k ? ", " : "") << (std::isfinite(v[k]) ? f + "f" : "float(" + literal(v[k]) + ")");
        }
    } else if (kind == Kind::Int) {
        s << tensor_type(kind, rank) << "::from_data(ember::TensorData(std::vector<std::int64_t>{";
        const auto v = data.convert(DType::I64).to_vec<std::int64_t>();
        for (std::size_t k = 0; k < v.size(); ++k) s << (k ? ", " : "") << v[k] << "LL";
    } else {
        s << tensor_type(kind, rank) << "::from_data(ember::TensorData(std::vector<bool>{";
        const auto v = data.convert(DType::Bool).to_vec<bool>();
        for (std::size_t k = 0; k < v.size(); ++k) s << (k ? ", " : "") << (v[k] ? "true" : "false");
    }
    s << "}, " << shape_literal(shape) << "), device)";
    return s.str();
}

std::string NodeCtx::param(std::string_view hint, const TensorData& data) {
    auto dims = ember_dims(data.shape());
    const std::size_t rank = dims.size();
    const std::string type = "ember::Param<" + tensor_type(Kind::Float, rank) + ">";
    const std::string init = type + "(" + tensor_type(Kind::Float, rank) + "::zeros(" +
                             shape_literal(dims) + ", device))";
    std::vector<std::size_t> sdims(dims.begin(), dims.end());
    auto values = data.convert(DType::F32).to_vec<float>();
    TensorData held(std::move(values), Shape(std::span<const std::size_t>(sdims)));
    record::Value rec = record::Map{{"id", ParamId::make().to_string()}, {"param", std::move(held)}};
    return "this->" + field(hint, type, init, std::move(rec)) + ".val()";
}

std::string NodeCtx::field(std::string_view hint, std::string type, std::string init,
                           record::Value record) {
    const std::string name = em.fresh(hint);
    em.fields.push_back({name, std::move(type), std::move(init), std::move(record)});
    return name;
}

std::string NodeCtx::t(std::size_t i) {
    const Value& v0 = in(i);
    if (!v0.var.empty()) return v0.var;
    Value& v = em.values[node.inputs[i]];
    if (!v.constant && v.elems) {  // shape arithmetic, as a tensor after all
        std::string list;
        for (std::size_t k = 0; k < v.elems->size(); ++k)
            list += (k ? ", " : "") + std::string("std::int64_t(") + (*v.elems)[k] + ")";
        v.var = em.fresh(node.inputs[i]);
        em.body.push_back("const auto " + v.var + " = " + tensor_type(Kind::Int, 1) +
                          "::from_data(ember::TensorData(std::vector<std::int64_t>{" + list +
                          "}, ember::Shape{" + std::to_string(v.elems->size()) + "}), device);");
        return v.var;
    }
    if (!v.constant) fail("input '" + node.inputs[i] + "' has no value");  // not reached
    if (v.kind == Kind::Float && v.numel() > 1) {  // weights stay trainable
        v.var = param(node.inputs[i], *v.constant);
    } else {
        v.var = em.fresh(node.inputs[i]);
        em.body.push_back("const auto " + v.var + " = " + inline_tensor(*v.constant, v.rank, v.kind) + ";");
    }
    return v.var;
}

std::string NodeCtx::t_as(std::size_t i, Kind k) {
    const std::string e = t(i);
    const Kind have = in(i).kind;
    if (have == k) return e;
    if (k == Kind::Float) return e + ".float_()";
    if (k == Kind::Int) return e + ".int_()";
    return e + ".bool_()";
}

std::string NodeCtx::t_rank(std::size_t i, std::size_t rank) {
    std::string e = t(i);
    for (std::size_t r = in(i).rank; r < rank; ++r)
        e += ".template unsqueeze_dim<" + std::to_string(r + 1) + ">(0)";
    return e;
}

std::optional<double> NodeCtx::scalar(std::size_t i) const {
    if (!is_const(i) || in(i).constant->num_elements() != 1) return std::nullopt;
    return in(i).constant->convert(DType::F64).to_vec<double>()[0];
}

std::vector<std::int64_t> NodeCtx::ints(std::size_t i, std::string_view what) const {
    if (!is_const(i))
        fail(std::string(what) + " (input " + std::to_string(i) +
             ") must be known when the model is imported");
    if (is_float(in(i).constant->dtype())) fail(std::string(what) + " must be integers");
    return in(i).constant->convert(DType::I64).to_vec<std::int64_t>();
}

std::optional<std::vector<std::string>> NodeCtx::elems(std::size_t i) const {
    const Value& v = in(i);
    if (v.elems) return v.elems;
    if (v.constant && v.kind == Kind::Int && v.rank == 1) {
        std::vector<std::string> out;
        for (auto x : v.constant->convert(DType::I64).to_vec<std::int64_t>())
            out.push_back(std::to_string(x));
        return out;
    }
    return std::nullopt;
}

namespace {
const Attribute* find_attr(const Node& n, std::string_view name) { return n.find(name); }
template <class T>
const T* attr_as(const NodeCtx& c, std::string_view name) {
    const Attribute* a = find_attr(c.node, name);
    if (!a) return nullptr;
    const T* v = std::get_if<T>(&a->value);
    if (!v) c.fail("attribute '" + std::string(name) + "' has an unexpected type");
    return v;
}
}  // namespace

std::int64_t NodeCtx::attr_int(std::string_view name, std::int64_t fallback) const {
    const auto* v = attr_as<std::int64_t>(*this, name);
    return v ? *v : fallback;
}
double NodeCtx::attr_float(std::string_view name, double fallback) const {
    const auto* v = attr_as<float>(*this, name);
    return v ? *v : fallback;
}
std::string NodeCtx::attr_str(std::string_view name, std::string_view fallback) const {
    const auto* v = attr_as<std::string>(*this, name);
    return v ? *v : std::string(fallback);
}
std::vector<std::int64_t> NodeCtx::attr_ints(std::string_view name,
                                             std::vector<std::int64_t> fallback) const {
    const auto* v = attr_as<std::vector<std::int64_t>>(*this, name);
    return v ? *v : fallback;
}
std::vector<float> NodeCtx::attr_floats(std::string_view name, std::vector<float> fallback) const {
    const auto* v = attr_as<std::vector<float>>(*this, name);
    return v ? *v : fallback;
}
const TensorData& NodeCtx::attr_tensor(std::string_view name) const {
    const auto* v = attr_as<Tensor>(*this, name);
    if (!v) fail("attribute '" + std::string(name) + "' is missing");
    return v->data;
}

void NodeCtx::out(std::size_t k, Value v, const std::string& expr) {
    if (k >= node.outputs.size() || node.outputs[k].empty()) return;  // an unused optional output
    require(v.rank >= 1 && v.rank <= kMaxRank, "an output of rank " + std::to_string(v.rank));
    if (v.dims.size() != v.rank) v.dims.assign(v.rank, -1);
    // A dim the handler could not work out, ONNX's shape inference may have (an op whose
    // handler tracks no dims, fed by inputs of static shape): later handlers then fold on it.
    if (auto it = em.inferred.find(node.outputs[k]); it != em.inferred.end()) {
        const auto& inf = it->second;
        const bool same_rank = inf.size() == v.rank || (inf.empty() && v.scalar && v.rank == 1);
        for (std::size_t d = 0; same_rank && d < inf.size(); ++d)
            if (v.dims[d] < 0 && inf[d] >= 0) v.dims[d] = inf[d];
    }
    v.var = em.fresh(node.outputs[k]);
    em.body.push_back("const auto " + v.var + " = " + expr + ";");
    em.values[node.outputs[k]] = std::move(v);
}

void NodeCtx::out_const(std::size_t k, TensorData data) {
    if (k >= node.outputs.size() || node.outputs[k].empty()) return;
    Value v;
    v.kind = kind_of(data.dtype());
    v.scalar = data.shape().rank() == 0;
    v.dims = ember_dims(data.shape());
    v.rank = v.dims.size();
    require(v.rank <= kMaxRank, "a constant of rank " + std::to_string(v.rank));
    v.constant = std::move(data);
    em.values[node.outputs[k]] = std::move(v);
}

void NodeCtx::out_alias(std::size_t k, std::size_t i) {
    if (k >= node.outputs.size() || node.outputs[k].empty()) return;
    em.values[node.outputs[k]] = in(i);
}

// ---- the walk --------------------------------------------------------------------------------

namespace {

std::string recorder_type(const ImportOptions& o) {
    static const std::set<std::string> known = {"NamedMpk", "NamedMpkGz", "Bin", "BinGz", "JsonGz",
                                                "PrettyJson"};
    EMBER_CHECK(known.count(o.record_type), Argument, "ember-onnx: unknown record type '",
                o.record_type, "' (NamedMpk, NamedMpkGz, Bin, BinGz, JsonGz or PrettyJson)");
    return "ember::record::" + o.record_type + "FileRecorder<ember::record::" +
           (o.half_precision ? "Half" : "Full") + "PrecisionSettings>";
}

}  // namespace

std::vector<std::string> supported_ops() {
    std::vector<std::string> out;
    for (const auto& [name, h] : handlers()) out.push_back(name);
    return out;
}

ImportResult import_model(const Model& model, const ImportOptions& options, std::string_view source) {
    // The options name C++ entities of the generated code: they must be identifiers.
    {
        std::string_view ns = options.name_space;
        for (std::size_t at; (at = ns.find("::")) != std::string_view::npos;
             ns.remove_prefix(at + 2))
            EMBER_CHECK(is_identifier(ns.substr(0, at)), Argument, "ember-onnx: namespace '",
                        comment_text(options.name_space), "' is not a C++ identifier");
        EMBER_CHECK(is_identifier(ns), Argument, "ember-onnx: namespace '",
                    comment_text(options.name_space), "' is not a C++ identifier");
        EMBER_CHECK(options.embedded_symbol.empty() || is_identifier(options.embedded_symbol),
                    Argument, "ember-onnx: embedded symbol '",
                    comment_text(options.embedded_symbol), "' is not a C++ identifier");
    }
    Emitter em;
    em.opset = model.opset();
    const Graph& g = model.graph;
    for (const auto& vi : g.value_info) {
        if (!vi.shape) continue;
        auto& dims = em.inferred[vi.name];
        for (const auto& d : *vi.shape) dims.push_back(d.value);
    }
    ImportResult result;

    // Constants first: a graph input with an initializer of the same name is a constant.
    std::set<std::string> initializer_names;
    set_import_graph(&g);
    for (const auto& init : g.initializers) {
        initializer_names.insert(init.name);
        Node holder;
        holder.outputs = {init.name};
        holder.op_type = "initializer";
        NodeCtx ctx(holder, em);
        ctx.out_const(0, init.data);
    }
    // Graph inputs: the forward's parameters.
    std::vector<std::string> params;
    for (std::size_t index = 0; index < g.inputs.size(); ++index) {
        const auto& in = g.inputs[index];
        if (initializer_names.count(in.name)) continue;
        if (auto b = options.bound_inputs.find(in.name); b != options.bound_inputs.end()) {
            Node holder;
            holder.outputs = {in.name};
            holder.op_type = "bound input";
            NodeCtx(holder, em).out_const(0, b->second);
            continue;
        }
        Value v;
        EMBER_CHECK(in.elem_type != 0, Argument, "ember-onnx: graph input '", in.name,
                    "' has no element type");
        v.kind = kind_of(in.elem_type);
        std::vector<std::int64_t> dims;
        if (auto it = options.input_shapes.find(in.name); it != options.input_shapes.end()) {
            dims = it->second;
        } else {
            EMBER_CHECK(in.shape.has_value(), Argument, "ember-onnx: graph input '", in.name,
                        "' has no declared rank (give its shape with --input-shape)");
            for (const auto& d : *in.shape) dims.push_back(d.value);
        }
        v.scalar = dims.empty();
        if (dims.empty()) dims.push_back(1);
        EMBER_CHECK(dims.size() <= kMaxRank, Argument, "ember-onnx: graph input '", in.name,
                    "' has rank ", dims.size());
        v.rank = dims.size();
        v.dims = dims;
        v.var = em.fresh(in.name);
        params.push_back(tensor_type(v.kind, v.rank) + " " + v.var);
        result.inputs.push_back({in.name, "FIB"[int(v.kind)], v.rank, v.scalar, index});
        em.values[in.name] = std::move(v);
    }
    for (const auto& n : g.nodes)
        for (const auto& i : n.inputs) ++em.uses[i];
    for (const auto& o : g.outputs) ++em.uses[o.name];

    const std::string first_input =
        result.inputs.empty() ? "" : em.values[result.inputs[0].name].var;
    // Only some operators' code uses `device` (creation ops): [[maybe_unused]] keeps Clang's
    // -Wunused-variable quiet in the graphs without them.
    em.body.push_back(first_input.empty()
                          ? "[[maybe_unused]] const ember::Device<B> device{};"
                          : "[[maybe_unused]] const auto device = " + first_input + ".device();");
    std::set<std::string> ops;
    const auto& table = handlers();
    for (const auto& n : g.nodes) {
        ops.insert(n.op_type);
        if (!n.domain.empty() && n.domain != "ai.onnx")
            EMBER_FAIL(Argument, "ember-onnx: node ", n.describe(), ": operator domain '",
                       n.domain, "' is not supported (only the standard ONNX operators are)");
        if (em.fused.count(n.outputs.empty() ? "" : n.outputs[0])) continue;
        auto h = table.find(n.op_type);
        if (h == table.end())
            EMBER_FAIL(Argument, "ember-onnx: node ", n.describe(), ": operator ", n.op_type,
                       " is not supported (see docs/onnx-import.md for the list)");
        NodeCtx ctx(n, em);
        h->second(ctx);
        for (const auto& o : n.outputs)
            if (!o.empty() && !em.values.count(o))
                ctx.fail("output '" + o + "' was not produced (an optional output ember-onnx "
                         "does not compute)");
    }
    // The outputs.
    std::vector<std::string> outs;
    {
        Node holder;
        holder.op_type = "graph output";
        for (const auto& o : g.outputs) holder.inputs.push_back(o.name);
        NodeCtx ctx(holder, em);
        for (std::size_t k = 0; k < g.outputs.size(); ++k) {
            outs.push_back(ctx.t(k));
            const Value& v = ctx.in(k);
            result.outputs.push_back({g.outputs[k].name, "FIB"[int(v.kind)], v.rank, v.scalar, k});
        }
    }
    EMBER_CHECK(!outs.empty(), Argument, "ember-onnx: the graph has no outputs");
    em.body.push_back(outs.size() == 1 ? "return " + outs[0] + ";"
                                       : "return std::tuple{" + [&] {
                                             std::string s;
                                             for (std::size_t k = 0; k < outs.size(); ++k)
                                                 s += (k ? ", " : "") + outs[k];
                                             return s;
                                         }() + "};");

    // EMBER_MODULE lists at most kModuleFields fields (EMBER_FOR_EACH's limit): a larger graph's
    // fields go into part structs of at most that many each (ModelPart<K>, upper-case, so no
    // field name made by Emitter::fresh can be one), the Model holding part_<K>; forward reaches
    // a field as this->part_<K>.name and the record nests the same way.
    constexpr std::size_t kModuleFields = 64;
    std::vector<std::vector<Field>> parts;
    std::vector<Field> top_fields;
    if (em.fields.size() <= kModuleFields) {
        top_fields = std::move(em.fields);
    } else {
        EMBER_CHECK(em.fields.size() <= kModuleFields * kModuleFields, Argument,
                    "ember-onnx: ", em.fields.size(), " modules and weights; at most ",
                    kModuleFields * kModuleFields, " fit the generated struct");
        std::map<std::string, std::string, std::less<>> owner;
        for (std::size_t k = 0; k < em.fields.size(); ++k) {
            if (k % kModuleFields == 0) parts.emplace_back();
            owner[em.fields[k].name] = "part_" + std::to_string(parts.size() - 1) + ".";
            parts.back().push_back(std::move(em.fields[k]));
        }
        for (auto& line : em.body) {
            std::string out;
            for (std::size_t at = 0;;) {
                const std::size_t p = line.find("this->", at);
                out.append(line, at, p == std::string::npos ? std::string::npos : p + 6 - at);
                if (p == std::string::npos) break;
                std::size_t e = p + 6;
                while (e < line.size() &&
                       (std::isalnum(static_cast<unsigned char>(line[e])) || line[e] == '_'))
                    ++e;
                const auto it = owner.find(std::string_view(line).substr(p + 6, e - p - 6));
                if (it != owner.end()) out += it->second;
                at = p + 6;
            }
            line = std::move(out);
        }
        for (std::size_t k = 0; k < parts.size(); ++k) {
            const std::string type = "ModelPart" + std::to_string(k) + "<B>";
            std::string init = type + "{";
            record::Map rec;
            for (std::size_t j = 0; j < parts[k].size(); ++j) {
                init += (j ? ",\n                         " : "") + parts[k][j].init;
                rec.emplace_back(parts[k][j].name, std::move(parts[k][j].record));
            }
            top_fields.push_back({"part_" + std::to_string(k), type, init + "}", std::move(rec)});
        }
    }

    // The header.
    std::ostringstream h;
    const std::string rec = recorder_type(options);
    // Text from the file (its name, the producer's) reaches the header only through
    // comment_text, and names only through Emitter::fresh: nothing in a model becomes code.
    h << "// Generated by ember-onnx from " << comment_text(source) << " (";
    if (!model.producer_name.empty())
        h << comment_text(model.producer_name) << " " << comment_text(model.producer_version)
          << ", ";
    h << "ONNX opset " << em.opset << "). Do not edit: regenerate.\n";
    if (!options.record_file.empty())
        h << "// Weights: " << comment_text(options.record_file) << ".\n";
    h << "#pragma once\n#include <ember/ember.hpp>\n#include <ember/nn.hpp>\n"
         "#include <ember/record/recorder.hpp>\n#include <ember/tensor/composed.hpp>\n#include "
         "<ember/tensor/sampling.hpp>\n\n#include <cstddef>\n#include <cstdint>\n"
         "#include <filesystem>\n#include <limits>\n#include <span>\n#include <tuple>\n"
         "#include <utility>\n#include <vector>\n\n";
    if (!options.embedded_symbol.empty())
        h << "extern const unsigned char " << options.embedded_symbol << "[];\nextern const std::size_t "
          << options.embedded_symbol << "_size;\n\n";
    h << "namespace " << options.name_space << " {\n\n";
    for (std::size_t k = 0; k < parts.size(); ++k) {
        h << "/// Fields " << k * kModuleFields << " to " << k * kModuleFields + parts[k].size() - 1
          << " of Model (EMBER_MODULE lists at most " << kModuleFields << ").\n"
          << "template <ember::Backend B>\nstruct ModelPart" << k << " {\n";
        for (const auto& f : parts[k]) h << "    " << f.type << " " << f.name << ";\n";
        h << "    EMBER_MODULE(ModelPart" << k;
        for (const auto& f : parts[k]) h << ", " << f.name;
        h << ")\n};\n\n";
    }
    h << "/// The model imported from " << comment_text(source)
      << ": its modules and constants as fields, its\n"
         "/// graph as `forward`.\ntemplate <ember::Backend B>\nstruct Model {\n";
    for (const auto& f : top_fields) h << "    " << f.type << " " << f.name << ";\n";
    h << "    EMBER_MODULE(Model";
    for (const auto& f : top_fields) h << ", " << f.name;
    h << ")\n\n";
    h << "    /// The recorder of the weights file ember-onnx wrote.\n    using Recorder = " << rec << ";\n\n";
    if (top_fields.empty()) {
        h << "    /// The model (it has no weights).\n"
             "    explicit Model(const ember::Device<B>& device = {}) { (void)device; }\n\n";
    } else {
        h << "    /// The imported graph's modules with freshly initialised weights, on `device`\n"
             "    /// (from_file and from_embedded give the imported weights).\n"
             "    explicit Model(const ember::Device<B>& device = {}) : Model(init(device)) {}\n";
        h << "    /// From its fields, as EMBER_MODULE rebuilds modules.\n    Model(";
        for (std::size_t k = 0; k < top_fields.size(); ++k)
            h << (k ? ", " : "") << top_fields[k].type << " " << top_fields[k].name << "_";
        h << ")\n        : ";
        for (std::size_t k = 0; k < top_fields.size(); ++k)
            h << (k ? ", " : "") << top_fields[k].name << "(std::move(" << top_fields[k].name
              << "_))";
        h << " {}\n\n";
    }
    h << "    /// The model with the imported weights, read from `path` (the file ember-onnx wrote).\n"
         "    static Model from_file(const std::filesystem::path& path,\n"
         "                           const ember::Device<B>& device = {}) {\n"
         "        return Model(device).load_file(path, Recorder{}, device);\n    }\n";
    if (!options.embedded_symbol.empty())
        h << "    /// The model with the imported weights compiled into the program.\n"
             "    static Model from_embedded(const ember::Device<B>& device = {}) {\n"
             "        const auto record = ember::record::BinBytesRecorder<>{}.load(std::as_bytes(\n"
             "            std::span(" << options.embedded_symbol << ", " << options.embedded_symbol
          << "_size)));\n        return Model(device).load_record(record);\n    }\n";
    h << "\n    /// Runs the graph.\n    auto forward(";
    for (std::size_t k = 0; k < params.size(); ++k) h << (k ? ", " : "") << "const " << params[k];
    h << ") const {\n";
    for (const auto& line : em.body) h << "        " << line << "\n";
    h << "    }\n";
    if (!top_fields.empty()) {
        h << "\n  private:\n    static Model init(const ember::Device<B>& device) {\n        return Model(";
        for (std::size_t k = 0; k < top_fields.size(); ++k)
            h << (k ? ",\n                     " : "") << top_fields[k].init;
        h << ");\n    }\n";
    }
    h << "};\n\n}  // namespace " << options.name_space << "\n";
    result.header = h.str();

    record::Map rec_map;
    for (auto& f : top_fields) rec_map.emplace_back(f.name, std::move(f.record));
    result.record = std::move(rec_map);
    result.ops_used.assign(ops.begin(), ops.end());
    return result;
}

}  // namespace ember::onnx
