#include "model.hpp"

#include <ember/record/untrusted.hpp>
#include <ember/tensor/error.hpp>

#include <google/protobuf/io/coded_stream.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

namespace ember::onnx {
namespace {

namespace proto = ::onnx;  // libonnx's generated protobuf classes (onnx-ml.proto)

// ONNX TensorProto.DataType codes.
enum : int {
    kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
    kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13,
    kComplex64 = 14, kComplex128 = 15, kBFloat16 = 16,
};

// Elements a tensor may declare: more than any model ember-onnx is meant for, few enough that
// the product of the dims cannot overflow on the way (in ember or in ONNX's checker after it).
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 34;

// How deep messages may nest (a graph in an attribute of a node of a graph...): protobuf's
// parser stops there, so neither it nor the walks below (ember's, the checker's, shape
// inference's) recurse without end on a hostile file.
constexpr int kMaxDepth = 64;

// The most bytes protobuf parses as one message (its sizes are ints): 2 GiB, the limit ONNX
// itself documents; larger models keep their weights in external files, which ember refuses.
constexpr std::uint64_t kMaxMessageBytes = INT_MAX;

// A name or string from the file, fit for a message (control bytes escaped, length capped).
std::string in_quotes(std::string_view s) {
    return "'" + record::printable(s, 120) + "'";
}

struct Reader {
    std::string_view source;

    [[noreturn]] void fail(std::string_view what) const { EMBER_FAIL(Format, source, ": ", what); }
};

template <class T>
std::vector<std::byte> as_bytes(const T* data, std::size_t n) {
    std::vector<std::byte> out(n * sizeof(T));
    if (n) std::memcpy(out.data(), data, out.size());
    return out;
}

template <class To>
std::vector<std::byte> narrow(const std::vector<std::int64_t>& v) {
    std::vector<To> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<To>(v[i]);
    return as_bytes(out.data(), out.size());
}

// A TensorProto as ember TensorData, after ember's checks: what ember cannot hold is refused,
// the declared size is bounded before anything is allocated, and the data must match it.
Tensor read_tensor(const proto::TensorProto& t, const Reader& r) {
    const std::string what =
        t.name().empty() ? std::string("a tensor") : "tensor " + in_quotes(t.name());
    if (t.data_location() == proto::TensorProto::EXTERNAL || t.external_data_size() > 0)
        r.fail(what + " keeps its data in an external file, which ember-onnx does not read");
    const int type = t.data_type();
    if (type == kString || t.string_data_size() > 0)
        r.fail(what + " holds strings, which ember has no dtype for");
    if (type == kComplex64 || type == kComplex128)
        r.fail(what + " holds complex numbers, which ember has no dtype for");
    if (static_cast<std::size_t>(t.dims_size()) > kMaxRank)
        r.fail(what + " has rank " + std::to_string(t.dims_size()) + ", more than ember's " +
               std::to_string(kMaxRank));
    std::uint64_t n = 1;
    std::vector<std::size_t> dims;
    for (const std::int64_t d : t.dims()) {
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
    switch (type) {
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
        default:
            r.fail(what + " has data type " + std::to_string(type) + ", which is not an ONNX type");
    }
    if (t.has_raw_data()) {
        const std::string& raw = t.raw_data();
        if (raw.size() != n * onnx_size)
            r.fail(what + " has " + std::to_string(raw.size()) + " bytes of raw data for " +
                   std::to_string(n) + " elements of " + std::to_string(onnx_size) + " bytes");
        std::vector<std::byte> bytes = as_bytes(raw.data(), raw.size());
        if (type == kUint16 || type == kUint32) {  // widen
            std::vector<std::int64_t> v(n);
            for (std::size_t i = 0; i < n; ++i) {
                std::uint32_t u = 0;
                std::memcpy(&u, bytes.data() + i * onnx_size, onnx_size);
                v[i] = u;
            }
            bytes = type == kUint16 ? narrow<std::int32_t>(v) : as_bytes(v.data(), v.size());
        } else if (type == kBool) {
            for (auto& b : bytes) b = static_cast<std::byte>(b != std::byte{0});
        }
        return {t.name(), TensorData(std::move(bytes), shape, dt)};
    }
    // Typed fields: float_data, double_data, or the integer fields (int32_data, int64_data and
    // uint64_data, each read as int64).
    const std::size_t ints_have = static_cast<std::size_t>(t.int32_data_size()) +
                                  static_cast<std::size_t>(t.int64_data_size()) +
                                  static_cast<std::size_t>(t.uint64_data_size());
    const std::size_t have = type == kFloat    ? static_cast<std::size_t>(t.float_data_size())
                             : type == kDouble ? static_cast<std::size_t>(t.double_data_size())
                                               : ints_have;
    if (have != n)
        r.fail(what + " has " + std::to_string(have) + " elements for shape " + shape.to_string());
    if (type == kFloat)
        return {t.name(), TensorData(as_bytes(t.float_data().data(), n), shape, dt)};
    if (type == kDouble)
        return {t.name(), TensorData(as_bytes(t.double_data().data(), n), shape, dt)};
    std::vector<std::int64_t> ints;
    ints.reserve(n);
    ints.insert(ints.end(), t.int32_data().begin(), t.int32_data().end());
    ints.insert(ints.end(), t.int64_data().begin(), t.int64_data().end());
    for (const std::uint64_t u : t.uint64_data()) ints.push_back(static_cast<std::int64_t>(u));
    std::vector<std::byte> bytes;
    switch (type) {
        case kInt64:
        case kUint32:
        case kUint64:
            bytes = as_bytes(ints.data(), n);
            break;
        case kInt32:
        case kUint16:
            bytes = narrow<std::int32_t>(ints);
            break;
        case kInt16:
            bytes = narrow<std::int16_t>(ints);
            break;
        case kInt8:
            bytes = narrow<std::int8_t>(ints);
            break;
        case kUint8:
            bytes = narrow<std::uint8_t>(ints);
            break;
        case kBool:
            for (auto& v : ints) v = v != 0;
            bytes = narrow<std::uint8_t>(ints);
            break;
        case kFloat16:
        case kBFloat16:
            bytes = narrow<std::uint16_t>(ints);
            break;  // bits
    }
    return {t.name(), TensorData(std::move(bytes), shape, dt)};
}

ValueInfo read_value_info(const proto::ValueInfoProto& p) {
    ValueInfo v;
    v.name = p.name();
    if (!p.type().has_tensor_type()) return v;  // sequence, map, optional, sparse: not tensors
    const auto& tensor = p.type().tensor_type();
    v.elem_type = tensor.elem_type();
    if (tensor.has_shape()) {
        v.shape.emplace();
        for (const auto& d : tensor.shape().dim())
            v.shape->push_back({d.has_dim_value() ? d.dim_value() : -1, d.dim_param()});
    }
    return v;
}

Graph read_graph(const proto::GraphProto& p, const Reader& r);

Attribute read_attribute(const proto::AttributeProto& p, const Reader& r) {
    Attribute a;
    a.name = p.name();
    const std::string what = "attribute " + in_quotes(a.name);
    // Every tensor the attribute carries is checked, whatever its type says: nothing ember has
    // not bounded reaches ONNX's checker.
    std::vector<Tensor> tensors;
    for (const auto& t : p.tensors()) tensors.push_back(read_tensor(t, r));
    std::optional<Tensor> tensor;
    if (p.has_t()) tensor = read_tensor(p.t(), r);
    std::shared_ptr<Graph> graph;
    if (p.has_g()) graph = std::make_shared<Graph>(read_graph(p.g(), r));
    if (p.has_sparse_tensor() || p.sparse_tensors_size() > 0)
        r.fail(what + " holds sparse tensors, which ember-onnx does not read");
    if (p.graphs_size() > 0) r.fail(what + " is a list of graphs, which ember-onnx does not read");
    switch (p.type()) {
        case proto::AttributeProto::FLOAT:
            if (!p.has_f()) r.fail(what + " of type FLOAT has no float");
            a.value = p.f();
            break;
        case proto::AttributeProto::INT:
            if (!p.has_i()) r.fail(what + " of type INT has no int");
            a.value = std::int64_t{p.i()};
            break;
        case proto::AttributeProto::STRING:
            if (!p.has_s()) r.fail(what + " of type STRING has no string");
            a.value = p.s();
            break;
        case proto::AttributeProto::TENSOR:
            if (!tensor) r.fail(what + " of type TENSOR has no tensor");
            a.value = std::move(*tensor);
            break;
        case proto::AttributeProto::GRAPH:
            if (!graph) r.fail(what + " of type GRAPH has no graph");
            a.value = std::move(graph);
            break;
        case proto::AttributeProto::FLOATS:
            a.value = std::vector<float>(p.floats().begin(), p.floats().end());
            break;
        case proto::AttributeProto::INTS:
            a.value = std::vector<std::int64_t>(p.ints().begin(), p.ints().end());
            break;
        case proto::AttributeProto::STRINGS:
            a.value = std::vector<std::string>(p.strings().begin(), p.strings().end());
            break;
        case proto::AttributeProto::TENSORS:
            a.value = std::move(tensors);
            break;
        default:
            r.fail(what + " has attribute type " + std::to_string(int(p.type())) +
                   " (sparse tensors and type protos are not read)");
    }
    return a;
}

Node read_node(const proto::NodeProto& p, const Reader& r) {
    Node n;
    n.name = p.name();
    n.op_type = p.op_type();
    n.domain = p.domain();
    n.inputs.assign(p.input().begin(), p.input().end());
    n.outputs.assign(p.output().begin(), p.output().end());
    if (n.op_type.empty()) r.fail("a node without an op_type");
    for (const auto& a : p.attribute()) n.attributes.push_back(read_attribute(a, r));
    return n;
}

Graph read_graph(const proto::GraphProto& p, const Reader& r) {
    if (p.sparse_initializer_size() > 0) r.fail("sparse initializers are not read");
    Graph g;
    g.name = p.name();
    for (const auto& n : p.node()) g.nodes.push_back(read_node(n, r));
    for (const auto& t : p.initializer()) g.initializers.push_back(read_tensor(t, r));
    for (const auto& v : p.input()) g.inputs.push_back(read_value_info(v));
    for (const auto& v : p.output()) g.outputs.push_back(read_value_info(v));
    for (const auto& v : p.value_info()) g.value_info.push_back(read_value_info(v));
    for (std::size_t k = 0; k < g.nodes.size(); ++k) g.nodes[k].index = k;
    return g;
}

// Parses `bytes` as message `m` under protobuf's limits; false when protobuf refuses them.
bool parse_limited(google::protobuf::MessageLite& m, std::span<const std::byte> bytes) {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    in.SetRecursionLimit(kMaxDepth);
    in.SetTotalBytesLimit(static_cast<int>(bytes.size()));
    return m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

void check_message_size(std::span<const std::byte> bytes, std::string_view source) {
    if (bytes.size() > kMaxMessageBytes)
        EMBER_FAIL(Format, source, ": ", bytes.size(),
                   " bytes, more than the 2 GiB protobuf reads as one message (models that large "
                   "keep their weights in external files, which ember-onnx does not read)");
}

// `dims` written into graph input `name`'s declared type (a negative dim becomes unknown).
void declare_shape(proto::GraphProto& g, const std::string& name,
                   const std::vector<std::int64_t>& dims) {
    for (auto& in : *g.mutable_input()) {
        if (in.name() != name || !in.type().has_tensor_type()) continue;
        auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->clear_dim();
        for (const auto d : dims) {
            auto* dim = shape->add_dim();
            if (d >= 0) dim->set_dim_value(d);
        }
    }
}

// What the child process running ONNX's checker and shape inference reports: 'K' and the
// inferred value_info (a serialized GraphProto), 'C' or 'I' and the checker's or inference's
// message, or anything else and ember's account of how the child failed.
struct Checked {
    char status = 0;
    std::string text;
};

// Seconds the checker and shape inference may take on one model.
constexpr unsigned kCheckSeconds = 120;

bool write_all(int fd, const char* data, std::size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        data += w, n -= static_cast<std::size_t>(w);
    }
    return true;
}

// The child's side: runs the checker and inference on `p`, writes status and text, exits.
[[noreturn]] void check_in_child(proto::ModelProto& p, int fd) {
    // A crash ends the child plainly: handlers the parent installed (a fuzzer's, which would
    // report the parent's input as a crash) are not the child's business.
    for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM})
        std::signal(sig, SIG_DFL);
    ::alarm(kCheckSeconds);
    char status = 'K';
    std::string text;
    // A model of a newer IR version than this libonnx knows (ONNX 1.12: IR 8) is checked as
    // one of that version: what later versions added (new data types) ember refuses itself.
    if (p.ir_version() > proto::IR_VERSION) p.set_ir_version(proto::IR_VERSION);
    try {
        proto::checker::check_model(p);
    } catch (const std::exception& e) {
        status = 'C', text = e.what();
    } catch (...) {
        status = 'C', text = "(an exception that is not a std::exception)";
    }
    if (status == 'K') {
        try {
            proto::shape_inference::InferShapes(p);
            proto::GraphProto shapes;
            *shapes.mutable_value_info() = p.graph().value_info();
            text = shapes.SerializeAsString();
        } catch (const std::exception& e) {
            status = 'I', text = e.what();
        } catch (...) {
            status = 'I', text = "(an exception that is not a std::exception)";
        }
    }
    const bool ok = write_all(fd, &status, 1) && write_all(fd, text.data(), text.size());
    ::_exit(ok ? 0 : 3);  // no atexit handlers, no destructors of the parent's objects
}

Checked check_and_infer(proto::ModelProto& p) {
    int fds[2];
    if (::pipe(fds) != 0)
        return {0, std::string("cannot run ONNX's checker: pipe: ") + std::strerror(errno)};
    std::fflush(nullptr);  // nothing buffered is written twice
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]), ::close(fds[1]);
        return {0, std::string("cannot run ONNX's checker: fork: ") + std::strerror(errno)};
    }
    if (pid == 0) {
        ::close(fds[0]);
        check_in_child(p, fds[1]);
    }
    ::close(fds[1]);
    std::string out;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (out.size() + static_cast<std::size_t>(n) > kMaxMessageBytes) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGALRM)
        return {0, "ONNX's checker and shape inference took more than " +
                       std::to_string(kCheckSeconds) + " s on the model"};
    if (WIFSIGNALED(wstatus))
        return {0, "ONNX's checker or shape inference crashed on the model (signal " +
                       std::to_string(WTERMSIG(wstatus)) +
                       "; libonnx is not hardened against malformed models)"};
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || out.empty())
        return {0, "ONNX's checker or shape inference failed on the model (exit status " +
                       std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) + ")"};
    return {out[0], out.substr(1)};
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

Model parse_model(std::span<const std::byte> bytes, std::string_view source,
                  const InputShapes& input_shapes) {
    check_message_size(bytes, source);
    proto::ModelProto p;
    if (!parse_limited(p, bytes))
        EMBER_FAIL(Format, source,
                   ": not an ONNX model: the protobuf parser refuses the bytes (truncated or "
                   "malformed, or messages nested more than ",
                   kMaxDepth, " deep)");
    const Reader r{source};
    // ember's own checks first: the tensors' sizes are bounded and their data matches them
    // before ONNX's checker, which trusts the declared sizes, walks the model.
    if (!p.has_graph()) r.fail("not an ONNX model (no graph)");
    Model m;
    m.ir_version = p.ir_version();
    m.producer_name = p.producer_name();
    m.producer_version = p.producer_version();
    for (const auto& o : p.opset_import()) m.opsets.push_back({o.domain(), o.version()});
    if (m.opset() == 0) r.fail("the model imports no standard opset");
    for (const auto& [name, dims] : input_shapes) declare_shape(*p.mutable_graph(), name, dims);
    m.graph = read_graph(p.graph(), r);
    for (const auto& f : p.functions())  // not imported, but the checker reads them
        for (const auto& n : f.node()) (void)read_node(n, r);
    p.clear_training_info();  // never imported; nothing ember has not checked goes on

    // ONNX's checker, then its shape inference, in a child process: libonnx 1.12 is not
    // hardened against malformed models (the fuzzer crashed its ConvTranspose inference with a
    // weight dim that has no value), and a crash there must be a refusal, not ember-onnx's.
    p.mutable_graph()->clear_value_info();  // only what inference derives is used, not claims
    const auto checked = check_and_infer(p);
    if (checked.status == 'C')
        r.fail("ONNX's checker refuses the model: " + record::printable(checked.text, 600));
    if (checked.status == 'I')
        r.fail("ONNX's shape inference refuses the model: " + record::printable(checked.text, 600));
    if (checked.status != 'K') r.fail(checked.text);
    proto::GraphProto inferred;
    if (!parse_limited(inferred, std::as_bytes(std::span(checked.text))))
        r.fail("ONNX's shape inference returned unreadable shapes");
    m.graph.value_info.clear();
    for (const auto& v : inferred.value_info()) m.graph.value_info.push_back(read_value_info(v));
    return m;
}

Model load_model(const std::filesystem::path& path, const InputShapes& input_shapes) {
    // A regular file within ember's read limits (EMBER_MAX_READ_BYTES), checked before reading.
    record::detail::RegularFile file(path, "an ONNX model");
    if (file.size() > kMaxMessageBytes)
        EMBER_FAIL(Format, "ONNX model '", path.string(), "': ", file.size(),
                   " bytes, more than the 2 GiB protobuf reads as one message (models that large "
                   "keep their weights in external files, which ember-onnx does not read)");
    const auto bytes = file.read_all();
    return parse_model(bytes, path.string(), input_shapes);
}

Tensor parse_tensor(std::span<const std::byte> bytes, std::string_view source) {
    check_message_size(bytes, source);
    proto::TensorProto t;
    if (!parse_limited(t, bytes))
        EMBER_FAIL(Format, source,
                   ": not an ONNX TensorProto: the protobuf parser refuses the bytes (truncated "
                   "or malformed)");
    return read_tensor(t, Reader{source});
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
