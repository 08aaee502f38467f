// Writes the seed corpora of the fuzz targets that start from ember's own formats
// (tests/fuzz/corpus/<target>/), so that they can be made again when a format changes:
//
//   ninja -C build/fuzz ember_fuzz_seeds && build/fuzz/ember_fuzz_seeds tests/fuzz/corpus
//
// Seeds are small valid (and a few nearly valid) inputs in each target's input layout (see the
// comment at the top of each fuzz_<target>.cpp); libFuzzer mutates from there. The onnx,
// safetensors and pytorch seeds come from PyTorch and ONNX files, not from here.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#include <ember/nn/conv.hpp>
#include <ember/nn/interpolate.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/rnn.hpp>
#include <ember/nn/transformer.hpp>
#include <ember/optim/adam.hpp>
#include <ember/optim/lr_scheduler.hpp>
#include <ember/optim/sgd.hpp>

#include <cmath>
#include <iostream>
#include <limits>

#include "gzip.hpp"
#include "record.hpp"

namespace {

namespace fs = std::filesystem;
using namespace ember;
using Bytes = std::vector<std::byte>;
using record::detail::Format;
using namespace std::string_view_literals;

fs::path g_root;

Bytes bytes_of(std::string_view s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    return {p, p + s.size()};
}
Bytes cat(std::initializer_list<Bytes> parts) {
    Bytes out;
    for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}
Bytes u8(unsigned v) {
    return {std::byte(v)};
}
Bytes u16(std::size_t v) {
    return {std::byte(v & 0xff), std::byte((v >> 8) & 0xff)};
}
Bytes u32le(std::uint32_t v) {
    return {std::byte(v & 0xff), std::byte((v >> 8) & 0xff), std::byte((v >> 16) & 0xff),
            std::byte(v >> 24)};
}
Bytes u32be(std::uint32_t v) {
    return {std::byte(v >> 24), std::byte((v >> 16) & 0xff), std::byte((v >> 8) & 0xff),
            std::byte(v & 0xff)};
}

void seed(const std::string& target, const std::string& name, const Bytes& bytes) {
    fs::create_directories(g_root / target);
    fuzz::write_file(g_root / target / name, bytes);
}

// ---- records --------------------------------------------------------------------------------

std::vector<std::pair<std::string, record::Value>> trees() {
    fuzz::ProbeRecord probe;
    probe.step = 1234567;
    probe.lr = 1e-3;
    probe.flag = true;
    probe.name = "adam";
    probe.clip = 0.5f;
    probe.pair = {7, 9};
    probe.small = -3;
    probe.params["weight"] = TensorData({1.f, -2.f, 3.5f, 0.f}, {2, 2});
    probe.params["bias"] = TensorData(std::vector<std::int64_t>{-1, 1}, {2});
    probe.moments = {TensorData({0.25}, {1}), TensorData(std::vector<bool>{true, false}, {2})};
    // A module-like tree with the corners of each format: '$' keys, non-finite doubles, an
    // empty list and map, a scalar tensor, nulls and nesting.
    record::Map odd;
    odd.emplace_back("$tensor", record::Value(std::int64_t{1}));
    odd.emplace_back("inf", std::numeric_limits<double>::infinity());
    odd.emplace_back("nan", std::numeric_limits<double>::quiet_NaN());
    odd.emplace_back("min", std::numeric_limits<std::int64_t>::min());
    odd.emplace_back("empty_list", record::List{});
    odd.emplace_back("empty_map", record::Map{});
    odd.emplace_back("null", record::Value{});
    odd.emplace_back("scalar", TensorData({2.5f}, {}));
    odd.emplace_back("half", TensorData({1.f, 2.f}, {2}).convert(DType::F16));
    odd.emplace_back("nested", record::List{record::List{record::Map{{"a", "b"}}}});
    return {{"probe", record::to_value(probe)}, {"corners", record::Value(odd)}};
}

Bytes encoded(const record::Value& v, Format f) {
    return record::detail::encode(v, f, record::FullPrecisionSettings::value);
}

void record_seeds() {
    for (const auto& [name, tree] : trees()) {
        const Bytes mpk = encoded(tree, Format::NamedMpk), bin = encoded(tree, Format::Bin),
                    json = encoded(tree, Format::PrettyJson);
        const Bytes bin_body(bin.begin(), bin.end() - 4);  // without its CRC-32
        seed("record_mpk", name, mpk);
        seed("record_json", name, json);
        seed("record_bin", name, cat({u8(0), bin_body}));
        seed("record_bin", name + "-raw", cat({u8(1), bin}));
        seed("record_gz", name + "-mpk", cat({u8(0), mpk}));
        seed("record_gz", name + "-bin", cat({u8(1), bin_body}));
        seed("record_gz", name + "-json", cat({u8(2), json}));
        seed("record_gz", name + "-mpk-raw", cat({u8(4), encoded(tree, Format::NamedMpkGz)}));
        seed("record_gz", name + "-bin-raw", cat({u8(5), encoded(tree, Format::BinGz)}));
        seed("record_gz", name + "-json-raw", cat({u8(6), encoded(tree, Format::JsonGz)}));
    }
}

// ---- IDX ------------------------------------------------------------------------------------

Bytes idx(std::initializer_list<std::uint32_t> dims, std::size_t count) {
    Bytes out = {std::byte{0}, std::byte{0}, std::byte{8}, std::byte(dims.size())};
    std::size_t n = 1;
    for (auto d : dims) {
        out = cat({out, u32be(d)});
        n *= d;
    }
    for (std::size_t i = 0; i < n; ++i) out.push_back(std::byte((i * 37) % count));
    return out;
}

void idx_seeds() {
    const Bytes labels = idx({3}, 10), images = idx({3, 28, 28}, 256);
    const Bytes small = idx({2, 2, 2}, 256), bad_labels = idx({3}, 20);
    seed("idx", "three", cat({u16(labels.size()), labels, images}));
    seed("idx", "small-images", cat({u16(labels.size()), labels, small}));
    seed("idx", "label-out-of-range", cat({u16(bad_labels.size()), bad_labels, images}));
    seed("idx_gz", "three", cat({u8(0), u16(labels.size()), labels, images}));
    const Bytes gl = fuzz::gzip(labels), gi = fuzz::gzip(images);
    seed("idx_gz", "three-raw", cat({u8(3), u16(gl.size()), gl, gi}));
    Bytes cut = gi;
    cut.resize(cut.size() - 8);  // no trailer: the CRC and length are gone
    seed("idx_gz", "no-trailer", cat({u8(3), u16(gl.size()), gl, cut}));
}

// ---- text formats ---------------------------------------------------------------------------

void text_seeds() {
    seed("csv", "rows",
         cat({u8(0), bytes_of("id,x,y,flag,name,count,label\r\n"
                              "1,0.5,1e3,true,\"a,b\",,3\r\n"
                              "-2,-inf,nan,0,\"x\"\"y\nz\",7,255\n"
                              "+3,+1.5,-0,FALSE,plain,-4,0\n")}));
    seed("csv", "tabs",
         cat({u8(9), bytes_of("\xEF\xBB\xBFlabel\tcount\tname\tflag\ty\tx\tid\n"
                              "1\t\t'q\tq'\t1\t2\t3\t4\n")}));
    const auto alpha = "A fortune.\n%\nAnother\r\n%\n"sv;
    seed("fortunes", "two", cat({u16(alpha.size()), bytes_of(alpha), bytes_of("%\n\n%\nlast")}));
    seed("train_text", "loss", cat({u8(0), bytes_of("0.5\n0.25\n1e-300\n-0\n")}));
    seed("train_text", "stat",
         cat({u8(1), bytes_of("cpu  4705 356 584 3699 23 23 0 0 0 0\n"
                              "cpu0 1393280 32966 572056 13343292 6130 "
                              "0 17875 0 23933 0\nintr 114930548\n")}));
    seed("train_text", "meminfo",
         cat({u8(2), bytes_of("MemTotal:       16384 kB\nMemFree:  1 kB\n"
                              "MemAvailable:    8192 kB\n")}));
}

template <class C>
void config_seed(const std::string& name, const C& c) {
    seed("config", name, bytes_of(config::to_json(c, true)));
}

void config_seeds() {
    // (tests/fuzz/corpus/config/outer and cosine, for the target's own config, are written by
    // hand.)
    config_seed("noam", lr_scheduler::NoamLrSchedulerConfig{0.5});
    config_seed("transformer", nn::TransformerEncoderConfig{512, 2048, 8, 6}.with_norm_first(true));
    config_seed("conv2d", nn::Conv2dConfig{{3, 8}, {3, 3}}
                              .with_padding(nn::PaddingConfig2d::Explicit(1, 2))
                              .with_initializer(nn::Initializer::Constant(0.5)));
    config_seed("lstm", nn::LstmConfig{4, 8});
    config_seed("interpolate", nn::Interpolate2dConfig{}
                                   .with_output_size(std::array<std::size_t, 2>{4, 5})
                                   .with_mode(nn::InterpolateMode::Cubic));
    config_seed("linear", nn::LinearConfig{784, 10});
    config_seed("adam", optim::AdamConfig{}
                            .with_weight_decay(optim::WeightDecayConfig{1e-4})
                            .with_grad_clipping(optim::GradientClipping::Norm(1.0)));
    config_seed("sgd", optim::SgdConfig{}.with_momentum(optim::MomentumConfig{}));
}

// ---- rendezvous -----------------------------------------------------------------------------

Bytes hello(std::uint32_t rank, std::uint32_t world) {
    return cat({bytes_of("EMBERRDV"), u32le(rank), u32le(world)});
}

void rendezvous_seeds() {
    seed("rendezvous", "hex-env",
         cat({u8(0),
              bytes_of("0a1B2c\0"
                       "4\0"
                       "1\0"sv),
              bytes_of("127.0.0.1:29500")}));
    // Rank 0's side: world 3, one stranger, then a rank that claims rank 2 first.
    seed("rendezvous", "serve-stranger",
         cat({u8(1), u8(1), u8(2), u8(5), bytes_of("GET /"), u8(16), hello(2, 3)}));
    seed("rendezvous", "serve-wrong-world", cat({u8(1), u8(0), u8(1), u8(16), hello(1, 7)}));
    // A rank's side: rank 0 answers ok with 3 bytes, then refuses.
    seed("rendezvous", "fetch-ok", cat({u8(2), u32le(0), u32le(3), bytes_of("abc")}));
    seed("rendezvous", "fetch-refused", cat({u8(2), u32le(3), u32le(0)}));
}

// ---- checkpoint manifests ------------------------------------------------------------------

Bytes manifest(std::int64_t epoch, std::uint64_t size) {
    record::Map files;
    for (const char* kind : {"model", "optim", "scheduler"})
        files.emplace_back(std::string(kind) + "-" + std::to_string(epoch) + ".mpk",
                           record::Value(std::int64_t(size)));
    record::Map m;
    m.emplace_back("epoch", record::Value(epoch));
    m.emplace_back("files", record::Value(std::move(files)));
    return encoded(record::Value(std::move(m)), Format::PrettyJson);
}

void checkpoint_seeds() {
    const Bytes two = manifest(2, 4), one = manifest(1, 4), wrong = manifest(2, 5);
    seed("checkpoint", "both", cat({u16(two.size()), two, one}));
    seed("checkpoint", "wrong-size", cat({u16(wrong.size()), wrong, one}));
    seed("checkpoint", "epoch-swapped", cat({u16(one.size()), one, two}));
}

// ---- images ---------------------------------------------------------------------------------

void image_seeds() {
    const unsigned char rgb[2 * 3 * 3] = {255, 0, 0, 0, 255, 0, 0, 0, 255,
                                          1,   2, 3, 4, 5,   6, 7, 8, 9};
    auto to = [](void* ctx, void* data, int size) {
        auto* out = static_cast<Bytes*>(ctx);
        const auto* p = static_cast<const std::byte*>(data);
        out->insert(out->end(), p, p + size);
    };
    Bytes png = u8(0), bmp = u8(3), tga = u8(4), jpg = u8(1);
    stbi_write_png_to_func(to, &png, 3, 2, 3, rgb, 9);
    stbi_write_bmp_to_func(to, &bmp, 3, 2, 3, rgb);
    stbi_write_tga_to_func(to, &tga, 3, 2, 3, rgb);
    stbi_write_jpg_to_func(to, &jpg, 3, 2, 3, rgb, 90);
    seed("image", "rgb.png", png);
    seed("image", "rgb.bmp", bmp);
    seed("image", "rgb.tga", tga);
    seed("image", "rgb.jpg", jpg);
    seed("image", "gray.pgm", cat({u8(2), bytes_of("P5\n3 2\n255\n"), bytes_of("abcdef")}));
    seed("image", "tiny.gif",
         cat({u8(0), bytes_of("GIF89a"), u16(1), u16(1), u8(0x80), u8(0), u8(0),
              bytes_of("\0\0\0\xff\xff\xff,\0\0\0\0\1\0\1\0\0\2\2D\1\0;"sv)}));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: ember_fuzz_seeds CORPUS_DIR (tests/fuzz/corpus)\n";
        return 2;
    }
    g_root = argv[1];
    record_seeds();
    idx_seeds();
    text_seeds();
    config_seeds();
    rendezvous_seeds();
    checkpoint_seeds();
    image_seeds();
    return 0;
}
