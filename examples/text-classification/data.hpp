#pragma once
// Batches of fortunes for the classifier: each text becomes character tokens (CharTokenizer),
// truncated to the model's context and padded to the longest text of the batch with a pad token
// one past the vocabulary, with a mask marking the padding so attention and pooling skip it.
#include <ember/data.hpp>
#include <ember/data/text.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>

#include <memory>
#include <string_view>

namespace text_classification {

/// A batch: token ids [N, S], the padding mask [N, S] (true = padding) and the labels [N].
template <ember::Backend B>
struct TextBatch {
    ember::Tensor<B, 2, ember::Int> tokens;     ///< character ids, padded
    ember::Tensor<B, 2, ember::Bool> mask_pad;  ///< true where `tokens` is padding
    ember::Tensor<B, 1, ember::Int> targets;    ///< category ids
};

/// The tokens of the bytes of `text` that the vocabulary knows; unknown bytes are dropped, so
/// that any text can be classified (CharTokenizer::encode would throw on them).
inline std::vector<std::size_t> encode_known(const ember::data::CharTokenizer& tokenizer,
                                             std::string_view text) {
    std::string known;
    known.reserve(text.size());
    for (char c : text)
        if (tokenizer.vocab().find(c) != std::string::npos) known.push_back(c);
    return tokenizer.encode(known);
}

/// Builds TextBatch<B> from fortunes. The tokenizer is shared and only read, so the loader's
/// workers may use one batcher at the same time.
template <ember::Backend B>
struct TextBatcher {
    std::shared_ptr<const ember::data::CharTokenizer> tokenizer;
    std::size_t max_seq_length;  ///< longer texts are truncated

    /// The pad token: one past the vocabulary.
    std::size_t pad_token() const { return tokenizer->vocab_size(); }

    /// Texts and labels as one batch (labels may be left 0 for inference).
    TextBatch<B> batch(std::vector<ember::data::FortuneItem> items,
                       const ember::Device<B>& device) const {
        std::vector<std::vector<std::size_t>> tokens;
        std::vector<std::int64_t> labels;
        tokens.reserve(items.size());
        labels.reserve(items.size());
        for (const auto& item : items) {
            tokens.push_back(encode_known(*tokenizer, item.text));
            // An empty text would leave a row of padding only: give it one pad token, which
            // the pooling's clamp then turns into a zero vector rather than a division by 0.
            if (tokens.back().empty()) tokens.back().push_back(pad_token());
            labels.push_back(std::int64_t(item.label));
        }
        auto padded =
            ember::nn::generate_padding_mask<B>(pad_token(), tokens, max_seq_length, device);
        const std::size_t n = items.size();
        return {std::move(padded.tensor), std::move(padded.mask),
                ember::Tensor<B, 1, ember::Int>::from_data(
                    ember::TensorData(std::move(labels), {n}), device)};
    }
};

}  // namespace text_classification
