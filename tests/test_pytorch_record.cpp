// PyTorch files: tests/fixtures/pytorch/*.pt written by torch.save (gen_pytorch.py) read back and
// compared with what torch.load reads (expected.json, from the same script); modules loaded
// through PyTorchFileRecorder with LoadArgs and their outputs compared with PyTorch's; and each
// way a file can be broken — zip container, pickle program, tensor descriptions — giving a
// FormatError that names the file and the problem.
#include <ember/nn.hpp>
#include <ember/record/pytorch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <variant>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness.hpp"

namespace test_pytorch_record {

namespace {

namespace fs = std::filesystem;
namespace rec = ember::record;
using B = ember::Cpu;
using ember::DType;
using ember::Shape;
using ember::TensorData;

const fs::path kDir = fs::path(EMBER_FIXTURE_DIR) / "pytorch";

std::vector<std::byte> read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::byte> out(chars.size());
    std::memcpy(out.data(), chars.data(), chars.size());
    return out;
}

const nlohmann::json& expected() {
    static const nlohmann::json j = [] {
        std::ifstream in(kDir / "expected.json");
        return nlohmann::json::parse(in);
    }();
    return j;
}

// A tensor of expected.json: {"shape", "dtype", "data"} as torch.load read it.
TensorData expected_tensor(const nlohmann::json& j) {
    Shape shape;
    for (const auto& d : j["shape"]) shape.push_back(d.get<std::size_t>());
    const std::string dt = j["dtype"];
    const std::pair<const char*, DType> names[] = {
        {"f32", DType::F32}, {"f64", DType::F64},  {"f16", DType::F16}, {"bf16", DType::BF16},
        {"i64", DType::I64}, {"i32", DType::I32},  {"i16", DType::I16}, {"i8", DType::I8},
        {"u8", DType::U8},   {"bool", DType::Bool}};
    DType dtype = DType::F32;
    for (const auto& [n, d] : names)
        if (dt == n) dtype = d;
    if (dtype == DType::Bool) return TensorData(j["data"].get<std::vector<bool>>(), shape);
    if (ember::is_float(dtype))  // every value is exact in float64 (the script wrote it so)
        return TensorData(j["data"].get<std::vector<double>>(), shape).convert(dtype);
    return TensorData(j["data"].get<std::vector<std::int64_t>>(), shape).convert(dtype);
}

TensorData expected_tensor(const std::string& file, const std::string& key) {
    return expected_tensor(expected().at(file).at(key));
}

// ---- hand-made hostile files -------------------------------------------------------------------

std::uint32_t crc32(std::string_view s) {
    std::uint32_t c = 0xffffffffu;
    for (unsigned char b : s) {
        c ^= b;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

void put16(std::string& s, std::uint32_t v) {
    s += char(v & 0xff);
    s += char((v >> 8) & 0xff);
}
void put32(std::string& s, std::uint32_t v) {
    put16(s, v & 0xffff);
    put16(s, v >> 16);
}

// A zip of stored entries; `method` and `declared` (size) may lie about the first entry.
std::vector<std::byte> make_zip(const std::vector<std::pair<std::string, std::string>>& entries,
                                std::uint16_t method = 0, std::uint32_t declared = 0) {
    std::string out, dir;
    bool first = true;
    for (const auto& [name, data] : entries) {
        const std::uint32_t offset = std::uint32_t(out.size());
        const std::uint32_t size = first && declared ? declared : std::uint32_t(data.size());
        const std::uint16_t m = first ? method : 0;
        out += "PK\x03\x04";
        put16(out, 20), put16(out, 0), put16(out, m), put32(out, 0);
        put32(out, crc32(data)), put32(out, std::uint32_t(data.size())), put32(out, size);
        put16(out, std::uint32_t(name.size())), put16(out, 0);
        out += name + data;
        dir += "PK\x01\x02";
        put16(dir, 20), put16(dir, 20), put16(dir, 0), put16(dir, m), put32(dir, 0);
        put32(dir, crc32(data)), put32(dir, std::uint32_t(data.size())), put32(dir, size);
        put16(dir, std::uint32_t(name.size())), put16(dir, 0), put16(dir, 0), put16(dir, 0);
        put16(dir, 0), put32(dir, 0), put32(dir, offset);
        dir += name;
        first = false;
    }
    const std::uint32_t dir_offset = std::uint32_t(out.size());
    out += dir;
    out += "PK\x05\x06";
    put16(out, 0), put16(out, 0), put16(out, std::uint32_t(entries.size()));
    put16(out, std::uint32_t(entries.size())), put32(out, std::uint32_t(dir.size()));
    put32(out, dir_offset), put16(out, 0);
    std::vector<std::byte> bytes(out.size());
    std::memcpy(bytes.data(), out.data(), out.size());
    return bytes;
}

// A pickle program written opcode by opcode.
struct Pickle {
    std::string b = "\x80\x02";
    Pickle& op(char c) {
        b += c;
        return *this;
    }
    Pickle& str(std::string_view s) {
        b += 'X';
        put32(b, std::uint32_t(s.size()));
        b += s;
        return *this;
    }
    Pickle& i(std::int64_t v) {  // LONG1 of 8 bytes: any int64
        b += '\x8a';
        b += '\x08';
        for (int k = 0; k < 8; ++k) b += char((std::uint64_t(v) >> (8 * k)) & 0xff);
        return *this;
    }
    Pickle& global(std::string_view module, std::string_view name) {
        b += 'c';
        b += module;
        b += '\n';
        b += name;
        b += '\n';
        return *this;
    }
    Pickle& tuple(const std::vector<std::int64_t>& v) {
        op('(');
        for (auto x : v) i(x);
        return op('t');
    }
};

// The argument tuple of _rebuild_tensor_v2 for a view of storage "0" (class `cls`, `numel`
// elements) at `offset`, `sizes`, `strides`.
void tensor_args(Pickle& p, std::string_view cls, std::int64_t numel, std::int64_t offset,
                 const std::vector<std::int64_t>& sizes, const std::vector<std::int64_t>& strides) {
    p.op('(');
    p.op('(').str("storage").global("torch", cls).str("0").str("cpu").i(numel).op('t').op('Q');
    p.i(offset).tuple(sizes).tuple(strides).op('\x89');
    p.global("collections", "OrderedDict").op(')').op('R');
    p.op('t');
}

// {"w": that tensor}.
std::string tensor_pickle(std::string_view cls, std::int64_t numel, std::int64_t offset,
                          const std::vector<std::int64_t>& sizes,
                          const std::vector<std::int64_t>& strides) {
    Pickle p;
    p.op('}').op('(').str("w").global("torch._utils", "_rebuild_tensor_v2");
    tensor_args(p, cls, numel, offset, sizes, strides);
    p.op('R').op('u').op('.');
    return p.b;
}

std::vector<std::byte> torch_zip(const std::string& pickle, const std::string& storage) {
    return make_zip({{"archive/data.pkl", pickle}, {"archive/data/0", storage}});
}

void check_fails(const std::vector<std::byte>& bytes, const std::string& why) {
    INFO("expected: " << why);
    CHECK_THROWS_AS(rec::decode_pytorch_tensors(bytes, "hostile.pt"), ember::FormatError);
    CHECK_THROWS_WITH(rec::decode_pytorch_tensors(bytes, "hostile.pt"),
                      Catch::Contains("hostile.pt") && Catch::Contains(why));
}

void check_pickle_fails(const std::string& pickle, const std::string& why) {
    check_fails(torch_zip(pickle, std::string(16, '\0')), why);
}

// ---- modules mirroring the PyTorch ones of gen_pytorch.py ------------------------------------

template <ember::Backend BB>
struct Mlp {
    std::vector<ember::nn::Linear<BB>> layers;
    EMBER_MODULE(Mlp, layers)

    ember::Tensor<BB, 2> forward(ember::Tensor<BB, 2> x) const {
        for (std::size_t i = 0; i < layers.size(); ++i) {
            x = layers[i].forward(x);
            if (i + 1 < layers.size()) x = ember::activation::relu(x);
        }
        return x;
    }
};

Mlp<B> make_mlp() {
    using ember::nn::LinearConfig;
    return {
        {LinearConfig{4, 8}.init<B>(), LinearConfig{8, 8}.init<B>(), LinearConfig{8, 2}.init<B>()}};
}

template <ember::Backend BB>
struct Net {
    ember::nn::Conv2d<BB> conv;
    ember::nn::BatchNorm<BB> bn;
    ember::nn::Linear<BB> fc;
    EMBER_MODULE(Net, conv, bn, fc)

    ember::Tensor<BB, 2> forward(const ember::Tensor<BB, 4>& x) const {
        auto y = ember::activation::relu(bn.forward(conv.forward(x)));
        return fc.forward(y.template flatten<2>(1, 3));
    }
};

Net<B> make_net() {
    using namespace ember::nn;
    return {Conv2dConfig{{2, 4}, {3, 3}}.with_padding(PaddingConfig2d::Explicit(1, 1)).init<B>(),
            BatchNormConfig{4}.init<B>(), LinearConfig{64, 3}.init<B>()};
}

// The same Linear twice: the second is not in checkpoint.pt's state_dict.
template <ember::Backend BB>
struct TwoHeads {
    ember::nn::Linear<BB> fc;
    ember::nn::Linear<BB> extra;
    EMBER_MODULE(TwoHeads, fc, extra)
};

// Only the last layer of Net.
struct OnlyFc {
    ember::nn::Linear<B> fc;
    EMBER_MODULE(OnlyFc, fc)
};

// Two of Mlp's three layers.
struct Two {
    std::vector<ember::nn::Linear<B>> layers;
    EMBER_MODULE(Two, layers)
};

// A float parameter named like dtypes.pt's int64 tensor.
struct FloatI64 {
    ember::Param<ember::Tensor<B, 1>> i64;
    EMBER_MODULE(FloatI64, i64)
};

// A config whose fields config.pt holds.
struct TinyConfig {
    std::size_t d_model = 0;
    std::size_t n_heads = 0;
    double dropout = 0.1;
    std::string name;
    bool norm_first = false;
    EMBER_CONFIG(TinyConfig, d_model, n_heads, dropout, name, norm_first)
};

TensorData data_of(const ember::Param<ember::Tensor<B, 2>>& p) {
    return p.val().to_data();
}

}  // namespace

TEST_CASE("pytorch: files read back as torch.load reads them", "[pytorch]") {
    for (const char* file : {"dtypes.pt", "views.pt", "misc.pt", "checkpoint.pt", "sequential.pt",
                             "model.pt", "deflated.pt", "big_endian.pt"}) {
        INFO(file);
        const rec::NamedTensors got = rec::read_pytorch_tensors(kDir / file);
        const auto& want = expected().at(file);
        std::set<std::string> keys;
        for (const auto& [k, t] : got) {
            INFO(k);
            keys.insert(k);
            REQUIRE(want.contains(k));
            CHECK(t == expected_tensor(want.at(k)));  // exact: shape, dtype and bytes
        }
        CHECK(keys.size() == got.size());
        CHECK(keys.size() == want.size());
    }
}

TEST_CASE("pytorch: every dtype, in file order", "[pytorch]") {
    const rec::NamedTensors got = rec::read_pytorch_tensors(kDir / "dtypes.pt");
    std::vector<std::string> order;
    for (const auto& [k, t] : got) order.push_back(k);
    CHECK(order == std::vector<std::string>{"f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8",
                                            "u8", "bool", "scalar", "empty"});
    // A few values from their definitions in the script, besides PyTorch's reading above.
    CHECK(got[4].second ==
          TensorData(std::vector<std::int64_t>{-1, std::int64_t{1} << 40, -(std::int64_t{1} << 62)},
                     {3}));
    CHECK(got[3].second.dtype() == DType::BF16);
    CHECK(got[9].second == TensorData(std::vector<bool>{true, false, true}, {3}));
    CHECK(got[10].second.shape() == Shape{});
    CHECK(got[10].second.to_vec<float>() == std::vector<float>{2.75f});
    CHECK(got[11].second.shape() == Shape{0, 3});
}

TEST_CASE("pytorch: strided views, offsets and shared storages", "[pytorch]") {
    const rec::NamedTensors got = rec::read_pytorch_tensors(kDir / "views.pt");
    auto get = [&](std::string_view key) {
        for (const auto& [k, t] : got)
            if (k == key) return t;
        FAIL("no key " << key);
        return TensorData();
    };
    // base = arange(24).reshape(4, 6): base.t()[i][j] = 6j + i.
    std::vector<float> t;
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 4; ++j) t.push_back(float(6 * j + i));
    CHECK(get("transposed") == TensorData(t, {6, 4}));
    CHECK(get("narrowed") == TensorData({5.f, 6.f, 7.f, 8.f}, {4}));
    CHECK(get("expanded") ==
          TensorData({1.f, 2.f, 3.f, 1.f, 2.f, 3.f, 1.f, 2.f, 3.f, 1.f, 2.f, 3.f}, {4, 3}));
    CHECK(get("row0") == TensorData(std::vector<std::int64_t>{0, 10, 20}, {3}));
    CHECK(get("row1") == TensorData(std::vector<std::int64_t>{30, 40, 50}, {3}));
    CHECK(get("tied_a") == get("tied_b"));
    CHECK(get("column") == TensorData({4.f, 10.f, 16.f, 22.f}, {4, 1}));
}

TEST_CASE("pytorch: plain values, parameters and protocol 4", "[pytorch]") {
    const rec::Value v = rec::read_pytorch_value(kDir / "misc.pt");
    CHECK(v.at("param").as<TensorData>() == TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}));
    CHECK(v.at("size") == rec::Value(rec::List{2, 3}));
    const rec::Value& plain = v.at("plain");
    CHECK(plain.at("int") == rec::Value(-5));
    CHECK(plain.at("big") == rec::Value(std::int64_t{1} << 40));
    CHECK(plain.at("float") == rec::Value(0.125));
    CHECK(plain.at("str") == rec::Value("h\xc3\xa9llo"));
    CHECK(plain.at("none").is_null());
    CHECK(plain.at("flag") == rec::Value(true));
    CHECK(plain.at("3") == rec::Value("three"));  // an int key, in decimal
    CHECK(v.at("list").as<rec::List>().size() == 2);

    const rec::Value opt = rec::read_pytorch_value(kDir / "checkpoint.pt", "optimizer");
    CHECK(opt.at("lr") == rec::Value(0.01));
    CHECK(opt.at("betas") == rec::Value(rec::List{0.9, 0.999}));
}

TEST_CASE("pytorch: config_from_file", "[pytorch]") {
    const auto c = rec::config_from_file<TinyConfig>(kDir / "config.pt", "config");
    CHECK(c.d_model == 16);
    CHECK(c.n_heads == 4);
    CHECK(c.dropout == 0.25);
    CHECK(c.name == "tiny");
    CHECK(c.norm_first);
    // The root holds {"config": ...}: not the fields themselves.
    CHECK_THROWS_AS(rec::config_from_file<TinyConfig>(kDir / "config.pt"), ember::FormatError);
}

TEST_CASE("pytorch: a Linear from a checkpoint's top-level key, transposed", "[pytorch]") {
    rec::PyTorchFileRecorder<rec::FullPrecisionSettings> recorder;
    const auto lin = ember::nn::LinearConfig{3, 2}.init<B>();
    const auto loaded = recorder.load_into(
        lin, rec::LoadArgs(kDir / "checkpoint.pt").with_top_level_key("state_dict"),
        ember::Device<B>{});
    // PyTorch's weight is [out, in] = [2, 3]; ember's Linear holds its transpose.
    const TensorData w = expected_tensor("checkpoint.pt", "state_dict.weight");
    const auto wv = w.to_vec<float>();
    CHECK(data_of(loaded.weight) == TensorData({wv[0], wv[3], wv[1], wv[4], wv[2], wv[5]}, {3, 2}));
    CHECK(loaded.bias->val().to_data() == expected_tensor("checkpoint.pt", "state_dict.bias"));
    CHECK(loaded.weight.id() == lin.weight.id());  // the module's ids are kept

    // Without the key, the tensors sit under "state_dict.": nothing matches, which is an error
    // rather than a partial load that loads nothing.
    CHECK_THROWS_WITH(recorder.load_into(lin, kDir / "checkpoint.pt"),
                      Catch::Contains("checkpoint.pt: none of its 2 tensors matches") &&
                          Catch::Contains("'state_dict.bias'") && Catch::Contains("'weight'"));

    CHECK_THROWS_WITH(
        recorder.load(rec::LoadArgs(kDir / "checkpoint.pt").with_top_level_key("model"), lin),
        Catch::Contains("checkpoint.pt") && Catch::Contains("no top-level key 'model'") &&
            Catch::Contains("state_dict"));
}

TEST_CASE("pytorch: nn.Sequential with gaps, remapped, matches PyTorch's output", "[pytorch]") {
    rec::PyTorchFileRecorder<rec::FullPrecisionSettings> recorder;
    std::ostringstream debug;
    const auto args = rec::LoadArgs(kDir / "sequential.pt")
                          .with_key_remap(R"(^(\d+)\.)", "layers.$1.")
                          .with_debug_print(debug);
    const Mlp<B> mlp = recorder.load_into(make_mlp(), args, ember::Device<B>{});
    const auto& io = expected().at("sequential.io");
    const auto x = ember::Tensor<B, 2>::from_data(expected_tensor(io.at("input")), {});
    mlp.forward(x).to_data().assert_approx_eq(expected_tensor(io.at("output")),
                                              {.atol = 1e-5, .rtol = 1e-5});
    // layers.4 of the file is the module's layers.2.
    const TensorData b4 = expected_tensor("sequential.pt", "4.bias");
    CHECK(mlp.layers[2].bias->val().to_data() == b4);

    const std::string text = debug.str();
    CHECK_THAT(text, Catch::Contains("Original Key: 2.weight\nRemapped Key: layers.2.weight\n"
                                     "Shape: [8, 8]\nDtype: f32"));
    CHECK_THAT(text, Catch::Contains("Every key was used."));

    // Without the remapping the numbered keys sit at the root: the module finds none of them.
    CHECK_THROWS_AS(recorder.load_into(make_mlp(), kDir / "sequential.pt"), ember::FormatError);
}

TEST_CASE("pytorch: Conv2d + BatchNorm + Linear match PyTorch's output", "[pytorch]") {
    rec::PyTorchFileRecorder<rec::FullPrecisionSettings> recorder;
    const Net<B> net = recorder.load_into(make_net(), kDir / "model.pt", ember::Device<B>{});
    // BatchNorm's weight/bias are its gamma/beta; running statistics load as they are.
    CHECK(net.bn.gamma.val().to_data() == expected_tensor("model.pt", "bn.weight"));
    CHECK(net.bn.beta.val().to_data() == expected_tensor("model.pt", "bn.bias"));
    CHECK(net.bn.running_mean.value().to_data() == expected_tensor("model.pt", "bn.running_mean"));
    CHECK(net.bn.running_var.value().to_data() == expected_tensor("model.pt", "bn.running_var"));
    CHECK(net.conv.weight.val().to_data() == expected_tensor("model.pt", "conv.weight"));

    const auto& io = expected().at("model.io");
    const auto x = ember::Tensor<B, 4>::from_data(expected_tensor(io.at("input")), {});
    net.forward(x).to_data().assert_approx_eq(expected_tensor(io.at("output")),
                                              {.atol = 1e-5, .rtol = 1e-5});

    SECTION("half precision settings round the weights through f16") {
        rec::PyTorchFileRecorder<rec::HalfPrecisionSettings> half;
        const Net<B> h = half.load_into(make_net(), kDir / "model.pt");
        CHECK(h.conv.weight.val().dtype() == DType::F32);
        CHECK(h.conv.weight.val().to_data() ==
              expected_tensor("model.pt", "conv.weight").convert(DType::F16).convert(DType::F32));
    }
    SECTION("the record feeds load_record, as in Burn") {
        const Net<B> fresh = make_net();
        const rec::Value record = recorder.load(kDir / "model.pt", fresh);
        const Net<B> n2 = fresh.load_record(record);
        CHECK(n2.fc.bias->val().to_data() == expected_tensor("model.pt", "fc.bias"));
    }
}

// An enum-like module: the block is one of two layer types, chosen when the model is built.
template <ember::Backend B_>
struct DwsConv {
    ember::nn::Conv2d<B_> depthwise;
    ember::nn::Conv2d<B_> pointwise;
    EMBER_MODULE(DwsConv, depthwise, pointwise)
    ember::Tensor<B_, 4> forward(const ember::Tensor<B_, 4>& x) const {
        return pointwise.forward(depthwise.forward(x));
    }
};
template <ember::Backend B_>
struct EnumNet {
    std::variant<ember::nn::Conv2d<B_>, DwsConv<B_>> block;
    EMBER_MODULE(EnumNet, block)
    ember::Tensor<B_, 4> forward(const ember::Tensor<B_, 4>& x) const {
        return ember::activation::relu(std::visit([&](const auto& m) { return m.forward(x); }, block));
    }
};

TEST_CASE("pytorch: enum-like modules (std::variant fields)", "[pytorch]") {
    rec::PyTorchFileRecorder<rec::FullPrecisionSettings> recorder;
    auto conv = [](std::size_t in, std::size_t out, std::size_t k, std::size_t groups, std::size_t pad) {
        return ember::nn::Conv2dConfig{{in, out}, {k, k}}
            .with_groups(groups)
            .with_padding(ember::nn::PaddingConfig2d::Explicit(pad, pad))
            .init<B>();
    };
    SECTION("built with the alternative the file holds: loads, and matches PyTorch") {
        const EnumNet<B> fresh{DwsConv<B>{conv(2, 2, 3, 2, 1), conv(2, 4, 1, 1, 0)}};
        const EnumNet<B> net = recorder.load_into(fresh, kDir / "enum.pt");
        REQUIRE(net.block.index() == 1);
        CHECK(std::get<1>(net.block).depthwise.weight.val().to_data() ==
              expected_tensor("enum.pt", "block.depthwise.weight"));
        const auto& io = expected().at("enum.io");
        const auto x = ember::Tensor<B, 4>::from_data(expected_tensor(io.at("input")), {});
        net.forward(x).to_data().assert_approx_eq(expected_tensor(io.at("output")),
                                                  {.atol = 1e-5, .rtol = 1e-5});
        // Records of variants are untagged, as Burn's: saved and loaded back through a recorder.
        const auto bytes = rec::BinBytesRecorder<>{}.record(net.into_record());
        const EnumNet<B> back = fresh.load_record(rec::BinBytesRecorder<>{}.load(bytes));
        CHECK(std::get<1>(back.block).pointwise.weight.val().to_data() ==
              std::get<1>(net.block).pointwise.weight.val().to_data());
        CHECK(net.num_params() == 2 * 9 + 2 + 4 * 2 + 4);
    }
    SECTION("built with the other alternative: an error naming the path") {
        const EnumNet<B> other{conv(2, 4, 3, 1, 1)};
        CHECK_THROWS_WITH(recorder.load_into(other, kDir / "enum.pt"),
                          Catch::Contains("fit none of the fields of the module's 'block'"));
    }
}

TEST_CASE("pytorch: partial files and partial modules", "[pytorch]") {
    rec::PyTorchFileRecorder<rec::FullPrecisionSettings> recorder;
    using ember::nn::LinearConfig;
    const TwoHeads<B> heads{LinearConfig{3, 2}.init<B>(), LinearConfig{3, 2}.init<B>()};
    std::ostringstream debug;
    const auto loaded = recorder.load_into(heads, rec::LoadArgs(kDir / "checkpoint.pt")
                                                      .with_top_level_key("state_dict")
                                                      .with_key_remap("^", "fc.")
                                                      .with_debug_print(debug));
    // fc comes from the file; extra, which the file lacks, keeps its own values.
    CHECK(loaded.fc.bias->val().to_data() == expected_tensor("checkpoint.pt", "state_dict.bias"));
    CHECK(data_of(loaded.extra.weight) == data_of(heads.extra.weight));
    CHECK(loaded.extra.bias->val().to_data() == heads.extra.bias->val().to_data());

    // A module that wants only part of the file: the rest is ignored, and listed when debugging.
    const Net<B> net = make_net();
    std::ostringstream unused;
    const OnlyFc only =
        recorder.load_into(OnlyFc{LinearConfig{64, 3}.init<B>()},
                           rec::LoadArgs(kDir / "model.pt").with_debug_print(unused));
    CHECK(only.fc.bias->val().to_data() == expected_tensor("model.pt", "fc.bias"));
    CHECK_THAT(unused.str(), Catch::Contains("Keys the module does not use:") &&
                                 Catch::Contains("conv.weight [4, 2, 3, 3]") &&
                                 Catch::Contains("bn.num_batches_tracked []"));
}

TEST_CASE("pytorch: tensors that do not fit the module", "[pytorch]") {
    rec::PyTorchFileRecorder<rec::FullPrecisionSettings> recorder;
    using ember::nn::LinearConfig;
    const auto ckpt = rec::LoadArgs(kDir / "checkpoint.pt").with_top_level_key("state_dict");

    // A Linear(2, 3) where the file has Linear(3, 2): named by key and module path.
    CHECK_THROWS_AS(recorder.load(ckpt, LinearConfig{2, 3}.init<B>()), ember::ShapeError);
    CHECK_THROWS_WITH(recorder.load(ckpt, LinearConfig{2, 3}.init<B>()),
                      Catch::Contains("checkpoint.pt") && Catch::Contains("'weight'") &&
                          Catch::Contains("[3, 2]") && Catch::Contains("[2, 3]") &&
                          Catch::Contains("transposed"));
    // A Linear without bias where the file has one.
    CHECK_THROWS_WITH(recorder.load(ckpt, LinearConfig{3, 2}.with_bias(false).init<B>()),
                      Catch::Contains("'bias'") && Catch::Contains("absent"));
    // Two layers where the file numbers three.
    CHECK_THROWS_WITH(
        recorder.load(
            rec::LoadArgs(kDir / "sequential.pt").with_key_remap(R"(^(\d+)\.)", "layers.$1."),
            Two{{LinearConfig{4, 8}.init<B>(), LinearConfig{8, 8}.init<B>()}}),
        Catch::Contains("'layers' has 3 numbered entries (0, 2, 4)") &&
            Catch::Contains("has 2 items"));
    // An int tensor for a float parameter.
    const FloatI64 f{ember::Param<ember::Tensor<B, 1>>(ember::Tensor<B, 1>::zeros({3}, {}))};
    CHECK_THROWS_AS(recorder.load(kDir / "dtypes.pt", f), ember::DTypeError);
    // A remapping that merges two keys, and a pattern that is not a regular expression.
    CHECK_THROWS_WITH(
        recorder.load(rec::LoadArgs(kDir / "dtypes.pt").with_key_remap("^i.*", "x"), f),
        Catch::Contains("both 'i64' and 'i32'"));
    CHECK_THROWS_AS(rec::LoadArgs("x.pt").with_key_remap("(", "y"), ember::ArgumentError);
    // A missing file.
    CHECK_THROWS_WITH(recorder.load(kDir / "nope.pt", f), Catch::Contains("nope.pt"));
}

TEST_CASE("pytorch: broken zip containers", "[pytorch]") {
    const std::vector<std::byte> good = read_file(kDir / "dtypes.pt");
    REQUIRE_NOTHROW(rec::decode_pytorch_tensors(good, "good.pt"));

    check_fails({}, "fewer than a zip end record");
    check_fails(std::vector<std::byte>(good.begin(), good.begin() + 1000), "no end-of-central");
    // The end records are intact but what they point at is gone: torch's zip64 record, or
    // (in a plain zip) the directory.
    check_fails(std::vector<std::byte>(good.begin() + 200, good.end()), "zip64 end record");
    {
        const auto plain = make_zip({{"archive/data.pkl", "\x80\x02}."}});
        check_fails(std::vector<std::byte>(plain.begin() + 10, plain.end()), "outside the archive");
    }
    {
        // Wrong signature of the first central directory entry.
        auto bad = good;
        const auto sig = std::string("PK\x01\x02");
        auto it =
            std::search(bad.begin(), bad.end(), reinterpret_cast<const std::byte*>(sig.data()),
                        reinterpret_cast<const std::byte*>(sig.data()) + 4);
        REQUIRE(it != bad.end());
        it[3] = std::byte{9};
        check_fails(bad, "wrong signature");
    }
    {
        // One bit flipped in the f32 storage: its CRC no longer matches.
        auto bad = good;
        const std::string payload("\x00\x00\x00\x3f\x00\x00\xa0\xbf", 8);  // 0.5f, -1.25f
        auto it =
            std::search(bad.begin(), bad.end(), reinterpret_cast<const std::byte*>(payload.data()),
                        reinterpret_cast<const std::byte*>(payload.data()) + 8);
        REQUIRE(it != bad.end());
        it[0] ^= std::byte{1};
        check_fails(bad, "CRC-32");
    }
    // A pickle stream without its container: torch < 1.6's format.
    std::vector<std::byte> legacy(64, std::byte{0});
    legacy[0] = std::byte{0x80}, legacy[1] = std::byte{0x02};
    check_fails(legacy, "legacy format");
    check_fails(make_zip({{"notes.txt", "hello"}}), "no <name>/data.pkl");
    check_fails(make_zip({{"m/data.pkl", "\x80\x02}."}, {"m/constants.pkl", ""}}), "TorchScript");
    // An entry whose declared size runs past the end of the archive.
    {
        auto bad = make_zip({{"archive/data.pkl", std::string("\x80\x02}.", 4)}});
        // Central directory sizes (compressed, uncompressed) → 2 GiB.
        const std::string sig("PK\x01\x02");
        auto it =
            std::search(bad.begin(), bad.end(), reinterpret_cast<const std::byte*>(sig.data()),
                        reinterpret_cast<const std::byte*>(sig.data()) + 4);
        for (int k = 20; k < 28; ++k) it[k] = std::byte(k % 4 == 3 ? 0x7f : 0xff);
        check_fails(bad, "runs past the end of the archive");
    }
    // A deflated entry that declares 4 GiB from a few bytes: refused before any allocation.
    check_fails(make_zip({{"archive/data.pkl", "abc"}}, 8, 0xfffffff0u), "more than deflate");
    // The same name twice, and a byte order that is neither little nor big.
    check_fails(make_zip({{"archive/data.pkl", "\x80\x02}."}, {"archive/data.pkl", "\x80\x02}."}}),
                "appears twice");
    check_fails(make_zip({{"archive/data.pkl", "\x80\x02}."}, {"archive/byteorder", "middle"}}),
                "byteorder entry holds 'middle'");
    // A compression method zlib does not know.
    check_fails(make_zip({{"archive/data.pkl", "abc"}}, 12), "compression method 12");
    // A directory that claims more entries than it has room for.
    {
        auto bad = make_zip({{"archive/data.pkl", "\x80\x02}."}});
        const std::size_t end = bad.size() - 22;
        bad[end + 10] = std::byte{0xff}, bad[end + 11] = std::byte{0xff};
        check_fails(bad, "claims 65535 entries");
    }
}

TEST_CASE("pytorch: pickles other torch versions write", "[pytorch]") {
    // A tensor subclass with Python attributes, as torch >= 1.12 writes it:
    // _rebuild_from_type_v2(_rebuild_tensor_v2, torch.Tensor, args, state), in an OrderedDict
    // made by NEWOBJ and given attributes by BUILD.
    Pickle p;
    p.global("collections", "OrderedDict").op(')').op('\x81');
    p.op('(').str("w").global("torch._tensor", "_rebuild_from_type_v2").op('(');
    p.global("torch._utils", "_rebuild_tensor_v2").global("torch", "Tensor");
    tensor_args(p, "IntStorage", 3, 1, {2}, {1});
    p.op('}').op('t').op('R').op('u');
    p.op('}').str("_metadata").op('N').op('s').op('b').op('.');
    const std::string storage("\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00", 12);
    const auto t = rec::decode_pytorch_tensors(torch_zip(p.b, storage), "v2.pt");
    REQUIRE(t.size() == 1);
    CHECK(t[0].first == "w");
    CHECK(t[0].second == TensorData(std::vector<std::int32_t>{2, 3}, {2}));
}

TEST_CASE("pytorch: broken pickle programs", "[pytorch]") {
    // The hand-made file reads when nothing is broken.
    const std::string ok = tensor_pickle("FloatStorage", 4, 0, {2, 2}, {2, 1});
    const auto t = rec::decode_pytorch_tensors(torch_zip(ok, std::string(16, '\0')), "ok.pt");
    REQUIRE(t.size() == 1);
    CHECK(t[0].second == TensorData({0.f, 0.f, 0.f, 0.f}, {2, 2}));

    check_pickle_fails(std::string("\x80\x02I1\n.", 6), "opcode 0x49 ('I') is not supported");
    check_pickle_fails(std::string("\x80\x02\xff.", 4), "opcode 0xff is not supported");
    check_pickle_fails(std::string("\x80\x02]a.", 5), "stack underflow");
    check_pickle_fails(std::string("\x80\x02t.", 4), "MARK that was never set");
    check_pickle_fails(std::string("\x80\x02h\x05.", 5), "memo entry 5");
    check_pickle_fails(Pickle().global("os", "system").op('.').b, "global 'os.system'");
    check_pickle_fails(Pickle().global("numpy.core.multiarray", "scalar").op('.').b,
                       "is not supported");
    check_pickle_fails(std::string("\x80\x02X\xff\xff\x00\x00"
                                   "ab.",
                                   10),
                       "ends inside an opcode");
    check_pickle_fails(std::string("\x80\x02}", 3), "ends without STOP");
    check_pickle_fails(std::string("\x80\x02}}.", 5), "STOP leaves 2 values");
    check_pickle_fails(std::string("\x80\x09}.", 4), "protocol 9");
    check_pickle_fails(Pickle().global("collections", "OrderedDict").str("x").op('R').op('.').b,
                       "not a tuple");
    {
        // A list that holds itself: the walk stops at the nesting limit instead of looping.
        check_pickle_fails(std::string("\x80\x02]q\x00h\x00"
                                       "a.",
                                       9),
                           "nests deeper than");
        // 300 nested lists.
        std::string deep = "\x80\x02";
        for (int i = 0; i < 300; ++i) deep += ']';
        for (int i = 0; i < 299; ++i) deep += 'a';
        check_pickle_fails(deep + ".", "nests deeper than");
    }
}

TEST_CASE("pytorch: tensors outside their storage", "[pytorch]") {
    const std::string storage(16, '\0');  // four f32 elements
    auto fails = [&](const std::string& pickle, const std::string& why) {
        check_fails(torch_zip(pickle, storage), why);
    };
    fails(tensor_pickle("FloatStorage", 4, 1, {2, 2}, {2, 1}), "reaches element 4");
    fails(tensor_pickle("FloatStorage", 4, 0, {2, 2}, {3, 1}), "reaches element 4");
    fails(tensor_pickle("FloatStorage", 4, -1, {2}, {1}), "negative storage offset");
    fails(tensor_pickle("FloatStorage", 4, 0, {-2}, {1}), "negative size");
    fails(tensor_pickle("FloatStorage", 4, 0, {2, 2}, {1}), "2 sizes but 1 strides");
    fails(tensor_pickle("FloatStorage", 4, 0, {1, 1, 1, 1, 1, 1, 1, 1, 1},
                        {1, 1, 1, 1, 1, 1, 1, 1, 1}),
          "rank 9");
    fails(
        tensor_pickle("FloatStorage", 4, 0, {std::int64_t{1} << 40, std::int64_t{1} << 40}, {0, 0}),
        "overflows 64 bits");
    fails(tensor_pickle("FloatStorage", 4, 0, {std::int64_t{1} << 20}, {std::int64_t{1} << 20}),
          "reaches element 1099510579200");
    fails(tensor_pickle("FloatStorage", 4, 0, {std::int64_t{1} << 40}, {std::int64_t{1} << 40}),
          "strides overflow 64 bits");
    // Stride 0 may repeat one element, but not into a terabyte.
    fails(tensor_pickle("FloatStorage", 4, 0, {std::int64_t{1} << 38}, {0}),
          "repeats the elements");
    // The storage's size disagrees with its entry, or the entry is missing.
    fails(tensor_pickle("FloatStorage", 5, 0, {2}, {1}), "holds 16 bytes where 5 elements");
    fails(tensor_pickle("DoubleStorage", 4, 0, {2}, {1}), "where 4 elements of f64");
    fails(tensor_pickle("FloatStorage", std::int64_t{1} << 62, 0, {2}, {1}), "overflows 64 bits");
    check_fails(make_zip({{"archive/data.pkl", tensor_pickle("FloatStorage", 4, 0, {2}, {1})}}),
                "has no entry 'archive/data/0'");
    // Storage classes ember has no dtype for.
    fails(tensor_pickle("ComplexFloatStorage", 2, 0, {2}, {1}), "ComplexFloatStorage");
    // Bool bytes other than 0 and 1.
    check_fails(torch_zip(tensor_pickle("BoolStorage", 2, 0, {2}, {1}), std::string("\x01\x02", 2)),
                "other than 0 and 1");
}

TEST_CASE("attack: a 4 KB .pt of repeated stride-0 views asking for 5 GB is refused",
          "[pytorch][untrusted][hostile]") {
    // Twenty views of one float, each [8192, 8192] with strides [0, 0]: 256 MiB apiece (within
    // the per-tensor cap on repeated elements), 5 GiB together. The per-file total refuses the
    // file before any tensor is made, with the default limits.
    Pickle p;
    p.op('}').op('(');
    for (int k = 0; k < 20; ++k) {
        p.str("w" + std::to_string(k)).global("torch._utils", "_rebuild_tensor_v2");
        tensor_args(p, "FloatStorage", 1, 0, {8192, 8192}, {0, 0});
        p.op('R');
    }
    p.op('u').op('.');
    const auto bytes = torch_zip(p.b, std::string(4, '\0'));
    CHECK(bytes.size() < 4096);
    check_fails(bytes, "would take 5368709120 bytes");
    CHECK_THROWS_WITH(rec::decode_pytorch_value(bytes, "hostile.pt"),
                      Catch::Contains("would take 5368709120 bytes"));
    // One such view alone is within the limits (256 MiB, the floor): the total is what counts.
    // (Not materialised here: the point is that the file as a whole is refused.)
    rec::ReadLimits l;
    l.max_bytes = std::uint64_t{1} << 20;
    const rec::ScopedReadLimits small(l);
    check_fails(
        torch_zip(tensor_pickle("FloatStorage", 1, 0, {1024, 1024}, {0, 0}), std::string(4, '\0')),
        "more than the read limit");
}

}  // namespace test_pytorch_record
