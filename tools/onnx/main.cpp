// ember-onnx: generates C++ from an ONNX model (see import.hpp and docs/onnx-import.md).
//
//   ember-onnx MODEL.onnx --out DIR [--name NAME] [--namespace NS] [--record-type TYPE]
//              [--half] [--embed] [--meta] [--input-shape NAME=D0,D1,...]...
//              [--bind NAME=TENSOR.pb]... [--list-ops]
//
// Writes DIR/NAME.hpp (the Model<B> struct) and DIR/NAME.<ext> (its weights in the recorder
// TYPE's format); with --embed also DIR/NAME.embed.bin (the weights as a Bin record, which the
// build compiles into the program for Model::from_embedded). NAME defaults to the model file's
// stem, NS to NAME. --meta writes DIR/NAME.meta, the forward's inputs and outputs (for test
// generators).
#include <ember/record/recorder.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "import.hpp"

namespace fs = std::filesystem;

namespace {

[[noreturn]] void usage(int code) {
    std::cerr << "usage: ember-onnx MODEL.onnx --out DIR [--name NAME] [--namespace NS]\n"
                 "                  [--record-type NamedMpk|NamedMpkGz|Bin|BinGz|JsonGz|PrettyJson]\n"
                 "                  [--half] [--embed] [--input-shape NAME=D0,D1,...]\n"
                 "       ember-onnx --list-ops\n";
    std::exit(code);
}

// A name for the --meta file: one token, however the model spells it (bytes outside
// printable ASCII, spaces and % as %XX, so that test generators split lines on spaces).
std::string meta_token(const std::string& s) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c > 0x20 && c < 0x7f && c != '%')
            out += ch;
        else
            out += {'%', hex[c >> 4], hex[c & 15]};
    }
    return out.empty() ? "%" : out;
}

template <template <class> class R>
void write_record(const ember::record::Value& v, const fs::path& path, bool half) {
    using namespace ember::record;
    if (half) R<HalfPrecisionSettings>{}.record(v, path);
    else R<FullPrecisionSettings>{}.record(v, path);
}

std::string extension(const std::string& type) {
    if (type == "NamedMpk") return "mpk";
    if (type == "NamedMpkGz") return "mpk.gz";
    if (type == "Bin") return "bin";
    if (type == "BinGz") return "bin.gz";
    if (type == "JsonGz") return "json.gz";
    return "json";
}

}  // namespace

int main(int argc, char** argv) try {
    std::string model_path, name, ns;
    fs::path out;
    bool embed = false, meta = false;
    ember::onnx::ImportOptions opt;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(2);
            return argv[++i];
        };
        if (a == "--out") out = next();
        else if (a == "--name") name = next();
        else if (a == "--namespace") ns = next();
        else if (a == "--record-type") opt.record_type = next();
        else if (a == "--half") opt.half_precision = true;
        else if (a == "--embed") embed = true;
        else if (a == "--meta") meta = true;
        else if (a == "--input-shape") {
            const std::string s = next();
            const auto eq = s.find('=');
            if (eq == std::string::npos) usage(2);
            std::vector<std::int64_t> dims;
            std::stringstream ds(s.substr(eq + 1));
            for (std::string d; std::getline(ds, d, ',');) dims.push_back(std::stoll(d));
            opt.input_shapes[s.substr(0, eq)] = dims;
        } else if (a == "--bind") {  // NAME=FILE.pb: a graph input fixed to a TensorProto's value
            const std::string b = next();
            const auto eq = b.find('=');
            if (eq == std::string::npos) usage(2);
            std::ifstream in(b.substr(eq + 1), std::ios::binary);
            std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
            if (!in.good() && !in.eof()) throw ember::ArgumentError("ember-onnx: cannot read " + b.substr(eq + 1));
            opt.bound_inputs[b.substr(0, eq)] =
                ember::onnx::parse_tensor(std::as_bytes(std::span(bytes)), b.substr(eq + 1)).data;
        } else if (a == "--list-ops") {
            for (const auto& op : ember::onnx::supported_ops()) std::cout << op << '\n';
            return 0;
        } else if (a == "-h" || a == "--help") usage(0);
        else if (!a.empty() && a[0] == '-') usage(2);
        else model_path = a;
    }
    if (model_path.empty() || out.empty()) usage(2);
    if (name.empty()) name = ember::onnx::to_identifier(fs::path(model_path).stem().string());
    if (!ember::onnx::is_identifier(name))  // it names files and, by default, the namespace
        throw ember::ArgumentError("ember-onnx: --name '" + ember::onnx::comment_text(name) +
                                   "' is not a C++ identifier");
    opt.name_space = ns.empty() ? name : ns;
    const std::string ext = extension(opt.record_type);
    opt.record_file = name + "." + ext;
    if (embed)
        opt.embedded_symbol =
            "ember_onnx_" + ember::onnx::to_identifier(opt.name_space) + "_record";

    const auto model = ember::onnx::load_model(model_path);
    const auto result = ember::onnx::import_model(model, opt, fs::path(model_path).filename().string());
    fs::create_directories(out);
    {
        const fs::path header = out / (name + ".hpp"), tmp = out / (name + ".hpp.tmp");
        std::ofstream h(tmp, std::ios::binary);
        h << result.header;
        h.close();
        if (!h) throw ember::ArgumentError("ember-onnx: cannot write '" + tmp.string() + "'");
        fs::rename(tmp, header);
    }
    using namespace ember::record;
    const fs::path rec = out / opt.record_file;
    const auto& t = opt.record_type;
    if (t == "NamedMpk") write_record<NamedMpkFileRecorder>(result.record, rec, opt.half_precision);
    else if (t == "NamedMpkGz") write_record<NamedMpkGzFileRecorder>(result.record, rec, opt.half_precision);
    else if (t == "Bin") write_record<BinFileRecorder>(result.record, rec, opt.half_precision);
    else if (t == "BinGz") write_record<BinGzFileRecorder>(result.record, rec, opt.half_precision);
    else if (t == "JsonGz") write_record<JsonGzFileRecorder>(result.record, rec, opt.half_precision);
    else write_record<PrettyJsonFileRecorder>(result.record, rec, opt.half_precision);
    if (embed) write_record<BinFileRecorder>(result.record, out / (name + ".embed.bin"), opt.half_precision);
    if (meta) {  // the forward's signature, for test generators: "input|output NAME KIND RANK SCALAR"
        std::ofstream m(out / (name + ".meta"));
        for (const auto& s : result.inputs)
            m << "input " << meta_token(s.name) << ' ' << s.kind << ' ' << s.rank << ' ' << s.scalar
              << ' ' << s.index << '\n';
        for (const auto& s : result.outputs)
            m << "output " << meta_token(s.name) << ' ' << s.kind << ' ' << s.rank << ' '
              << s.scalar << ' ' << s.index << '\n';
    }
    std::cout << "ember-onnx: " << model_path << " -> " << (out / (name + ".hpp")).string() << " ("
              << result.ops_used.size() << " op types)\n";
    return 0;
} catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
}
