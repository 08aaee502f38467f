// The collective layer on the CPU: every op of ThreadCollective against closed-form sums with 2,
// 3 and 4 ranks (thread per rank) and sizes that do not split evenly between the ranks, the
// errors every rank must agree on, and the rendezvous (environment, file, TCP on localhost).
#include <unistd.h>
#include <cstdlib>
#include <ember/collective/ops.hpp>
#include <ember/collective/rendezvous.hpp>
#include <ember/collective/thread.hpp>
#include <ember/ember.hpp>
#include <filesystem>
#include <functional>
#include <thread>
#include "harness.hpp"

namespace test_collective {

namespace {

using namespace ember::collective;
using ember::Cpu;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
using AD = ember::Autodiff<Cpu>;
using Catch::Matchers::Contains;

// Runs fn(rank, endpoint) on one thread per rank; returns each rank's error message ("" if none).
std::vector<std::string> on_ranks(std::size_t world,
                                  const std::function<void(std::size_t, Collective&)>& fn,
                                  std::optional<std::chrono::milliseconds> timeout = {}) {
    auto group = ThreadCollective::group(world, timeout);
    std::vector<std::string> errors(world);
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < world; ++r)
        threads.emplace_back([&, r] {
            try {
                fn(r, *group[r]);
            } catch (const ember::Error& e) {
                errors[r] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    return errors;
}

// Rank r's value of element i: distinct per rank and element, exact in f32.
double value(std::size_t r, std::size_t i) {
    return double(r) * 1000.0 + double(i % 997) - 3.0;
}

std::vector<float> rank_values(std::size_t r, std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = float(value(r, i));
    return v;
}

}  // namespace

TEST_CASE("ThreadCollective all_reduce: sum and mean over 2, 3 and 4 ranks", "[collective]") {
    for (std::size_t world : {2u, 3u, 4u}) {
        for (std::size_t n : {1u, 7u, 1001u}) {  // 7 and 1001 split unevenly between ranks
            for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean}) {
                std::vector<std::vector<float>> got(world);
                auto errors = on_ranks(world, [&](std::size_t r, Collective& c) {
                    auto t = Tensor<Cpu, 1>::from_data(TensorData(rank_values(r, n), {n}));
                    got[r] = all_reduce(c, t, op).to_data().to_vec<float>();
                });
                for (std::size_t r = 0; r < world; ++r) {
                    INFO("world " << world << " n " << n << " " << to_string(op) << " rank " << r);
                    REQUIRE(errors[r].empty());
                    REQUIRE(got[r].size() == n);
                    for (std::size_t i = 0; i < n; ++i) {
                        double sum = 0;
                        for (std::size_t q = 0; q < world; ++q) sum += value(q, i);
                        const double want = op == ReduceOp::Sum ? sum : sum / double(world);
                        REQUIRE(got[r][i] == Approx(want).epsilon(1e-6));
                    }
                    CHECK(got[r] == got[0]);  // bit for bit: replicas must not drift apart
                }
            }
        }
    }
}

TEST_CASE("ThreadCollective all_reduce: f64, i64, a rank-3 tensor, autodiff and fusion tensors",
          "[collective]") {
    const std::size_t world = 3;
    std::vector<std::vector<double>> f64(world);
    std::vector<std::vector<std::int64_t>> i64(world);
    std::vector<bool> tracked(world, true);
    auto errors = on_ranks(world, [&](std::size_t r, Collective& c) {
        std::vector<double> d(2 * 3 * 5);
        std::vector<std::int64_t> k(5);
        for (std::size_t i = 0; i < d.size(); ++i) d[i] = 0.5 * double(r + 1) * double(i);
        for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::int64_t(r * 10 + i);
        auto x = Tensor<ember::CpuF64, 3>::from_data(TensorData(d, {2, 3, 5}));
        f64[r] = all_reduce(c, x, ReduceOp::Mean).to_data().to_vec<double>();
        auto y = Tensor<Cpu, 1, Int>::from_data(TensorData(k, {5}));
        i64[r] = all_reduce(c, y).to_data().to_vec<std::int64_t>();
        auto z = Tensor<AD, 2>::ones({2, 2}).require_grad();
        auto s = all_reduce(c, z);
        tracked[r] = s.is_require_grad();
        CHECK(s.to_data().to_vec<float>() == std::vector<float>(4, 3.f));
        // A fusion backend's pending chain is computed, then reduced as the inner backend's.
        using F = ember::Fusion<Cpu>;
        auto f = (Tensor<F, 1>::ones({3}) * float(r + 1)).add_scalar(1.0);  // r + 2
        CHECK(all_reduce(c, f).to_data().to_vec<float>() == std::vector<float>(3, 9.f));
        auto g = all_reduce_async(c, Tensor<ember::Autodiff<F>, 1>::ones({2}).mul_scalar(2.0),
                                  ReduceOp::Mean);
        CHECK(std::move(g).wait().to_data().to_vec<float>() == std::vector<float>(2, 2.f));
    });
    for (std::size_t r = 0; r < world; ++r) {
        REQUIRE(errors[r].empty());
        for (std::size_t i = 0; i < 30; ++i)  // mean of 0.5·(r+1)·i over r = 0..2 is i
            CHECK(f64[r][i] == Approx(double(i)));
        for (std::size_t i = 0; i < 5; ++i) CHECK(i64[r][i] == std::int64_t(30 + 3 * i));
        CHECK_FALSE(tracked[r]);  // a collective is not part of a graph
    }
}

TEST_CASE("ThreadCollective broadcast, all_gather and reduce_scatter", "[collective]") {
    for (std::size_t world : {2u, 3u, 4u}) {
        const std::size_t rows = 3, cols = 5;  // 15 elements per rank: no even split either
        std::vector<std::vector<float>> bc(world), ag(world), rs(world);
        std::vector<ember::Shape> ag_shape(world), rs_shape(world);
        auto errors = on_ranks(world, [&](std::size_t r, Collective& c) {
            auto mine =
                Tensor<Cpu, 2>::from_data(TensorData(rank_values(r, rows * cols), {rows, cols}));
            bc[r] = broadcast(c, mine, world - 1).to_data().to_vec<float>();
            auto g = all_gather(c, mine);
            ag_shape[r] = g.shape();
            ag[r] = g.to_data().to_vec<float>();
            // [world·2, 3]: rank r gets rows 2r, 2r+1 summed over ranks.
            auto big =
                Tensor<Cpu, 2>::from_data(TensorData(rank_values(r, world * 6), {world * 2, 3}));
            auto s = reduce_scatter(c, big, ReduceOp::Sum);
            rs_shape[r] = s.shape();
            rs[r] = s.to_data().to_vec<float>();
        });
        for (std::size_t r = 0; r < world; ++r) {
            INFO("world " << world << " rank " << r);
            REQUIRE(errors[r].empty());
            CHECK(bc[r] == rank_values(world - 1, rows * cols));
            CHECK(ag_shape[r] == ember::Shape{world * rows, cols});
            for (std::size_t q = 0; q < world; ++q)
                for (std::size_t i = 0; i < rows * cols; ++i)
                    REQUIRE(ag[r][q * rows * cols + i] == float(value(q, i)));
            CHECK(rs_shape[r] == ember::Shape{2, 3});
            for (std::size_t i = 0; i < 6; ++i) {
                double sum = 0;
                for (std::size_t q = 0; q < world; ++q) sum += value(q, r * 6 + i);
                REQUIRE(rs[r][i] == Approx(sum));
            }
        }
    }
}

TEST_CASE("ThreadCollective: one rank is a group of its own", "[collective]") {
    auto group = ThreadCollective::group(1);
    auto x = Tensor<Cpu, 1>::from_floats({1.f, 2.f});
    CHECK(all_reduce(*group[0], x, ReduceOp::Mean).to_data().to_vec<float>() ==
          std::vector<float>{1.f, 2.f});
    CHECK(all_gather(*group[0], x).dims()[0] == 2);
    group[0]->barrier();
}

TEST_CASE("ThreadCollective errors: every rank names the op and the shapes",
          "[collective][errors]") {
    SECTION("world size 0 and ranks out of range") {
        CHECK_THROWS_AS(ThreadCollective::group(0), ember::ArgumentError);
        CHECK_THROWS_WITH(ThreadCollective::group(0), Contains("world size"));
        auto g = ThreadCollective::group(2);
        CHECK_THROWS_AS(ThreadCollective::join(*g[0], 2), ember::ArgumentError);
        CHECK_THROWS_WITH(ThreadCollective::join(*g[0], 5), Contains("rank 5 is out of range"));
        CHECK(ThreadCollective::join(*g[0], 1)->rank() == 1);
    }
    SECTION("mismatched shapes") {
        auto errors = on_ranks(3, [](std::size_t r, Collective& c) {
            auto t = Tensor<Cpu, 2>::zeros({3, r == 2 ? 5u : 4u});
            CHECK_THROWS_AS(all_reduce(c, t), ember::ShapeError);
            (void)all_reduce(c, t);
        });
        for (const auto& e : errors) {
            CHECK_THAT(e, Contains("all_reduce") && Contains("[3, 5]") && Contains("[3, 4]") &&
                              Contains("rank 2"));
        }
    }
    SECTION("different ops, roots or reductions") {
        auto errors = on_ranks(2, [](std::size_t r, Collective& c) {
            auto t = Tensor<Cpu, 1>::zeros({4});
            if (r == 0)
                (void)all_reduce(c, t);
            else
                (void)broadcast(c, t, 0);
        });
        for (const auto& e : errors)
            CHECK_THAT(e, Contains("called broadcast") && Contains("all_reduce"));
        errors = on_ranks(2, [](std::size_t r, Collective& c) {
            (void)all_reduce(c, Tensor<Cpu, 1>::zeros({4}), r ? ReduceOp::Mean : ReduceOp::Sum);
        });
        for (const auto& e : errors) CHECK_THAT(e, Contains("mean") && Contains("sum"));
        errors = on_ranks(3, [](std::size_t, Collective& c) {
            (void)broadcast(c, Tensor<Cpu, 1>::zeros({4}), 3);
        });
        for (const auto& e : errors) CHECK_THAT(e, Contains("broadcast: root 3 is out of range"));
    }
    SECTION("reduce_scatter of a first dim that does not split") {
        auto errors = on_ranks(4, [](std::size_t, Collective& c) {
            CHECK_THROWS_AS(reduce_scatter(c, Tensor<Cpu, 2>::zeros({6, 2})), ember::ShapeError);
        });
        for (const auto& e : errors) CHECK(e.empty());
        errors = on_ranks(4, [](std::size_t, Collective& c) {
            (void)reduce_scatter(c, Tensor<Cpu, 2>::zeros({6, 2}));
        });
        for (const auto& e : errors)
            CHECK_THAT(e, Contains("reduce_scatter") && Contains("[6, 2]"));
    }
    SECTION("a missing rank times out, naming it; abort frees the waiting ranks") {
        auto errors = on_ranks(
            3,
            [](std::size_t r, Collective& c) {
                if (r != 1) (void)all_reduce(c, Tensor<Cpu, 1>::zeros({2}));
            },
            std::chrono::milliseconds(200));
        CHECK_THAT(errors[0], Contains("all_reduce") && Contains("rank(s) 1"));
        CHECK_THAT(errors[2], Contains("rank(s) 1"));
        errors = on_ranks(2, [](std::size_t r, Collective& c) {
            if (r == 1) {
                c.abort("out of memory in step 3");
                return;
            }
            (void)all_reduce(c, Tensor<Cpu, 1>::zeros({2}));
        });
        CHECK_THAT(errors[0], Contains("aborted") && Contains("out of memory in step 3"));
    }
}

TEST_CASE("Rendezvous: environment, hex, files and TCP", "[collective][rendezvous]") {
    SECTION("EMBER_WORLD_SIZE / EMBER_RANK / EMBER_MASTER_ADDR") {
        ::setenv("EMBER_WORLD_SIZE", "4", 1);
        ::setenv("EMBER_RANK", "3", 1);
        ::setenv("EMBER_MASTER_ADDR", "10.0.0.1:29500", 1);
        auto e = ProcessGroupEnv::from_env();
        CHECK(e.world_size == 4);
        CHECK(e.rank == 3);
        CHECK(e.master_addr == "10.0.0.1:29500");
        ::setenv("EMBER_RANK", "4", 1);
        CHECK_THROWS_WITH(ProcessGroupEnv::from_env(), Contains("EMBER_RANK 4 is out of range"));
        ::setenv("EMBER_RANK", "x1", 1);
        CHECK_THROWS_WITH(ProcessGroupEnv::from_env(), Contains("EMBER_RANK") && Contains("x1"));
        ::unsetenv("EMBER_WORLD_SIZE");
        CHECK_THROWS_WITH(ProcessGroupEnv::from_env(), Contains("EMBER_WORLD_SIZE is not set"));
        ::unsetenv("EMBER_RANK");
        ::unsetenv("EMBER_MASTER_ADDR");
    }
    std::vector<std::byte> id(128);
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = std::byte((i * 37 + 11) & 0xff);
    SECTION("hex") {
        const std::string hex = to_hex(id);
        CHECK(hex.size() == 256);
        CHECK(hex.substr(0, 4) == "0b30");
        CHECK(from_hex(hex, "EMBER_NCCL_ID") == id);
        CHECK_THROWS_AS(from_hex("abc", "EMBER_NCCL_ID"), ember::FormatError);
        CHECK_THROWS_WITH(from_hex("zz", "EMBER_NCCL_ID"),
                          Contains("EMBER_NCCL_ID") && Contains("'zz'"));
    }
    SECTION("file") {
        const auto path =
            std::filesystem::temp_directory_path() / ("ember-rdv-" + std::to_string(::getpid()));
        std::filesystem::remove(path);
        std::vector<std::byte> got;
        std::thread reader([&] { got = wait_rendezvous_file(path, std::chrono::seconds(10)); });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        write_rendezvous_file(path, id);
        reader.join();
        CHECK(got == id);
        std::filesystem::remove(path);
        CHECK_THROWS_AS(wait_rendezvous_file(path, std::chrono::milliseconds(60)),
                        ember::FormatError);
    }
    SECTION("TCP on localhost: rank 0 serves three ranks") {
        TcpRendezvousServer server(0);
        REQUIRE(server.port() != 0);
        const std::string addr = "127.0.0.1:" + std::to_string(server.port());
        std::vector<std::vector<std::byte>> got(4);
        std::vector<std::thread> clients;
        for (std::size_t r = 1; r < 4; ++r)
            clients.emplace_back(
                [&, r] { got[r] = tcp_rendezvous_fetch(addr, r, 4, std::chrono::seconds(20)); });
        server.serve(id, 4, std::chrono::seconds(20));
        for (auto& t : clients) t.join();
        for (std::size_t r = 1; r < 4; ++r) CHECK(got[r] == id);
    }
    SECTION("TCP: a rank of another world size is refused on both sides") {
        TcpRendezvousServer server(0);
        const std::string addr = "localhost:" + std::to_string(server.port());
        std::string client_error;
        std::thread client([&] {
            try {
                tcp_rendezvous_fetch(addr, 1, 3, std::chrono::seconds(20));
            } catch (const ember::ArgumentError& e) {
                client_error = e.what();
            }
        });
        CHECK_THROWS_WITH(server.serve(id, 2, std::chrono::seconds(20)),
                          Contains("expects a world of 3 ranks"));
        client.join();
        CHECK_THAT(client_error, Contains("refused rank 1 of 3"));
        CHECK_THROWS_AS(tcp_rendezvous(id, 2, 2, addr, std::chrono::seconds(1)),
                        ember::ArgumentError);
    }
}

TEST_CASE("collective: ember::Dispatch tensors on devices with and without autodiff",
          "[collective][dispatch]") {
    // Dispatch's inner backend is itself: its tensors are reduced through host memory as they
    // are (an autodiff device's too, the result an untracked tensor there), not by recursing
    // into inner().
    using ember::Dispatch;
    const std::size_t world = 3;
    const std::vector<const char*> devices{"cpu", "cpu+autodiff", "cpu+fusion+autodiff"};
    // [rank][device]: the sum's device string and values, the mean's, rank 0's broadcast.
    std::vector<std::vector<std::string>> where(world);
    std::vector<std::vector<std::vector<float>>> sums(world), means(world), bcasts(world);
    auto errors = on_ranks(world, [&](std::size_t r, Collective& c) {
        for (const char* s : devices) {
            const auto d = ember::DispatchDevice::parse(s);
            // Rank r holds r + 1 everywhere: the sum over 3 ranks is 6, the mean 2.
            auto x = Tensor<Dispatch, 2>::ones({2, 2}, d).mul_scalar(double(r + 1));
            auto sum = all_reduce(c, x);
            where[r].push_back(sum.device().to_string());
            sums[r].push_back(sum.to_data().to_vec<float>());
            means[r].push_back(
                all_reduce_async(c, x, ReduceOp::Mean).wait().to_data().to_vec<float>());
            bcasts[r].push_back(broadcast(c, x, 0).to_data().to_vec<float>());
        }
    });
    for (std::size_t r = 0; r < world; ++r) {
        INFO("rank " << r);
        CHECK(errors[r].empty());
        REQUIRE(sums[r].size() == devices.size());
        for (std::size_t k = 0; k < devices.size(); ++k) {
            INFO(devices[k]);
            CHECK(where[r][k] == devices[k]);
            CHECK(sums[r][k] == std::vector<float>(4, 6.f));
            CHECK(means[r][k] == std::vector<float>(4, 2.f));
            CHECK(bcasts[r][k] == std::vector<float>(4, 1.f));
        }
    }
}

}  // namespace test_collective
