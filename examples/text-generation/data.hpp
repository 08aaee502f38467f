#pragma once
// Training data for the character-level language model: the fortunes corpus as one sequence of
// character tokens, cut into windows of context + 1 tokens. A window's first `context` tokens are
// the input and the same tokens shifted by one are the targets, so every position learns to
// predict the character after it.
#include <ember/data.hpp>
#include <ember/data/text.hpp>
#include <ember/ember.hpp>

#include <memory>
#include <optional>
#include <string_view>

namespace text_generation {

/// Windows of `context + 1` tokens of a token sequence, starting every `stride` tokens.
class CharWindowsDataset {
  public:
    /// The windows of `tokens`; none when it is shorter than one window.
    CharWindowsDataset(std::shared_ptr<const std::vector<std::size_t>> tokens, std::size_t context,
                       std::size_t stride)
        : tokens_(std::move(tokens)), context_(context), stride_(stride) {}

    /// Window `index`, or nullopt past the end.
    std::optional<std::vector<std::size_t>> get(std::size_t index) const {
        if (index >= len()) return std::nullopt;
        const auto first = tokens_->begin() + std::ptrdiff_t(index * stride_);
        return std::vector<std::size_t>(first, first + std::ptrdiff_t(context_ + 1));
    }
    /// Number of windows.
    std::size_t len() const {
        return tokens_->size() <= context_ ? 0 : (tokens_->size() - context_ - 1) / stride_ + 1;
    }

  private:
    std::shared_ptr<const std::vector<std::size_t>> tokens_;
    std::size_t context_;
    std::size_t stride_;
};

/// A batch: input tokens [N, S] and the token after each of them, flattened to [N · S] as the
/// cross-entropy loss and the accuracy metric read targets.
template <ember::Backend B>
struct CharBatch {
    ember::Tensor<B, 2, ember::Int> inputs;   ///< tokens 0..S-1 of each window
    ember::Tensor<B, 1, ember::Int> targets;  ///< tokens 1..S of each window, row after row
};

/// Builds CharBatch<B> from windows (stateless: the loader's workers may share it).
template <ember::Backend B>
struct CharBatcher {
    /// The windows, all of one length, as one batch on `device`.
    CharBatch<B> batch(std::vector<std::vector<std::size_t>> windows,
                       const ember::Device<B>& device) const {
        const std::size_t n = windows.size(), s = windows.front().size() - 1;
        std::vector<std::int64_t> inputs, targets;
        inputs.reserve(n * s);
        targets.reserve(n * s);
        for (const auto& w : windows) {
            inputs.insert(inputs.end(), w.begin(), w.end() - 1);
            targets.insert(targets.end(), w.begin() + 1, w.end());
        }
        return {ember::Tensor<B, 2, ember::Int>::from_data(
                    ember::TensorData(std::move(inputs), {n, s}), device),
                ember::Tensor<B, 1, ember::Int>::from_data(
                    ember::TensorData(std::move(targets), {n * s}), device)};
    }
};

/// The tokens of the bytes of `text` that the vocabulary knows; unknown bytes are dropped (a
/// prompt may hold characters the corpus never had; CharTokenizer::encode would throw).
inline std::vector<std::size_t> encode_known(const ember::data::CharTokenizer& tokenizer,
                                             std::string_view text) {
    std::string known;
    for (char c : text)
        if (tokenizer.vocab().find(c) != std::string::npos) known.push_back(c);
    return tokenizer.encode(known);
}

}  // namespace text_generation
