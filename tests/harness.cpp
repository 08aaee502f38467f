#include "harness.hpp"

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

namespace ember::test {
namespace {

std::mutex g_mu;
std::map<std::string, nlohmann::json> g_files;

const nlohmann::json& load_file(const std::string& file) {
    std::lock_guard lock(g_mu);
    auto it = g_files.find(file);
    if (it != g_files.end()) return it->second;
    const std::string path = std::string(EMBER_FIXTURE_DIR) + "/" + file + ".json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("fixture file not found: " + path);
    return g_files.emplace(file, nlohmann::json::parse(in)).first->second;
}

double number(const nlohmann::json& v) {
    if (v.is_string()) {  // JSON has no NaN/inf: the scripts write them as strings
        const auto s = v.get<std::string>();
        if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
        if (s == "inf") return std::numeric_limits<double>::infinity();
        if (s == "-inf") return -std::numeric_limits<double>::infinity();
        throw std::runtime_error("bad number in fixture: " + s);
    }
    if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
    return v.get<double>();
}

TensorData to_data(const nlohmann::json& t) {
    Shape shape;
    for (auto d : t.at("shape")) shape.push_back(d.get<std::size_t>());
    const std::string dtype = t.at("dtype").get<std::string>();
    const auto& values = t.at("data");
    if (dtype == "bool") {
        std::vector<bool> v;
        for (const auto& x : values) v.push_back(number(x) != 0);
        std::vector<std::uint8_t> bytes(v.begin(), v.end());
        std::vector<std::byte> raw(bytes.size());
        if (!bytes.empty()) std::memcpy(raw.data(), bytes.data(), bytes.size());
        return TensorData(std::move(raw), shape, DType::Bool);
    }
    if (dtype == "i64" || dtype == "i32") {
        std::vector<std::int64_t> v;
        for (const auto& x : values) v.push_back(x.get<std::int64_t>());
        return TensorData(v, shape);
    }
    std::vector<double> v;
    for (const auto& x : values) v.push_back(number(x));
    return TensorData(v, shape).convert(dtype == "f64" ? DType::F64 : DType::F32);
}

}  // namespace

Fixture::Fixture(const std::string& file, const std::string& name) : name_(name) {
    const auto& root = load_file(file);
    if (!root.contains(name)) throw std::runtime_error("fixture case not found: " + file + "/" + name);
    const auto& c = root.at(name);
    if (c.contains("inputs"))
        for (const auto& t : c.at("inputs")) inputs_.push_back(to_data(t));
    if (c.contains("outputs"))
        for (const auto& t : c.at("outputs")) outputs_.push_back(to_data(t));
    if (c.contains("tensors"))
        for (auto& [k, t] : c.at("tensors").items()) named_.emplace_back(k, to_data(t));
    if (c.contains("params"))
        for (auto& [k, v] : c.at("params").items()) {
            if (v.is_string() && v != "nan" && v != "inf" && v != "-inf")
                strings_.emplace_back(k, v.get<std::string>());
            else params_.emplace_back(k, number(v));
        }
}

std::vector<std::string> fixture_cases(const std::string& file) {
    std::vector<std::string> names;
    for (auto& [k, v] : load_file(file).items()) names.push_back(k);
    return names;
}

std::size_t Fixture::num_inputs() const { return inputs_.size(); }

const TensorData& Fixture::input(std::size_t i) const {
    if (i >= inputs_.size()) throw std::runtime_error("fixture " + name_ + ": no input " + std::to_string(i));
    return inputs_[i];
}
const TensorData& Fixture::output(std::size_t i) const {
    if (i >= outputs_.size()) throw std::runtime_error("fixture " + name_ + ": no output " + std::to_string(i));
    return outputs_[i];
}
double Fixture::param(const std::string& key) const {
    for (const auto& [k, v] : params_)
        if (k == key) return v;
    throw std::runtime_error("fixture " + name_ + ": no param " + key);
}

bool Fixture::has_param(const std::string& key) const {
    for (const auto& [k, v] : params_)
        if (k == key) return true;
    for (const auto& [k, v] : strings_)
        if (k == key) return true;
    return false;
}
const std::string& Fixture::str(const std::string& key) const {
    for (const auto& [k, v] : strings_)
        if (k == key) return v;
    throw std::runtime_error("fixture " + name_ + ": no string param " + key);
}
bool Fixture::has(const std::string& name) const {
    for (const auto& [k, v] : named_)
        if (k == name) return true;
    return false;
}
const TensorData& Fixture::named(const std::string& name) const {
    for (const auto& [k, v] : named_)
        if (k == name) return v;
    throw std::runtime_error("fixture " + name_ + ": no tensor " + name);
}

void check_close(const TensorData& actual, const TensorData& expected, Tolerance tol) {
    INFO("actual:   " << actual.to_string());
    INFO("expected: " << expected.to_string());
    REQUIRE(actual.shape() == expected.shape());
    const bool ok = actual.all_close(expected, tol);
    if (!ok) INFO(check_closeness(actual, expected).to_string());
    CHECK(ok);
}

void check_equal(const TensorData& actual, const TensorData& expected) {
    INFO("actual:   " << actual.to_string());
    INFO("expected: " << expected.to_string());
    REQUIRE(actual.shape() == expected.shape());
    CHECK(actual.to_vec<double>() == expected.to_vec<double>());
}

}  // namespace ember::test
