#pragma once
// The GPT example's text: Debian-packaged English as one byte stream (tokens are the byte
// values 0..255) — the fortunes corpus (package fortunes, through ember::data::FortunesDataset),
// the licence texts every Debian system has (/usr/share/common-licenses, package base-files)
// and any files given with --text — split into training and validation streams, and batches of
// windows drawn from them.
#include <ember/data/text.hpp>
#include <ember/ember.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace gpt {

/// The two token streams.
struct Corpus {
    std::vector<std::uint8_t> train;   ///< training bytes
    std::vector<std::uint8_t> valid;   ///< held-out bytes
    std::vector<std::string> sources;  ///< what was read, for the log
};

namespace detail {
inline std::string read_file(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    EMBER_CHECK(in.good(), Argument, "gpt: cannot read text file '", file.string(), "'");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace detail

/// Every 20th block of 8 KiB is held out for validation, so both streams mix all sources.
inline constexpr std::size_t kBlock = 8192;
/// One block in this many is held out.
inline constexpr std::size_t kHoldOut = 20;

/// Reads the fortunes, the common licences and `extra` files (FormatError from FortunesDataset
/// when the fortunes package is missing) and splits them.
inline Corpus load_corpus(const std::vector<std::filesystem::path>& extra) {
    Corpus c;
    std::string text = ember::data::FortunesDataset().corpus();
    c.sources.push_back("fortunes (" + std::to_string(text.size()) + " bytes)");
    const std::filesystem::path licenses = "/usr/share/common-licenses";
    if (std::filesystem::is_directory(licenses)) {
        std::vector<std::filesystem::path> files;
        for (const auto& e : std::filesystem::directory_iterator(licenses))
            if (e.is_regular_file()) files.push_back(e.path());
        std::sort(files.begin(), files.end());  // a fixed order, so a seed fixes the run
        std::size_t bytes = 0;
        for (const auto& f : files) {
            auto t = detail::read_file(f);
            bytes += t.size();
            text += "\n" + t;
        }
        c.sources.push_back(licenses.string() + " (" + std::to_string(files.size()) + " files, " +
                            std::to_string(bytes) + " bytes)");
    }
    for (const auto& f : extra) {
        auto t = detail::read_file(f);
        c.sources.push_back(f.string() + " (" + std::to_string(t.size()) + " bytes)");
        text += "\n" + t;
    }
    for (std::size_t start = 0, k = 0; start < text.size(); start += kBlock, ++k) {
        auto& out = (k % kHoldOut == kHoldOut - 1) ? c.valid : c.train;
        const std::size_t end = std::min(text.size(), start + kBlock);
        out.insert(out.end(), text.begin() + std::ptrdiff_t(start),
                   text.begin() + std::ptrdiff_t(end));
    }
    return c;
}

/// A batch: input tokens [N, S] and each one's successor, flattened to [N · S].
template <ember::Backend B>
struct TokenBatch {
    ember::Tensor<B, 2, ember::Int> inputs;   ///< bytes i..i+S-1 of each window
    ember::Tensor<B, 1, ember::Int> targets;  ///< bytes i+1..i+S, row after row
};

/// splitmix64 (Steele et al. 2014): a fixed, portable formula, so that benchmarks/gpt_torch.py
/// computes the same bytes.
inline std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/// The benchmark's batch (`train --bench`), the same as benchmarks/gpt_torch.py's bench_tokens:
/// `n` rows of `seq + 1` bytes, byte i of them all splitmix64(seed · 2³² + i) mod 256; inputs
/// are each row's first `seq` bytes, targets the byte after each. No text needed, so it runs on
/// a machine without the fortunes package. Of the n rows, rows first .. first + count - 1 (all by
/// default): a replica's share of the batch.
template <ember::Backend B>
TokenBatch<B> bench_batch(std::size_t n, std::size_t seq, std::uint64_t seed,
                          const ember::Device<B>& device, std::size_t first = 0,
                          std::size_t count = std::size_t(-1)) {
    count = std::min(count, n - std::min(first, n));
    std::vector<std::int64_t> inputs, targets;
    inputs.reserve(count * seq);
    targets.reserve(count * seq);
    const std::uint64_t base = seed << 32;
    for (std::size_t r = first; r < first + count; ++r) {
        auto byte = [&](std::size_t t) {
            return std::int64_t(splitmix64(base + r * (seq + 1) + t) & 255);
        };
        for (std::size_t t = 0; t < seq; ++t) {
            inputs.push_back(byte(t));
            targets.push_back(byte(t + 1));
        }
    }
    return {ember::Tensor<B, 2, ember::Int>::from_data(
                ember::TensorData(std::move(inputs), {count, seq}), device),
            ember::Tensor<B, 1, ember::Int>::from_data(
                ember::TensorData(std::move(targets), {count * seq}), device)};
}

/// `n` windows of `seq + 1` bytes of `stream` starting at offsets drawn from `rng`; of them,
/// windows first .. first + count - 1 (all by default). Every offset is drawn whatever the
/// share, so the replicas of data-parallel training, each taking its own share of one draw,
/// together see the batch one device would.
template <ember::Backend B>
TokenBatch<B> sample_batch(const std::vector<std::uint8_t>& stream, std::size_t n, std::size_t seq,
                           std::mt19937_64& rng, const ember::Device<B>& device,
                           std::size_t first = 0, std::size_t count = std::size_t(-1)) {
    EMBER_CHECK(stream.size() > seq + 1, Argument, "gpt: the text (", stream.size(),
                " bytes) is shorter than one window of ", seq + 1);
    count = std::min(count, n - std::min(first, n));
    std::vector<std::int64_t> inputs, targets;
    inputs.reserve(count * seq);
    targets.reserve(count * seq);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t start = std::size_t(rng() % (stream.size() - seq - 1));
        if (i < first || i >= first + count) continue;
        for (std::size_t t = 0; t < seq; ++t) {
            inputs.push_back(stream[start + t]);
            targets.push_back(stream[start + t + 1]);
        }
    }
    return {ember::Tensor<B, 2, ember::Int>::from_data(
                ember::TensorData(std::move(inputs), {count, seq}), device),
            ember::Tensor<B, 1, ember::Int>::from_data(
                ember::TensorData(std::move(targets), {count * seq}), device)};
}

}  // namespace gpt
