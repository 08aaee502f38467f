// Serde for optimizer-style state: EMBER_RECORD structs, std containers, user Serde
// specialisations, and errors that name the path inside the tree.
#include "record_check.hpp"

namespace test_record_serde {

namespace {

enum class Phase : std::uint8_t { Warmup = 1, Decay = 7 };

struct Moments {
    TensorData first;
    std::optional<TensorData> second;
    EMBER_RECORD(Moments, first, second)
    bool operator==(const Moments&) const = default;
};

struct OptimState {
    std::int64_t step = 0;
    double lr = 0;
    float beta = 0;
    bool amsgrad = false;
    std::uint16_t warmup = 0;
    std::int8_t tiny = 0;
    std::string name;
    Phase phase = Phase::Warmup;
    std::vector<Moments> moments;
    std::array<int, 3> window{};
    std::map<std::string, double> extras;
    std::pair<int, std::string> tag;
    std::optional<int> maybe;
    std::vector<bool> flags;
    EMBER_RECORD(OptimState, step, lr, beta, amsgrad, warmup, tiny, name, phase, moments, window,
                 extras, tag, maybe, flags)
    bool operator==(const OptimState&) const = default;
};

OptimState sample_state() {
    OptimState s;
    s.step = 1234567890123;
    s.lr = 3e-4;
    s.beta = 0.9f;
    s.amsgrad = true;
    s.warmup = 65535;
    s.tiny = -128;
    s.name = "adam\xe2\x9c\x93";
    s.phase = Phase::Decay;
    s.moments = {{TensorData({1.f, 2.f}, {2}), std::nullopt},
                 {TensorData({3.f}, {1}), TensorData({4.f}, {1})}};
    s.window = {1, -2, 3};
    s.extras = {{"b", 2.5}, {"a", -1.0}};
    s.tag = {7, "seven"};
    s.maybe = 0;
    s.flags = {true, false, true};
    return s;
}

// A user type with its own Serde: a temperature stored as a plain double.
struct Celsius {
    double degrees = 0;
    bool operator==(const Celsius&) const = default;
};

struct NotSerialisable {};

}  // namespace

}  // namespace test_record_serde

template <>
struct ember::record::Serde<test_record_serde::Celsius> {
    static Value to(const test_record_serde::Celsius& c) { return Value(c.degrees); }
    static test_record_serde::Celsius from(const Value& v, std::string_view path) {
        return {from_value<double>(v, path)};
    }
};

namespace test_record_serde {

TEST_CASE("records: serde round trips", "[record]") {
    SECTION("scalars") {
        CHECK(rec::from_value<bool>(rec::to_value(true)) == true);
        CHECK(rec::to_value(std::int8_t{-128}) == Value(-128));
        CHECK(rec::from_value<std::int8_t>(Value(-128)) == -128);
        CHECK(rec::from_value<std::uint8_t>(Value(255)) == 255);
        CHECK(rec::from_value<std::int16_t>(Value(-32768)) == -32768);
        CHECK(rec::from_value<std::uint32_t>(Value(4294967295LL)) == 4294967295u);
        CHECK(rec::from_value<std::int64_t>(rec::to_value(kI64Min)) == kI64Min);
        CHECK(rec::from_value<std::int64_t>(rec::to_value(kI64Max)) == kI64Max);
        CHECK(rec::from_value<std::uint64_t>(rec::to_value(std::uint64_t(kI64Max))) ==
              std::uint64_t(kI64Max));
        CHECK(rec::from_value<char>(rec::to_value('x')) == 'x');
        CHECK(rec::from_value<std::size_t>(rec::to_value(std::size_t{42})) == 42);
        CHECK(rec::to_value(0.1f) == Value(static_cast<double>(0.1f)));
        CHECK(rec::from_value<float>(rec::to_value(0.1f)) == 0.1f);
        CHECK(ember::detail::bit_cast<std::uint64_t>(rec::from_value<double>(
                  rec::to_value(-0.0))) == ember::detail::bit_cast<std::uint64_t>(-0.0));
        CHECK(std::isnan(
            rec::from_value<float>(rec::to_value(std::numeric_limits<float>::quiet_NaN()))));
        CHECK(rec::from_value<double>(Value(3)) == 3.0);  // an int is accepted where a float is due
        CHECK(rec::from_value<std::string>(rec::to_value(std::string("s"))) == "s");
        const TensorData t({1.f, 2.f}, {2});
        CHECK(rec::from_value<TensorData>(rec::to_value(t)) == t);
        const Value v = Map{{"x", List{1, "y"}}};
        CHECK(rec::from_value<Value>(rec::to_value(v)) == v);
        CHECK(rec::to_value(Phase::Decay) == Value(7));
        CHECK(rec::from_value<Phase>(Value(1)) == Phase::Warmup);
        CHECK(rec::from_value<Celsius>(rec::to_value(Celsius{21.5})) == Celsius{21.5});
    }
    SECTION("containers") {
        const std::vector<int> v{1, 2, 3};
        CHECK(rec::to_value(v) == Value(List{1, 2, 3}));
        CHECK(rec::from_value<std::vector<int>>(rec::to_value(v)) == v);
        const std::vector<bool> bits{true, false};
        CHECK(rec::from_value<std::vector<bool>>(rec::to_value(bits)) == bits);
        const std::array<double, 2> a{0.5, -1.5};
        CHECK(rec::from_value<std::array<double, 2>>(rec::to_value(a)) == a);
        CHECK(rec::to_value(std::optional<int>()) == Value());
        CHECK(rec::from_value<std::optional<int>>(Value()) == std::nullopt);
        CHECK(rec::from_value<std::optional<int>>(Value(0)) == 0);
        const std::map<std::string, std::vector<float>> m{{"b", {1.f}}, {"a", {}}};
        CHECK(rec::to_value(m) == Value(Map{{"a", List{}}, {"b", List{1.0}}}));
        CHECK(rec::from_value<std::map<std::string, std::vector<float>>>(rec::to_value(m)) == m);
        const std::pair<std::string, std::optional<Phase>> p{"x", Phase::Decay};
        CHECK(rec::to_value(p) == Value(List{"x", 7}));
        CHECK(rec::from_value<std::pair<std::string, std::optional<Phase>>>(rec::to_value(p)) == p);
        using Nested = std::vector<std::optional<std::map<std::string, Celsius>>>;
        const Nested nested{std::nullopt, std::map<std::string, Celsius>{{"t", {1.0}}}};
        CHECK(rec::from_value<Nested>(rec::to_value(nested)) == nested);
    }
    SECTION("EMBER_RECORD structs are maps of their fields, in order") {
        const OptimState s = sample_state();
        const Value v = rec::to_value(s);
        const Map& fields = v.as<Map>();
        REQUIRE(fields.size() == 14);
        CHECK(fields[0].first == "step");
        CHECK(fields[13].first == "flags");
        CHECK(v.at("phase") == Value(7));
        CHECK(v.at("moments").as<List>()[0].at("second").is_null());
        CHECK(rec::from_value<OptimState>(v) == s);
    }
    SECTION("fields beyond the struct's are ignored") {
        Value v = rec::to_value(sample_state());
        v.as_mut<Map>().emplace_back("added_later", 1);
        CHECK(rec::from_value<OptimState>(v) == sample_state());
    }
    SECTION("through every recorder") {
        const TempDir dir;
        const OptimState s = sample_state();
        for (const AnyRecorder& r : all_recorders()) {
            INFO(r.name);
            r.record(rec::to_value(s), dir / "optim");
            CHECK(rec::from_value<OptimState>(r.load(dir / "optim")) == s);
        }
    }
    SECTION("what is serialisable") {
        STATIC_REQUIRE(rec::Serializable<OptimState>);
        STATIC_REQUIRE(rec::Serializable<std::vector<std::optional<Moments>>>);
        STATIC_REQUIRE(rec::Serializable<Celsius>);
        STATIC_REQUIRE(!rec::Serializable<NotSerialisable>);
        STATIC_REQUIRE(!rec::Serializable<std::vector<NotSerialisable>>);
    }
}

TEST_CASE("records: serde errors name the path", "[record]") {
    const Value good = rec::to_value(sample_state());
    auto with = [&](std::string_view field, Value replacement) {
        Value v = good;
        for (auto& [k, e] : v.as_mut<Map>())
            if (k == field) e = std::move(replacement);
        return v;
    };
    auto without = [&](std::string_view field) {
        Value v = good;
        auto& m = v.as_mut<Map>();
        m.erase(
            std::remove_if(m.begin(), m.end(), [&](const auto& kv) { return kv.first == field; }),
            m.end());
        return v;
    };
    using ember::FormatError;

    SECTION("a missing field") {
        REQUIRE_THROWS_AS(rec::from_value<OptimState>(without("lr"), "optim"), FormatError);
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(without("lr"), "optim"),
                            Contains("missing field 'optim.lr'"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(without("step")),
                            Contains("missing field 'step'"));
    }
    SECTION("a field of the wrong kind") {
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("lr", "fast"), "optim"),
                            Contains("'optim.lr' should be float but is string"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("amsgrad", 1), "optim"),
                            Contains("'optim.amsgrad' should be bool but is int"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(Value(3), "optim"),
                            Contains("'optim' should be map but is int"));
        REQUIRE_THROWS_WITH(rec::from_value<int>(Value(1.5)), Contains("'<root>' should be int"));
    }
    SECTION("errors deep inside containers") {
        Value moments = good.at("moments");
        moments.as_mut<List>()[1].as_mut<Map>()[0].second = List{};
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("moments", moments), "optim"),
                            Contains("'optim.moments[1].first' should be tensor but is list"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("extras", Map{{"a", "x"}}), "optim"),
                            Contains("'optim.extras.a'"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("tag", List{1, 2}), "optim"),
                            Contains("'optim.tag[1]' should be string"));
        REQUIRE_THROWS_WITH(
            (rec::from_value<std::map<std::string, int>>(Value(Map{{"a", 1}, {"a", 2}}), "m")),
            Contains("'m.a' appears twice"));
    }
    SECTION("integers out of range") {
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("tiny", 200), "optim"),
                            Contains("'optim.tiny' = 200 is out of range for int8"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("warmup", -1), "optim"),
                            Contains("out of range for uint16"));
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("phase", 256), "optim"),
                            Contains("'optim.phase' = 256 is out of range for uint8"));
        REQUIRE_THROWS_AS(rec::from_value<std::uint64_t>(Value(-1)), FormatError);
        REQUIRE_THROWS_AS(rec::to_value(std::numeric_limits<std::uint64_t>::max()),
                          ember::ArgumentError);
        REQUIRE_THROWS_WITH(rec::from_value<float>(Value(1e300), "x"),
                            Contains("out of range for float"));
    }
    SECTION("arrays of the wrong length") {
        REQUIRE_THROWS_WITH(rec::from_value<OptimState>(with("window", List{1, 2}), "optim"),
                            Contains("'optim.window' should have 3 elements but has 2"));
        REQUIRE_THROWS_WITH((rec::from_value<std::pair<int, int>>(Value(List{1}), "p")),
                            Contains("'p' should have 2 elements but has 1"));
    }
}

}  // namespace test_record_serde
