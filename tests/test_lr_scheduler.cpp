// Learning-rate schedulers against torch.optim.lr_scheduler (get_last_lr() before each
// scheduler.step(), from tests/fixtures/gen_optim.py; Noam through LambdaLR with its formula),
// their records, and config errors.
#include <cmath>
#include <numbers>

#include <ember/optim/lr_scheduler.hpp>
#include <ember/optim/lr_scheduler_compose.hpp>

#include "harness.hpp"

namespace test_lr_scheduler {

namespace {

namespace lr = ember::lr_scheduler;

std::vector<double> expected_lrs(const std::string& name) {
    return ember::test::Fixture("optim", name).named("lrs").to_vec<double>();
}

template <typename S>
void check_sequence(S scheduler, const std::vector<double>& expected) {
    for (std::size_t i = 0; i < expected.size(); ++i) {
        INFO("iteration " << i);
        CHECK(scheduler.step() == Approx(expected[i]).epsilon(1e-12).margin(1e-15));
    }
}

// Steps `k` times, saves, loads into a fresh scheduler from the same config, and checks that
// both continue identically.
template <typename S>
void check_resume(S scheduler, S fresh, int k) {
    for (int i = 0; i < k; ++i) scheduler.step();
    auto resumed = fresh.load_record(scheduler.to_record());
    CHECK(resumed.to_record() == scheduler.to_record());
    for (int i = 0; i < 12; ++i) CHECK(resumed.step() == scheduler.step());
}

}  // namespace

TEST_CASE("schedulers follow torch.optim.lr_scheduler", "[lr_scheduler]") {
    SECTION("ConstantLr and plain doubles") {
        lr::ConstantLr c = 0.01;
        CHECK(c.step() == 0.01);
        CHECK(c.step() == 0.01);
        CHECK(lr::step(c) == 0.01);
        CHECK(lr::step(0.02) == 0.02);
        check_resume(c, lr::ConstantLr{0.01}, 3);
    }
    SECTION("LinearLR, decreasing (the first step gives initial_lr)") {
        auto config = lr::LinearLrSchedulerConfig{0.9, 0.5, 4};
        check_sequence(config.init(), expected_lrs("linear_decreasing"));
        check_resume(config.init(), config.init(), 2);
    }
    SECTION("LinearLR, increasing") {
        check_sequence(lr::LinearLrSchedulerConfig{0.01, 0.04, 3}.init(),
                       expected_lrs("linear_increasing"));
    }
    SECTION("CosineAnnealingLR over one period, then a warm restart") {
        auto config = lr::CosineAnnealingLrSchedulerConfig{0.5, 10}.with_min_lr(0.1);
        auto expected = expected_lrs("cosine");  // iterations 0..10
        REQUIRE(expected.size() == 11);
        auto s = config.init();
        check_sequence(s, expected);
        for (int i = 0; i < 11; ++i) s.step();
        // Iteration 11 restarts at initial_lr (SGDR), then follows the same curve.
        CHECK(s.step() == Approx(0.5).epsilon(1e-15));
        CHECK(s.step() == Approx(0.1 + 0.2 * (1 + std::cos(std::numbers::pi / 10))).epsilon(1e-12));
        check_resume(config.init(), config.init(), 7);
    }
    SECTION("ExponentialLR") {
        auto config = lr::ExponentialLrSchedulerConfig{0.8, 0.7};
        check_sequence(config.init(), expected_lrs("exponential"));
        check_resume(config.init(), config.init(), 5);
    }
    SECTION("StepLR") {
        auto config = lr::StepLrSchedulerConfig{0.4, 3}.with_gamma(0.5);
        check_sequence(config.init(), expected_lrs("step"));
        CHECK(lr::StepLrSchedulerConfig{0.4, 3}.gamma == 0.1);  // Burn's default
        check_resume(config.init(), config.init(), 4);
    }
    SECTION("Noam (torch LambdaLR with the formula of Attention Is All You Need)") {
        auto config = lr::NoamLrSchedulerConfig{2.0}.with_warmup_steps(5).with_model_size(16);
        check_sequence(config.init(), expected_lrs("noam"));
        CHECK(lr::NoamLrSchedulerConfig{1.0}.warmup_steps == 4000);
        CHECK(lr::NoamLrSchedulerConfig{1.0}.model_size == 512);
        check_resume(config.init(), config.init(), 6);
    }
}

TEST_CASE("scheduler records", "[lr_scheduler]") {
    SECTION("the position is recorded under the scheduler's name") {
        auto s = lr::StepLrSchedulerConfig{0.4, 3}.init();
        s.step();
        s.step();
        auto r = s.to_record();
        CHECK(r.at("scheduler").as<std::string>() == "StepLrScheduler");
        CHECK(r.at("iter_idx").as<std::int64_t>() == 1);
    }
    SECTION("loading a record of another scheduler or a bad one") {
        auto linear = lr::LinearLrSchedulerConfig{0.9, 0.5, 4}.init();
        auto step = lr::StepLrSchedulerConfig{0.4, 3}.init();
        CHECK_THROWS_AS(linear.load_record(step.to_record()), ember::FormatError);
        CHECK_THROWS_WITH(linear.load_record(step.to_record()), Catch::Contains("StepLrScheduler"));
        CHECK_THROWS_AS(step.load_record(ember::record::Value(1.0)), ember::FormatError);
        CHECK_THROWS_AS(lr::ConstantLr{0.1}.load_record(step.to_record()), ember::FormatError);
        auto bad = ember::record::Value(
            ember::record::Map{{"scheduler", "CosineAnnealingLrScheduler"}, {"current_iter", 99}});
        CHECK_THROWS_AS((lr::CosineAnnealingLrSchedulerConfig{0.5, 10}.init().load_record(bad)),
                        ember::FormatError);
        auto wrong_kind = ember::record::Value(
            ember::record::Map{{"scheduler", "NoamLrScheduler"}, {"step", "three"}});
        CHECK_THROWS_AS(lr::NoamLrSchedulerConfig{1.0}.init().load_record(wrong_kind),
                        ember::FormatError);
    }
}

TEST_CASE("scheduler config errors", "[lr_scheduler]") {
    using ember::ArgumentError;
    CHECK_THROWS_AS(lr::LinearLrSchedulerConfig({0.0, 0.5, 10}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::LinearLrSchedulerConfig({1.5, 0.5, 10}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::LinearLrSchedulerConfig({0.5, -0.1, 10}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::LinearLrSchedulerConfig({0.5, 0.1, 0}).init(), ArgumentError);
    CHECK_THROWS_WITH(
        lr::LinearLrSchedulerConfig({0.5, 0.1, 0}).init(),
        Catch::Contains("LinearLrSchedulerConfig::init") && Catch::Contains("num_iters"));
    CHECK_THROWS_AS(lr::CosineAnnealingLrSchedulerConfig({0.0, 10}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::CosineAnnealingLrSchedulerConfig({0.5, 10}).with_min_lr(0.6).init(),
                    ArgumentError);
    CHECK_THROWS_AS(lr::CosineAnnealingLrSchedulerConfig({0.5, 0}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::ExponentialLrSchedulerConfig({0.5, 0.0}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::ExponentialLrSchedulerConfig({0.5, 1.5}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::ExponentialLrSchedulerConfig({2.0, 0.5}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::StepLrSchedulerConfig({0.5, 0}).init(), ArgumentError);
    CHECK_THROWS_AS(lr::NoamLrSchedulerConfig({1.0}).with_warmup_steps(0).init(), ArgumentError);
    CHECK_THROWS_AS(lr::NoamLrSchedulerConfig({1.0}).with_model_size(0).init(), ArgumentError);
    // StepLR does not check initial_lr or gamma (Burn: atypical values help debugging).
    CHECK_NOTHROW(lr::StepLrSchedulerConfig({-1.0, 2}).with_gamma(2.0).init());
}

TEST_CASE("composed and sequential schedulers", "[lr_scheduler]") {
    SECTION("SequentialLrScheduler follows torch's SequentialLR") {
        auto make = [] {
            return lr::sequential(
                {4}, lr::LinearLrSchedulerConfig{0.4, 0.1, 3}.init(),
                lr::CosineAnnealingLrSchedulerConfig{0.4, 4}.with_min_lr(0.05).init());
        };
        check_sequence(make(), expected_lrs("sequential"));
        check_resume(make(), make(), 6);
        check_resume(make(), make(), 2);
    }
    SECTION("ComposedLrScheduler: product, sum and mean of the parts' rates") {
        // Exponential 0.5·0.5^i with constant 0.2: the product is 0.1·0.5^i, the sum
        // 0.5·0.5^i + 0.2, the mean half of it.
        auto exp = lr::ExponentialLrSchedulerConfig{0.5, 0.5}.init();
        auto prod = lr::ComposedLrScheduler(exp, lr::ConstantLr{0.2});
        auto sum = lr::compose(lr::SchedulerReduction::Sum, exp, lr::ConstantLr{0.2});
        auto avg = lr::compose(lr::SchedulerReduction::Avg, exp, lr::ConstantLr{0.2});
        for (int i = 0; i < 6; ++i) {
            INFO("iteration " << i);
            const double e = 0.5 * std::pow(0.5, i);
            CHECK(prod.step() == Approx(0.2 * e).epsilon(1e-14));
            CHECK(sum.step() == Approx(e + 0.2).epsilon(1e-14));
            CHECK(avg.step() == Approx((e + 0.2) / 2).epsilon(1e-14));
        }
        check_resume(lr::ComposedLrScheduler(exp, lr::ConstantLr{0.2}),
                     lr::ComposedLrScheduler(exp, lr::ConstantLr{0.2}), 3);
        static_assert(lr::LrScheduler<decltype(prod)>);
    }
    SECTION("errors") {
        auto a = lr::ExponentialLrSchedulerConfig{0.5, 0.5}.init();
        CHECK_THROWS_WITH(lr::sequential({}, a, a), Catch::Contains("SequentialLrScheduler") &&
                                                        Catch::Contains("1 milestones"));
        CHECK_THROWS_AS(lr::sequential({3, 3}, a, a, a), ember::ArgumentError);
        CHECK_THROWS_AS(lr::sequential({0}, a, a), ember::ArgumentError);
        // A record of another kind, or of another number of parts.
        auto two = lr::ComposedLrScheduler(a, a);
        CHECK_THROWS_AS(two.load_record(a.to_record()), ember::FormatError);
        CHECK_THROWS_WITH(
            two.load_record(lr::ComposedLrScheduler(a).to_record()),
            Catch::Contains("ComposedLrScheduler") && Catch::Contains("1 schedulers"));
        auto seq = lr::sequential({2}, a, a);
        CHECK_THROWS_AS(seq.load_record(two.to_record()), ember::FormatError);
    }
}

}  // namespace test_lr_scheduler
