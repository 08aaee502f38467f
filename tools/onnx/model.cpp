#include "model.hpp"

#include <ember/tensor/error.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "protobuf.hpp"

namespace ember::onnx {
namespace {

using pb::Reader;

// ONNX TensorProto.DataType codes.
enum : int {
    kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
    kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13,
    kComplex64 = 14, kComplex128 = 15, kBFloat16 = 16,
};

// Elements a tensor may declare: more than any model ember-onnx is meant for, few enough that
// the product of the dims cannot overflow on the way.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 34;

// Where a tensor's elements were in the file, before they become TensorData.
struct RawTensor {
    std::string name;
    std::vector<std::int64_t> dims;
    int data_type = 0;
    std::span<const std::byte> raw;
    bool has_raw = false;
    std::vector<float> floats;
    std::vector<double> doubles;
    std::vector<std::int64_t> ints;  // int32_data, int64_data and uint64_data, widened
    bool external = false, strings = false;
};

template <class T>
std::vector<std::byte> as_bytes(const std::vector<T>& v) {
    std::vector<std::byte> out(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
    return out;
}

template <class To>
std::vector<std::byte> narrow(const std::vector<std::int64_t>& v) {
    std::vector<To> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<To>(v[i]);
    return as_bytes(out);
}

Tensor finish(RawTensor&& t, const Reader& r) {
    const std::string what = t.name.empty() ? std::string("a tensor") : "tensor '" + t.name + "'";
    if (t.external) r.fail(what + " keeps its data in an external file, which ember-onnx does not read");
    if (t.data_type == kString || t.strings) r.fail(what + " holds strings, which ember has no dtype for");
    if (t.data_type == kComplex64 || t.data_type == kComplex128)
        r.fail(what + " holds complex numbers, which ember has no dtype for");
    if (t.dims.size() > kMaxRank)
        r.fail(what + " has rank " + std::to_string(t.dims.size()) + ", more than ember's " +
               std::to_string(kMaxRank));
    std::uint64_t n = 1;
    std::vector<std::size_t> dims;
    for (auto d : t.dims) {
        if (d < 0) r.fail(what + " has a negative dim " + std::to_string(d));
        if (d != 0 && n > kMaxElements / static_cast<std::uint64_t>(d))
            r.fail(what + " declares more than 2^34 elements");
        n *= static_cast<std::uint64_t>(d);
        dims.push_back(static_cast<std::size_t>(d));
    }
    const Shape shape{std::span<const std::size_t>(dims)};
    // The dtype ember keeps: unsigned types ember lacks widen to the next signed one.
    DType dt;
    std::size_t onnx_size;
    switch (t.data_type) {
        case kFloat: dt = DType::F32, onnx_size = 4; break;
        case kDouble: dt = DType::F64, onnx_size = 8; break;
        case kFloat16: dt = DType::F16, onnx_size = 2; break;
        case kBFloat16: dt = DType::BF16, onnx_size = 2; break;
        case kInt64: dt = DType::I64, onnx_size = 8; break;
        case kInt32: dt = DType::I32, onnx_size = 4; break;
        case kInt16: dt = DType::I16, onnx_size = 2; break;
        case kInt8: dt = DType::I8, onnx_size = 1; break;
        case kUint8: dt = DType::U8, onnx_size = 1; break;
        case kBool: dt = DType::Bool, onnx_size = 1; break;
        case kUint16: dt = DType::I32, onnx_size = 2; break;
        case kUint32: dt = DType::I64, onnx_size = 4; break;
        case kUint64: dt = DType::I64, onnx_size = 8; break;
        default: r.fail(what + " has data type " + std::to_string(t.data_type) + ", which is not an ONNX type");
    }
    if (t.has_raw) {
        if (t.raw.size() != n * onnx_size)
            r.fail(what + " has " + std::to_string(t.raw.size()) + " bytes of raw data for " +
                   std::to_string(n) + " elements of " + std::to_string(onnx_size) + " bytes");
        std::vector<std::byte> bytes(t.raw.begin(), t.raw.end());
        if (t.data_type == kUint16 || t.data_type == kUint32) {  // widen
            std::vector<std::int64_t> v(n);
            for (std::size_t i = 0; i < n; ++i) {
                std::uint32_t u = 0;
                std::memcpy(&u, bytes.data() + i * onnx_size, onnx_size);
                v[i] = u;
            }
            bytes = t.data_type == kUint16 ? narrow<std::int32_t>(v) : as_bytes(v);
        } else if (t.data_type == kBool) {
            for (auto& b : bytes) b = static_cast<std::byte>(b != std::byte{0});
        }
        return {std::move(t.name), TensorData(std::move(bytes), shape, dt)};
    }
    // Typed fields: float_data, double_data, or the integer fields.
    std::size_t have = t.data_type == kFloat ? t.floats.size()
                       : t.data_type == kDouble ? t.doubles.size() : t.ints.size();
    if (have != n)
        r.fail(what + " has " + std::to_string(have) + " elements for shape " + shape.to_string());
    std::vector<std::byte> bytes;
    switch (t.data_type) {
        case kFloat: bytes = as_bytes(t.floats); break;
        case kDouble: bytes = as_bytes(t.doubles); break;
        case kInt64: case kUint32: case kUint64: bytes = as_bytes(t.ints); break;
        case kInt32: case kUint16: bytes = narrow<std::int32_t>(t.ints); break;
        case kInt16: bytes = narrow<std::int16_t>(t.ints); break;
        case kInt8: bytes = narrow<std::int8_t>(t.ints); break;
        case kUint8: bytes = narrow<std::uint8_t>(t.ints); break;
        case kBool:
            for (auto& v : t.ints) v = v != 0;
            bytes = narrow<std::uint8_t>(t.ints);
            break;
        case kFloat16: case kBFloat16: bytes = narrow<std::uint16_t>(t.ints); break;  // bits
    }
    return {std::move(t.name), TensorData(std::move(bytes), shape, dt)};
}

Tensor read_tensor(Reader r) {
    RawTensor t;
    while (r.next()) {
        switch (r.field()) {
            case 1: r.append_varints(t.dims); break;
            case 2: t.data_type = static_cast<int>(r.int64()); break;
            case 4: r.append_floats(t.floats); break;
            case 5: case 7: r.append_varints(t.ints); break;
            case 6: t.strings = true, r.skip(); break;
            case 8: t.name = r.string(); break;
            case 9: t.raw = r.bytes(), t.has_raw = true; break;
            case 10: r.append_doubles(t.doubles); break;
            case 11: r.append_varints(t.ints); break;
            case 13: t.external = true, r.skip(); break;
            case 14: t.external = t.external || r.int64() == 1; break;
            default: r.skip();
        }
    }
    return finish(std::move(t), r);
}

Dim read_dim(Reader r) {
    Dim d;
    while (r.next()) {
        if (r.field() == 1) d.value = r.int64();
        else if (r.field() == 2) d.param = r.string();
        else r.skip();
    }
    return d;
}

ValueInfo read_value_info(Reader r) {
    ValueInfo v;
    while (r.next()) {
        if (r.field() == 1) {
            v.name = r.string();
        } else if (r.field() == 2) {  // TypeProto
            Reader type = r.message("TypeProto");
            while (type.next()) {
                if (type.field() != 1) {  // sequence, map, optional, sparse: not tensors
                    type.skip();
                    continue;
                }
                Reader tensor = type.message("TypeProto.Tensor");
                while (tensor.next()) {
                    if (tensor.field() == 1) {
                        v.elem_type = static_cast<int>(tensor.int64());
                    } else if (tensor.field() == 2) {
                        Reader shape = tensor.message("TensorShapeProto");
                        v.shape.emplace();
                        while (shape.next()) {
                            if (shape.field() == 1) v.shape->push_back(read_dim(shape.message("Dimension")));
                            else shape.skip();
                        }
                    } else {
                        tensor.skip();
                    }
                }
            }
        } else {
            r.skip();
        }
    }
    return v;
}

Graph read_graph(Reader r);

Attribute read_attribute(Reader r) {
    Attribute a;
    std::int64_t type = 0;
    std::optional<float> f;
    std::optional<std::int64_t> i;
    std::optional<std::string> s;
    std::optional<Tensor> t;
    std::shared_ptr<Graph> g;
    std::vector<float> floats;
    std::vector<std::int64_t> ints;
    std::vector<std::string> strings;
    std::vector<Tensor> tensors;
    bool graphs = false;
    while (r.next()) {
        switch (r.field()) {
            case 1: a.name = r.string(); break;
            case 2: f = r.f32(); break;
            case 3: i = r.int64(); break;
            case 4: s = r.string(); break;
            case 5: t = read_tensor(r.message("TensorProto")); break;
            case 6: g = std::make_shared<Graph>(read_graph(r.message("GraphProto"))); break;
            case 7: r.append_floats(floats); break;
            case 8: r.append_varints(ints); break;
            case 9: strings.push_back(r.string()); break;
            case 10: tensors.push_back(read_tensor(r.message("TensorProto"))); break;
            case 11: graphs = true, r.skip(); break;
            case 20: type = r.int64(); break;
            default: r.skip();
        }
    }
    const std::string what = "attribute '" + a.name + "'";
    switch (type) {
        case 1: if (!f) r.fail(what + " of type FLOAT has no float"); a.value = *f; break;
        case 2: if (!i) r.fail(what + " of type INT has no int"); a.value = *i; break;
        case 3: if (!s) r.fail(what + " of type STRING has no string"); a.value = std::move(*s); break;
        case 4: if (!t) r.fail(what + " of type TENSOR has no tensor"); a.value = std::move(*t); break;
        case 5: if (!g) r.fail(what + " of type GRAPH has no graph"); a.value = std::move(g); break;
        case 6: a.value = std::move(floats); break;
        case 7: a.value = std::move(ints); break;
        case 8: a.value = std::move(strings); break;
        case 9: a.value = std::move(tensors); break;
        case 10: r.fail(what + " is a list of graphs, which ember-onnx does not read");
        default:
            r.fail(what + " has attribute type " + std::to_string(type) +
                   " (sparse tensors and type protos are not read)");
    }
    (void)graphs;
    return a;
}

Node read_node(Reader r) {
    Node n;
    while (r.next()) {
        switch (r.field()) {
            case 1: n.inputs.push_back(r.string()); break;
            case 2: n.outputs.push_back(r.string()); break;
            case 3: n.name = r.string(); break;
            case 4: n.op_type = r.string(); break;
            case 5: n.attributes.push_back(read_attribute(r.message("AttributeProto"))); break;
            case 7: n.domain = r.string(); break;
            default: r.skip();
        }
    }
    if (n.op_type.empty()) r.fail("a node without an op_type");
    return n;
}

Graph read_graph(Reader r) {
    Graph g;
    while (r.next()) {
        switch (r.field()) {
            case 1: g.nodes.push_back(read_node(r.message("NodeProto"))); break;
            case 2: g.name = r.string(); break;
            case 5: g.initializers.push_back(read_tensor(r.message("TensorProto"))); break;
            case 11: g.inputs.push_back(read_value_info(r.message("ValueInfoProto"))); break;
            case 12: g.outputs.push_back(read_value_info(r.message("ValueInfoProto"))); break;
            case 13: g.value_info.push_back(read_value_info(r.message("ValueInfoProto"))); break;
            case 15: r.fail("sparse initializers are not read");
            default: r.skip();
        }
    }
    for (std::size_t k = 0; k < g.nodes.size(); ++k) g.nodes[k].index = k;
    return g;
}

}  // namespace

const Attribute* Node::find(std::string_view name) const {
    for (const auto& a : attributes)
        if (a.name == name) return &a;
    return nullptr;
}

std::string Node::describe() const {
    return (name.empty() ? "#" + std::to_string(index) : "'" + name + "'") + " (" + op_type + ")";
}

std::int64_t Model::opset() const {
    for (const auto& o : opsets)
        if (o.domain.empty() || o.domain == "ai.onnx") return o.version;
    return 0;
}

Model parse_model(std::span<const std::byte> bytes, std::string_view source) {
    Reader r(bytes, source, "ModelProto");
    Model m;
    bool has_graph = false;
    while (r.next()) {
        switch (r.field()) {
            case 1: m.ir_version = r.int64(); break;
            case 2: m.producer_name = r.string(); break;
            case 3: m.producer_version = r.string(); break;
            case 7: m.graph = read_graph(r.message("GraphProto")), has_graph = true; break;
            case 8: {
                Reader o = r.message("OperatorSetIdProto");
                OpsetImport op{"", 0};
                while (o.next()) {
                    if (o.field() == 1) op.domain = o.string();
                    else if (o.field() == 2) op.version = o.int64();
                    else o.skip();
                }
                m.opsets.push_back(std::move(op));
                break;
            }
            default: r.skip();
        }
    }
    if (!has_graph) EMBER_FAIL(Format, source, ": not an ONNX model (no graph)");
    if (m.opset() == 0) EMBER_FAIL(Format, source, ": the model imports no standard opset");
    return m;
}

Model load_model(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    EMBER_CHECK(in.good(), Format, "ONNX model '", path.string(), "' cannot be read");
    std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return parse_model(std::as_bytes(std::span(bytes)), path.string());
}

Tensor parse_tensor(std::span<const std::byte> bytes, std::string_view source) {
    return read_tensor(Reader(bytes, source, "TensorProto"));
}

std::optional<DType> dtype_of(int t) {
    switch (t) {
        case kFloat: return DType::F32;
        case kDouble: return DType::F64;
        case kFloat16: return DType::F16;
        case kBFloat16: return DType::BF16;
        case kInt64: case kUint32: case kUint64: return DType::I64;
        case kInt32: case kUint16: return DType::I32;
        case kInt16: return DType::I16;
        case kInt8: return DType::I8;
        case kUint8: return DType::U8;
        case kBool: return DType::Bool;
        default: return std::nullopt;
    }
}

std::string_view onnx_type_name(int t) {
    constexpr std::string_view names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",
                                          "INT16",     "INT32",  "INT64",     "STRING",     "BOOL",
                                          "FLOAT16",   "DOUBLE", "UINT32",    "UINT64",     "COMPLEX64",
                                          "COMPLEX128", "BFLOAT16"};
    return t >= 0 && t < 17 ? names[t] : "unknown";
}

}  // namespace ember::onnx
