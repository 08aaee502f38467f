// ember-onnx: generates C++ from an ONNX model (see import.hpp and docs/onnx-import.md).
//
//   ember-onnx MODEL.onnx --out DIR [--name NAME] [--namespace NS] [--record-type TYPE]
//              [--half] [--embed] [--meta] [--input-shape NAME=D0,D1,...]...
//              [--bind NAME=TENSOR.pb]...
//   ember-onnx --list-ops | --help | --version
//
// Writes DIR/NAME.hpp (the Model<B> struct) and DIR/NAME.<ext> (its weights in the recorder
// TYPE's format); with --embed also DIR/NAME.embed.bin (the weights as a Bin record, which the
// build compiles into the program for Model::from_embedded). NAME defaults to the model file's
// stem, NS to NAME. --meta writes DIR/NAME.meta, the forward's inputs and outputs (for test
// generators). A bad command line is one line on stderr and exit status 2 (examples/cli.hpp).
#include <ember/record/recorder.hpp>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "cli.hpp"  // examples/cli.hpp: the command-line rules ember-onnx shares with the examples
#include "import.hpp"

namespace fs = std::filesystem;

namespace {

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

const std::vector<std::string> kRecordTypes = {"NamedMpk", "NamedMpkGz", "Bin",
                                               "BinGz",    "JsonGz",     "PrettyJson"};

// NAME=D0,D1,... (--input-shape): the input's name and its dimensions, or why the text is not
// one. Every dimension a whole number at or above zero, written in full (no "3x", no sign).
std::string parse_shape(const std::string& text, std::string& name,
                        std::vector<std::int64_t>& dims) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0) return "'" + text + "' is not NAME=D0,D1,...";
    name = text.substr(0, eq);
    dims.clear();
    const std::string list = text.substr(eq + 1);
    if (list.empty()) return {};  // a scalar input
    std::size_t pos = 0;
    while (true) {
        const auto comma = std::min(list.find(',', pos), list.size());
        std::int64_t d = -1;
        const char* first = list.data() + pos;
        const char* last = list.data() + comma;
        const auto [end, ec] = std::from_chars(first, last, d);
        if (ec != std::errc{} || end != last || d < 0)
            return "dimension '" + std::string(first, last) + "' of '" + text +
                   "' is not a whole number >= 0";
        dims.push_back(d);
        if (comma == list.size()) return {};
        pos = comma + 1;
    }
}

// NAME=FILE (--bind): the input's name and the TensorProto file.
std::string split_binding(const std::string& text, std::string& name, std::string& file) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
        return "'" + text + "' is not NAME=FILE.pb";
    name = text.substr(0, eq);
    file = text.substr(eq + 1);
    return {};
}

}  // namespace

int main(int argc, char** argv) try {
    std::string model_path, name, ns;
    fs::path out;
    bool embed = false, meta = false, list_ops = false;
    std::vector<std::string> shapes, bindings;
    ember::onnx::ImportOptions opt;
    CLI::App app{
        "Generates C++ from an ONNX model: OUT/NAME.hpp (the Model<B> struct) and "
        "OUT/NAME.<ext> (its weights in the --record-type format); see "
        "docs/onnx-import.md.",
        "ember-onnx"};
    ember_examples::setup(app);
    app.add_option("MODEL", model_path, "the .onnx file")->check(CLI::ExistingFile);
    app.add_option("--out", out, "the directory the header and the record go to");
    app.add_option("--name", name,
                   "the files' name, a C++ identifier (default: the model file's stem)");
    app.add_option("--namespace", ns, "the generated code's namespace (default: NAME)");
    app.add_option("--record-type", opt.record_type, "the weights' format")
        ->check(CLI::IsMember(kRecordTypes));
    app.add_flag("--half", opt.half_precision, "store the weights as 16-bit floats");
    app.add_flag("--embed", embed,
                 "also write OUT/NAME.embed.bin (the weights as a Bin record, which the build "
                 "compiles into the program for Model::from_embedded)");
    app.add_flag(
        "--meta", meta,
        "also write OUT/NAME.meta, the forward's inputs and outputs (for test generators)");
    app.add_option("--input-shape", shapes,
                   "a graph input's shape where the model leaves it open (repeatable)")
        ->type_name("NAME=D0,D1,...")
        ->check(CLI::Validator(
            [](std::string& text) {
                std::string n;
                std::vector<std::int64_t> d;
                return parse_shape(text, n, d);
            },
            ""));
    app.add_option("--bind", bindings,
                   "a graph input fixed to a TensorProto file's value (repeatable)")
        ->type_name("NAME=FILE.pb")
        ->check(CLI::Validator(
            [](std::string& text) {
                std::string n, f;
                if (auto e = split_binding(text, n, f); !e.empty()) return e;
                return CLI::ExistingFile(f);
            },
            ""));
    auto* list = app.add_flag("--list-ops", list_ops,
                              "print the ONNX operators ember-onnx imports, and exit");
    app.callback([&] {
        if (list_ops) return;
        if (model_path.empty()) throw CLI::RequiredError("MODEL");
        if (out.empty()) throw CLI::RequiredError("--out");
    });
    list->excludes("MODEL");
    ember_examples::parse_or_exit(app, argc, argv);
    if (list_ops) {
        for (const auto& op : ember::onnx::supported_ops()) std::cout << op << '\n';
        return 0;
    }
    for (const auto& s : shapes) {
        std::string n;
        std::vector<std::int64_t> dims;
        parse_shape(s, n, dims);
        opt.input_shapes[n] = dims;
    }
    for (const auto& b : bindings) {
        std::string n, file;
        split_binding(b, n, file);
        std::ifstream in(file, std::ios::binary);
        std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
        if (!in.good() && !in.eof()) throw ember::ArgumentError("ember-onnx: cannot read " + file);
        opt.bound_inputs[n] = ember::onnx::parse_tensor(std::as_bytes(std::span(bytes)), file).data;
    }
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

    const auto model = ember::onnx::load_model(model_path, opt.input_shapes);
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
