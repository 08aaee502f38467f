// Data-parallel training on CPU replicas (threads): N replicas with shards of B items give the
// same parameters after K steps as one replica with batches of B·N items, with SGD (momentum)
// and Adam, through a bare training loop (sync_gradients) and through the Learner
// (LearnerBuilder::devices with N devices); the Learner also splits batches that do not divide
// evenly, writes one checkpoint, and reports the metrics of the whole batch.
#include <unistd.h>
#include <cmath>
#include <ember/collective/gradients.hpp>
#include <ember/collective/thread.hpp>
#include <ember/ember.hpp>
#include <ember/nn/dropout.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/loss.hpp>
#include <ember/optim.hpp>
#include <ember/train/learner.hpp>
#include <ember/train/plain_renderer.hpp>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>
#include "module_check.hpp"

namespace test_data_parallel {

namespace {

namespace fs = std::filesystem;
namespace train = ember::train;
using namespace ember::collective;
using ember::Cpu;
using ember::Tensor;
using ember::TensorData;
using ember::test::param_values;
using AD = ember::Autodiff<Cpu>;

template <ember::Backend B>
struct Batch {
    Tensor<B, 2> x;         // [n, 4]
    Tensor<B, 2> y;         // [n, 2]
    bool poisoned = false;  // its shards past the first throw (a failing replica)
    std::size_t num_items() const { return x.dims()[0]; }
    Batch shard(std::size_t begin, std::size_t end, const ember::Device<B>& device) const {
        EMBER_CHECK(!poisoned || begin == 0, Argument, "poisoned shard [", begin, ", ", end, ")");
        return {train::shard_rows(x, begin, end, device), train::shard_rows(y, begin, end, device)};
    }
};

// Deterministic items: item i of the data set.
Batch<AD> make_batch(std::size_t first, std::size_t n) {
    std::vector<float> x, y;
    for (std::size_t i = first; i < first + n; ++i) {
        float s = 0;
        for (std::size_t j = 0; j < 4; ++j) {
            const float v = std::sin(0.37f * float(i) + 1.3f * float(j));
            x.push_back(v);
            s += v * float(j + 1);
        }
        y.push_back(std::tanh(s));
        y.push_back(0.5f * s - 0.25f);
    }
    return {Tensor<AD, 2>::from_data(TensorData(x, {n, 4})),
            Tensor<AD, 2>::from_data(TensorData(y, {n, 2}))};
}

template <ember::Backend B>
struct Net {
    ember::nn::Linear<B> l1;
    ember::nn::Linear<B> l2;
    ember::nn::Relu act;
    EMBER_MODULE(Net, l1, l2, act)

    train::RegressionOutput<B> forward(const Batch<B>& b) const {
        auto out = l2.forward(act.forward(l1.forward(b.x)));
        return {ember::nn::loss::MseLoss{}.forward(out, b.y), out, b.y};
    }
    train::TrainOutput<train::RegressionOutput<B>> step(
        const Batch<B>& b) const requires ember::AutodiffBackend<B> {
        auto item = forward(b);
        return {*this, item.loss.backward(), std::move(item)};
    }
    train::RegressionOutput<B> step(const Batch<B>& b) const requires(!ember::AutodiffBackend<B>) {
        return forward(b);
    }
};

Net<AD> make_net() {
    AD::seed(7);
    return {ember::nn::LinearConfig{4, 16}.init<AD>({}),
            ember::nn::LinearConfig{16, 2}.init<AD>({}),
            {}};
}

void check_close(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                 double tol) {
    const double worst = ember::test::largest_difference(a, b);
    INFO("largest difference " << worst);
    CHECK(worst <= tol);
}

// The parameters did move (the comparison above is not between two untrained models).
void check_moved(const std::vector<std::vector<float>>& before,
                 const std::vector<std::vector<float>>& after) {
    double moved = 0;
    for (std::size_t i = 0; i < before.size(); ++i)
        for (std::size_t j = 0; j < before[i].size(); ++j)
            moved = std::max(moved, double(std::abs(before[i][j] - after[i][j])));
    CHECK(moved > 1e-3);
}

// K steps of one replica on batches of B·N items.
template <typename Opt>
Net<AD> train_single(Net<AD> model, Opt optim, std::size_t batch, std::size_t steps, double lr) {
    for (std::size_t k = 0; k < steps; ++k) {
        auto out = model.step(make_batch(k * batch, batch));
        model = optim.step(lr, std::move(model), std::move(out.grads));
    }
    return model;
}

// K steps of N replicas (threads) with shards of batch / N items, gradients averaged.
// With `overlap`, gradients are reduced during backward (GradientReducer); else after it.
template <typename Opt>
std::vector<Net<AD>> train_replicas(const Net<AD>& model, const Opt& optim, std::size_t n,
                                    std::size_t batch, std::size_t steps, double lr, bool overlap) {
    auto group = ThreadCollective::group(n);
    std::vector<Net<AD>> models(n, model);
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            Net<AD> m = model.fork(ember::CpuDevice{});
            Opt o = optim;
            const std::size_t shard = batch / n;
            for (std::size_t k = 0; k < steps; ++k) {
                auto sub = make_batch(k * batch, batch).shard(r * shard, (r + 1) * shard, {});
                // Four buckets: [l2.bias], [l2.weight], [l1.bias], [l1.weight].
                const GradientSyncOptions options{.bucket_bytes = 128, .first_bucket_bytes = 8};
                if (!overlap) {
                    auto out = m.step(sub);
                    auto grads = sync_gradients(*group[r], m, std::move(out.grads), options);
                    m = o.step(lr, std::move(m), std::move(grads));
                    continue;
                }
                GradientReducer reducer(*group[r], m, options);
                ember::optim::GradientsParams grads;
                {
                    auto scope = reducer.attach();
                    grads = m.step(sub).grads;
                }
                // Every bucket was started by backward itself, none by finish.
                CHECK(reducer.num_buckets() == 4);
                m = o.step(lr, std::move(m), reducer.finish(std::move(grads)));
                CHECK(reducer.overlapped() == 4);
            }
            models[r] = m;
        });
    for (auto& t : threads) t.join();
    return models;
}

struct Loader {
    std::size_t items, batch;
    std::size_t poison = std::size_t(-1);  // the batch whose shards past the first throw
    std::size_t num_items() const { return items; }
    std::size_t num_batches() const { return (items + batch - 1) / batch; }
    std::size_t batch_size() const { return batch; }
    std::vector<Batch<AD>> iter() const {
        std::vector<Batch<AD>> out;
        for (std::size_t s = 0; s < items; s += batch) {
            out.push_back(make_batch(s, std::min(batch, items - s)));
            out.back().poisoned = out.size() - 1 == poison;
        }
        return out;
    }
};

struct ValidLoader {
    std::size_t num_items() const { return 8; }
    std::size_t num_batches() const { return 1; }
    std::vector<Batch<Cpu>> iter() const {
        auto b = make_batch(1000, 8);
        return {{b.x.inner(), b.y.inner()}};
    }
};

struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name)
        : path(fs::temp_directory_path() /
               ("ember-dp-" + name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

using Builder = train::LearnerBuilder<train::RegressionOutput<AD>, train::RegressionOutput<Cpu>>;

template <typename Opt>
std::pair<Net<AD>, std::vector<double>> fit(const Net<AD>& model, const Opt& optim,
                                            std::size_t replicas, const Loader& loader, double lr,
                                            const fs::path& dir, bool checkpoint = false,
                                            bool overlap = true) {
    std::ostringstream sink;
    Builder b(dir);
    b.metric_train_numeric(train::LossMetric<AD>{})
        .metric_valid_numeric(train::LossMetric<Cpu>{})
        .renderer(std::make_shared<train::PlainRenderer>(sink, 0.0))
        .with_application_logger(nullptr)
        .devices(std::vector<ember::CpuDevice>(replicas))
        .overlap_gradient_sync(overlap);
    if (checkpoint)
        b.with_file_checkpointer(
            ember::record::NamedMpkGzFileRecorder<ember::record::FullPrecisionSettings>{}, 1);
    auto learner = b.build(model, optim, lr);
    auto trained = learner.fit(loader, ValidLoader{});
    return {trained, learner.history().at(train::Split::Train).at("Loss")};
}

}  // namespace

TEST_CASE("Data parallel, bare loop: N replicas with batch B match one with batch B·N",
          "[collective][data-parallel]") {
    const std::size_t shard = 6, steps = 5;
    const Net<AD> model = make_net();
    const auto start = param_values(model);
    for (std::size_t n : {2u, 4u}) {
        SECTION("SGD with momentum, " + std::to_string(n) + " replicas") {
            auto optim = ember::optim::SgdConfig{}
                             .with_momentum(ember::optim::MomentumConfig{})
                             .init<Net<AD>>();
            auto single = param_values(train_single(model, optim, shard * n, steps, 0.1));
            check_moved(start, single);
            for (bool overlap : {false, true}) {
                INFO("gradients reduced " << (overlap ? "during" : "after") << " backward");
                auto replicas = train_replicas(model, optim, n, shard * n, steps, 0.1, overlap);
                for (const auto& m : replicas) check_close(param_values(m), single, 1e-5);
            }
        }
        SECTION("Adam, " + std::to_string(n) + " replicas") {
            auto optim = ember::optim::AdamConfig{}.init<Net<AD>>();
            auto single = param_values(train_single(model, optim, shard * n, steps, 1e-2));
            check_moved(start, single);
            for (bool overlap : {false, true}) {
                INFO("gradients reduced " << (overlap ? "during" : "after") << " backward");
                auto replicas = train_replicas(model, optim, n, shard * n, steps, 1e-2, overlap);
                for (const auto& m : replicas) check_close(param_values(m), single, 1e-5);
            }
        }
    }
}

TEST_CASE("Data parallel, Learner: devices({N CPU replicas}) matches one device",
          "[collective][data-parallel][learner]") {
    const Net<AD> model = make_net();
    const auto start = param_values(model);
    for (std::size_t n : {2u, 4u}) {
        const std::size_t batch = 6 * n;
        const Loader loader{5 * batch, batch};  // K = 5 steps
        SECTION("SGD, " + std::to_string(n) + " replicas") {
            TempDir d1("sgd1"), dn("sgdn");
            auto optim = ember::optim::SgdConfig{}
                             .with_momentum(ember::optim::MomentumConfig{})
                             .init<Net<AD>>();
            auto [one, loss1] = fit(model, optim, 1, loader, 0.1, d1.path);
            auto [many, lossn] = fit(model, optim, n, loader, 0.1, dn.path);
            check_moved(start, param_values(one));
            check_close(param_values(many), param_values(one), 1e-5);
            REQUIRE(lossn.size() == 1);
            CHECK(lossn[0] == Approx(loss1[0]).epsilon(1e-5));  // metrics of the whole batch
        }
        SECTION("Adam, " + std::to_string(n) + " replicas") {
            TempDir d1("adam1"), dn("adamn");
            auto optim = ember::optim::AdamConfig{}.init<Net<AD>>();
            auto [one, loss1] = fit(model, optim, 1, loader, 1e-2, d1.path);
            auto [many, lossn] = fit(model, optim, n, loader, 1e-2, dn.path);
            check_moved(start, param_values(one));
            check_close(param_values(many), param_values(one), 1e-5);
        }
        SECTION("Adam, " + std::to_string(n) + " replicas, gradients reduced after backward") {
            TempDir d1("late1"), dn("laten");
            auto optim = ember::optim::AdamConfig{}.init<Net<AD>>();
            auto [one, loss1] = fit(model, optim, 1, loader, 1e-2, d1.path);
            auto [many, lossn] = fit(model, optim, n, loader, 1e-2, dn.path, false, false);
            check_close(param_values(many), param_values(one), 1e-5);
        }
    }
}

TEST_CASE("Data parallel, Learner: uneven shards, a short last batch, one checkpoint",
          "[collective][data-parallel][learner]") {
    const Net<AD> model = make_net();
    // Batches of 10 over 4 replicas (shards of 2, 3, 2, 3) and a last batch of 3 (one replica
    // gets nothing): weighting by shard size keeps the result that of one device.
    const Loader loader{43, 10};
    TempDir d1("uneven1"), dn("unevenn");
    auto optim = ember::optim::AdamConfig{}.init<Net<AD>>();
    auto [one, loss1] = fit(model, optim, 1, loader, 1e-2, d1.path);
    auto [many, lossn] = fit(model, optim, 4, loader, 1e-2, dn.path, true);
    check_close(param_values(many), param_values(one), 1e-5);
    CHECK(lossn[0] == Approx(loss1[0]).epsilon(1e-5));
    // One checkpoint, of replica 0, which holds the trained values.
    const auto ckpt = dn.path / "checkpoint";
    REQUIRE(fs::exists(ckpt / "model-1.mpk.gz"));
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(ckpt)) files += e.is_regular_file();
    CHECK(files == 4);  // model, optimizer, scheduler and the checkpoint's manifest
    CHECK(fs::exists(ckpt / "checkpoint-1.json"));
    auto loaded = make_net().load_file(
        ckpt / "model-1",
        ember::record::NamedMpkGzFileRecorder<ember::record::FullPrecisionSettings>{},
        ember::CpuDevice{});
    check_close(param_values(loaded), param_values(many), 0.0);
}

TEST_CASE("Data parallel, Learner: option errors", "[collective][data-parallel][learner][errors]") {
    TempDir dir("errors");
    auto optim = ember::optim::AdamConfig{}.init<Net<AD>>();
    auto group = ThreadCollective::group(3);
    std::vector<std::shared_ptr<Collective>> comms;
    for (auto& c : group) comms.emplace_back(std::move(c));
    CHECK_THROWS_WITH(Builder(dir.path)
                          .devices(std::vector<ember::CpuDevice>(2))
                          .collectives(comms)
                          .build(make_net(), optim, 0.1),
                      Catch::Matchers::Contains("3 collective endpoints for 2 devices"));
    CHECK_THROWS_AS(Builder(dir.path).collectives(comms).build(make_net(), optim, 0.1),
                    ember::ArgumentError);
    CHECK_THROWS_AS(Builder(dir.path).collectives({}), ember::ArgumentError);
}

TEST_CASE("sync_gradients: weighted sums and GradientsParams between threads",
          "[collective][data-parallel]") {
    const Net<AD> model = make_net();
    auto group = ThreadCollective::group(2);
    // Replica r's gradients are all (r + 1); with weights 0.25 and 0.75 the result is
    // 0.25·1 + 0.75·2 = 1.75 everywhere, on both replicas.
    std::vector<ember::optim::GradientsParams> synced(2);
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < 2; ++r)
        threads.emplace_back([&, r] {
            ember::optim::GradientsParams g;
            model.visit([&](std::string_view, const auto& p) {
                g.register_(p.id(), p.val().inner().ones_like().mul_scalar(double(r + 1)));
            });
            synced[r] =
                sync_gradients(*group[r], model, std::move(g), {.weight = r == 0 ? 0.25 : 0.75});
        });
    for (auto& t : threads) t.join();
    for (std::size_t r = 0; r < 2; ++r) {
        REQUIRE(synced[r].len() == 4);
        model.visit([&](std::string_view, const auto& p) {
            constexpr std::size_t D = std::remove_cvref_t<decltype(p.val())>::rank;
            auto g = synced[r].get<Cpu, D>(p.id());
            REQUIRE(g);
            CHECK(g->shape() == p.shape());
            for (float v : g->to_data().template to_vec<float>()) CHECK(v == Approx(1.75));
        });
    }
}

TEST_CASE("GradientsParams::to_device keeps every gradient under its id",
          "[collective][data-parallel]") {
    const Net<AD> model = make_net();
    auto out = model.step(make_batch(0, 4));
    const auto before = out.grads.len();
    REQUIRE(before == 4);
    auto first = model.l1.weight.id();
    const auto want = out.grads.get<Cpu, 2>(first)->to_data().to_vec<float>();
    auto moved = std::move(out.grads).to_device(model, ember::CpuDevice{});
    CHECK(moved.len() == before);
    CHECK(moved.get<Cpu, 2>(first)->to_data().to_vec<float>() == want);
}

TEST_CASE("Data parallel, Learner: a failing replica stops every replica and fit rethrows",
          "[collective][data-parallel][learner][errors]") {
    // Batch 2 throws on replicas 1..3 while replica 0 goes on to the all-reduce: the failure
    // aborts the group (replica 0 does not wait forever) and fit reports the first error.
    TempDir dir("poison");
    auto optim = ember::optim::SgdConfig{}.init<Net<AD>>();
    const Loader loader{40, 8, 2};
    CHECK_THROWS_WITH(fit(make_net(), optim, 4, loader, 0.1, dir.path),
                      Catch::Matchers::Contains("poisoned shard"));
}

TEST_CASE("GradientHook: each leaf's gradient arrives as soon as it is final",
          "[autodiff][collective][data-parallel]") {
    // y = sum((x·w1) · w2) elementwise: backward finishes w2 (one consumer, run first) before
    // it even starts on x·w1, whose step then finishes x and w1.
    auto x = Tensor<AD, 1>::from_data(TensorData(std::vector<float>{1, 2, 3}, {3})).require_grad();
    auto w1 = Tensor<AD, 1>::from_data(TensorData(std::vector<float>{4, 5, 6}, {3})).require_grad();
    auto w2 = Tensor<AD, 1>::from_data(TensorData(std::vector<float>{7, 8, 9}, {3})).require_grad();
    struct Log final : ember::GradientHook {
        std::vector<std::pair<ember::NodeId, std::vector<float>>> seen;
        void on_gradient(ember::NodeId id, const std::any& g) override {
            auto t =
                Tensor<Cpu, 1>::from_primitive(std::any_cast<const Cpu::FloatTensorPrimitive&>(g));
            seen.emplace_back(id, t.to_data().template to_vec<float>());
        }
    } log;
    const auto id = [](const Tensor<AD, 1>& t) { return t.primitive().node->id; };
    ember::Gradients grads;
    {
        ember::ScopedGradientHook scope(log);
        grads = ((x * w1) * w2).sum().backward();
    }
    REQUIRE(log.seen.size() == 3);
    CHECK(log.seen[0].first == id(w2));
    CHECK(log.seen[0].second == std::vector<float>{4, 10, 18});  // x·w1
    std::map<ember::NodeId, std::vector<float>> rest(log.seen.begin() + 1, log.seen.end());
    CHECK(rest.at(id(x)) == std::vector<float>{28, 40, 54});  // w1·w2
    CHECK(rest.at(id(w1)) == std::vector<float>{7, 16, 27});  // x·w2
    // backward() still returns every gradient, and the hook is gone with its scope.
    CHECK(grads.size() == 3);
    CHECK(w2.grad(grads)->to_data().template to_vec<float>() == std::vector<float>{4, 10, 18});
    (x * w2).sum().backward();
    CHECK(log.seen.size() == 3);
}

TEST_CASE("ThreadCollective all_reduce_async: started in order, beside the caller",
          "[collective]") {
    auto group = ThreadCollective::group(3);
    SECTION("two started ops, then an ordinary one waits for them") {
        std::vector<std::vector<float>> a(3), b(3), gathered(3);
        std::vector<std::thread> threads;
        for (std::size_t r = 0; r < 3; ++r)
            threads.emplace_back([&, r] {
                const float v = float(r + 1);
                auto pa = all_reduce_async(
                    *group[r],
                    Tensor<Cpu, 1>::from_data(TensorData(std::vector<float>{v, 10 * v}, {2})),
                    ReduceOp::Sum);
                auto pb = all_reduce_async(
                    *group[r], Tensor<Cpu, 1>::from_data(TensorData(std::vector<float>{v}, {1})),
                    ReduceOp::Mean);
                gathered[r] =
                    all_gather(*group[r],
                               Tensor<Cpu, 1>::from_data(TensorData(std::vector<float>{v}, {1})))
                        .to_data()
                        .to_vec<float>();
                b[r] = std::move(pb).wait().to_data().to_vec<float>();
                a[r] = std::move(pa).wait().to_data().to_vec<float>();
            });
        for (auto& t : threads) t.join();
        for (std::size_t r = 0; r < 3; ++r) {
            CHECK(a[r] == std::vector<float>{6, 60});
            CHECK(b[r] == std::vector<float>{2});
            CHECK(gathered[r] == std::vector<float>{1, 2, 3});
        }
    }
    SECTION("a mismatch surfaces at wait() on every rank") {
        std::vector<std::string> errors(3);
        std::vector<std::thread> threads;
        for (std::size_t r = 0; r < 3; ++r)
            threads.emplace_back([&, r] {
                auto p = all_reduce_async(*group[r], Tensor<Cpu, 1>::zeros({r == 2 ? 4u : 2u}));
                try {
                    std::move(p).wait();
                } catch (const ember::ShapeError& e) {
                    errors[r] = e.what();
                }
            });
        for (auto& t : threads) t.join();
        for (const auto& e : errors) CHECK_THAT(e, Catch::Matchers::Contains("rank 2 passed"));
    }
}

TEST_CASE("GradientReducer: buckets, a second backward, misuse",
          "[collective][data-parallel][errors]") {
    auto group = ThreadCollective::group(1);
    const Net<AD> model = make_net();
    const auto batch = make_batch(0, 4);
    SECTION("bucket sizes") {
        // [l2.bias, l2.weight] (8 + 128 bytes) and [l1.bias, l1.weight] (64 + 256 bytes).
        CHECK(GradientReducer(*group[0], model, {.bucket_bytes = 320, .first_bucket_bytes = 512})
                  .num_buckets() == 2);
        CHECK(GradientReducer(*group[0], model, {.bucket_bytes = 1}).num_buckets() == 4);
        CHECK(GradientReducer(*group[0], model).num_buckets() == 1);
    }
    SECTION("one world: the gradients come back unchanged") {
        GradientReducer reducer(*group[0], model, {.bucket_bytes = 1});
        ember::optim::GradientsParams grads;
        {
            auto scope = reducer.attach();
            grads = model.step(batch).grads;
        }
        CHECK(reducer.overlapped() == 0);  // counted by finish
        auto expected = model.step(batch).grads;
        auto got = reducer.finish(std::move(grads));
        CHECK(reducer.overlapped() == 4);
        model.visit([&](std::string_view, const auto& p) {
            constexpr std::size_t D = std::remove_cvref_t<decltype(p.val())>::rank;
            CHECK(got.get<Cpu, D>(p.id())->to_data().template to_vec<float>() ==
                  expected.get<Cpu, D>(p.id())->to_data().template to_vec<float>());
        });
    }
    SECTION("two backward passes in one step") {
        GradientReducer reducer(*group[0], model);
        auto scope = reducer.attach();
        (void)model.step(batch);
        CHECK_THROWS_WITH(model.step(batch),
                          Catch::Matchers::Contains("got a second gradient in one step"));
    }
    SECTION("finish twice, bad options") {
        GradientReducer reducer(*group[0], model);
        (void)reducer.finish({});
        CHECK_THROWS_WITH(reducer.finish({}), Catch::Matchers::Contains("already called"));
        CHECK_THROWS_AS(GradientReducer(*group[0], model, {.bucket_bytes = 0}),
                        ember::ArgumentError);
        CHECK_THROWS_AS(GradientReducer(*group[0], model, {.weight = NAN}), ember::ArgumentError);
    }
}

}  // namespace test_data_parallel
