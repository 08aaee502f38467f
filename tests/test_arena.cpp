// The CPU backend's buffer sources: an Arena over a fixed region (what firmware installs),
// tensors made while it is installed, running out of it, and going back to the default
// allocator. Expected values are byte counts that follow from the arena's layout (64-byte
// headers and 64-byte rounding) and plain arithmetic.
#include <ember/backend/arena.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "harness.hpp"

namespace test_arena {

namespace {

using B = ember::Cpu;

// Installs a source for a scope and puts the default allocator back after it.
struct SourceScope {
    explicit SourceScope(const ember::cpu::BufferSource& s) { ember::cpu::set_buffer_source(&s); }
    ~SourceScope() { ember::cpu::set_buffer_source(nullptr); }
};

}  // namespace

TEST_CASE("Arena: a first-fit allocator over a fixed region", "[arena]") {
    alignas(64) static std::array<std::byte, 4096> region;
    ember::cpu::Arena arena(region);
    REQUIRE(arena.capacity() == 4096);
    SECTION("blocks are 64-byte aligned and counted with their headers") {
        void* a = arena.allocate(100);
        void* b = arena.allocate(1);
        REQUIRE(a != nullptr);
        REQUIRE(b != nullptr);
        CHECK(reinterpret_cast<std::uintptr_t>(a) % 64 == 0);
        CHECK(reinterpret_cast<std::uintptr_t>(b) % 64 == 0);
        CHECK(arena.bytes_in_use() == (64 + 128) + (64 + 64));
        arena.deallocate(a);
        arena.deallocate(b);
        CHECK(arena.bytes_in_use() == 0);
        CHECK(arena.peak_bytes_in_use() == 320);
    }
    SECTION("freed neighbours merge, so the whole region is usable again") {
        void* a = arena.allocate(1000);
        void* b = arena.allocate(1000);
        void* c = arena.allocate(1000);
        REQUIRE(c != nullptr);
        arena.deallocate(b);
        arena.deallocate(a);
        arena.deallocate(c);
        CHECK(arena.largest_free_block() == 4096 - 64);
        CHECK(arena.allocate(4096 - 64) != nullptr);
    }
    SECTION("a request larger than any free block gets nullptr") {
        CHECK(arena.allocate(4096) == nullptr);
        CHECK(arena.allocate(16, 128) == nullptr);  // alignment beyond 64
    }
    SECTION("a region too small for one block refuses everything") {
        std::array<std::byte, 100> tiny{};
        ember::cpu::Arena small(tiny);
        CHECK(small.allocate(1) == nullptr);
    }
}

TEST_CASE("tensors in an installed arena", "[arena]") {
    alignas(64) static std::array<std::byte, 64 * 1024> region;
    ember::cpu::Arena arena(region);
    const auto before = ember::Tensor<B, 1>::from_floats({1.f, 2.f, 3.f});
    SECTION("ops take their buffers from the arena and give them back") {
        {
            SourceScope scope(arena.source());
            auto x = ember::Tensor<B, 2>::ones({16, 16});  // 1 KiB
            CHECK(arena.bytes_in_use() == 64 + 1024);
            auto y = (x * 2.0f).sum();
            CHECK(y.into_scalar() == 512.0f);
            // A tensor from before the switch still works and is freed where it came from.
            CHECK((before + 1.0f).to_data() == ember::TensorData({2.f, 3.f, 4.f}, {3}));
        }
        CHECK(arena.bytes_in_use() == 0);
        CHECK(arena.peak_bytes_in_use() >= 64 + 1024);
    }
    SECTION("running out names the size asked for") {
        SourceScope scope(arena.source());
        using T1 = ember::Tensor<B, 1>;
        CHECK_THROWS_AS(T1::zeros({100000}), ember::Error);
        CHECK_THROWS_WITH(T1::zeros({100000}), Catch::Contains("no block of 400000 bytes"));
    }
    CHECK(arena.bytes_in_use() == 0);
}

TEST_CASE("CPU allocator: large buffers on 2 MiB boundaries, reused", "[arena]") {
    // 48 MiB: above the threshold (32 MiB) where buffers are asked for transparent huge pages,
    // which needs them 2 MiB-aligned; values written and read back through every page.
    const std::size_t n = std::size_t{12} << 20;
    const auto before = ember::cpu::memory_stats().bytes_in_use;
    const void* first = nullptr;
    {
        auto t = ember::Tensor<B, 1>::full({n}, 1.5f);
        const std::byte* p = t.primitive().bytes();
        first = p;
        const char* off = std::getenv("EMBER_CPU_HUGE_PAGES");  // "0": plain 64-byte alignment
        const std::size_t align = off && std::string_view(off) == "0" ? 64 : std::size_t{2} << 20;
        CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
        CHECK(ember::cpu::memory_stats().bytes_in_use - before >= n * sizeof(float));
        auto s = (std::move(t) * 2.0f).sum().into_scalar();  // in place: one buffer
        CHECK(s == Approx(3.0 * double(n)).epsilon(1e-6));
    }
    CHECK(ember::cpu::memory_stats().bytes_in_use == before);
    // The freed buffer is cached and comes back for the next tensor of its size class.
    auto u = ember::Tensor<B, 1>::zeros({n});
    CHECK(static_cast<const void*>(u.primitive().bytes()) == first);
    CHECK(u.sum().into_scalar() == 0.0f);
}

}  // namespace test_arena
