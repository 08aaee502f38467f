#pragma once
// Text metrics over decoded strings: the character and word error rates (edit distance over the
// reference length), BLEU (clipped n-gram precisions and a brevity penalty) and ROUGE-L (the
// F-measure of the longest common subsequence). They follow torchmetrics' CharErrorRate,
// WordErrorRate, BLEUScore and ROUGEScore("rougeL"). Decoding tokens into text is the step
// output's business: an Adaptor<Item, TextInput> hands the metric one string per item.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../tensor/error.hpp"
#include "metric.hpp"

namespace ember::train {

/// Input of the text metrics: one predicted and one reference text per item.
struct TextInput {
    std::vector<std::string> predictions;  ///< the model's texts
    std::vector<std::string> references;   ///< the true texts, one per prediction
};

namespace detail {

/// Words of `text`: runs of characters between ASCII whitespace (Python's str.split()).
inline std::vector<std::string> split_words(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream is(text);
    for (std::string w; is >> w;) out.push_back(std::move(w));
    return out;
}

/// The Levenshtein distance between two sequences (insertions, deletions and substitutions,
/// each costing 1), in O(|a|·|b|) time and O(|b|) memory.
template <typename Seq>
std::size_t edit_distance(const Seq& a, const Seq& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({up + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

/// The length of the longest common subsequence of two sequences.
template <typename Seq>
std::size_t lcs_length(const Seq& a, const Seq& b) {
    std::vector<std::size_t> row(b.size() + 1, 0);
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = 0;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = a[i - 1] == b[j - 1] ? diag + 1 : std::max(up, row[j - 1]);
            diag = up;
        }
    }
    return row[b.size()];
}

/// ShapeError naming `metric` unless there are as many references as predictions, at least one.
inline void check_text_input(const TextInput& in, const char* metric) {
    EMBER_CHECK(in.predictions.size() == in.references.size(), Shape, metric, ": ",
                in.predictions.size(), " predictions and ", in.references.size(), " references");
    EMBER_CHECK(!in.predictions.empty(), Shape, metric, ": an empty batch");
}

/// Σ edit distances / Σ reference lengths over the batch, the sequences made by `split`.
/// ArgumentError when every reference is empty (the rate is undefined).
template <typename Split>
double error_rate(const TextInput& in, const char* metric, Split split) {
    check_text_input(in, metric);
    double errors = 0, total = 0;
    for (std::size_t i = 0; i < in.predictions.size(); ++i) {
        const auto p = split(in.predictions[i]), r = split(in.references[i]);
        errors += double(edit_distance(p, r));
        total += double(r.size());
    }
    EMBER_CHECK(total > 0, Argument, metric, ": every reference of the batch is empty");
    return errors / total;
}

}  // namespace detail

/// The character error rate in percent: the edit distance between each prediction and its
/// reference, character by character (bytes; spaces count), summed over the batch and divided
/// by the references' total length (torchmetrics' CharErrorRate; Burn's CharErrorRate on
/// decoded text). It exceeds 100 % when predictions are longer than their references.
class CerMetric {
  public:
    /// The input.
    using Input = TextInput;
    /// Updates with one batch; ShapeError when the counts differ or the batch is empty,
    /// ArgumentError when every reference is empty.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const double v =
            detail::error_rate(in, "CerMetric", [](const std::string& s) { return s; });
        return state_.update(name(), 100.0 * v, in.predictions.size(), 2, " %");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "CER".
    std::string name() const { return "CER"; }
    /// The last batch's rate in percent.
    double value() const { return state_.value(); }

  private:
    NumericMetricState state_;
};

/// The word error rate in percent: as CerMetric over the whitespace-separated words
/// (torchmetrics' WordErrorRate).
class WerMetric {
  public:
    /// The input.
    using Input = TextInput;
    /// Updates with one batch; ShapeError when the counts differ or the batch is empty,
    /// ArgumentError when every reference has no word.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const double v = detail::error_rate(in, "WerMetric", detail::split_words);
        return state_.update(name(), 100.0 * v, in.predictions.size(), 2, " %");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "WER".
    std::string name() const { return "WER"; }
    /// The last batch's rate in percent.
    double value() const { return state_.value(); }

  private:
    NumericMetricState state_;
};

/// Corpus BLEU of each batch in percent, as torchmetrics' BLEUScore (n_gram = 4, smooth =
/// False, uniform weights, whitespace tokens): exp(Σₙ ¼·log pₙ)·BP, where pₙ is the batch's
/// n-gram matches (each clipped to its count in the reference) over its predicted n-grams and
/// the brevity penalty BP = 1 when the predictions' words outnumber the references', else
/// exp(1 − r/c). Without smoothing, one n with no match makes the score 0. This is not
/// sacrebleu's default, which tokenizes with its "13a" rules and smooths with "exp".
class BleuMetric {
  public:
    /// The input.
    using Input = TextInput;
    /// BLEU up to `max_ngram` (4 by default); ArgumentError for 0.
    explicit BleuMetric(std::size_t max_ngram = 4) : n_(max_ngram) {
        EMBER_CHECK(max_ngram >= 1, Argument, "BleuMetric: max_ngram must be at least 1, got 0");
    }
    /// Updates with one batch; ShapeError when the counts differ or the batch is empty.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        detail::check_text_input(in, "BleuMetric");
        std::vector<double> matches(n_), possible(n_);
        double pred_len = 0, ref_len = 0;
        for (std::size_t i = 0; i < in.predictions.size(); ++i) {
            const auto p = detail::split_words(in.predictions[i]);
            const auto r = detail::split_words(in.references[i]);
            pred_len += double(p.size());
            ref_len += double(r.size());
            for (std::size_t n = 1; n <= n_; ++n) {
                const auto pc = ngrams(p, n), rc = ngrams(r, n);
                for (const auto& [g, k] : pc) {
                    possible[n - 1] += double(k);
                    const auto it = rc.find(g);
                    if (it != rc.end()) matches[n - 1] += double(std::min(k, it->second));
                }
            }
        }
        double bleu = 0;
        if (pred_len > 0 && *std::min_element(matches.begin(), matches.end()) > 0) {
            double log_p = 0;
            for (std::size_t n = 0; n < n_; ++n)
                log_p += std::log(matches[n] / possible[n]) / double(n_);
            const double bp = pred_len > ref_len ? 1.0 : std::exp(1.0 - ref_len / pred_len);
            bleu = bp * std::exp(log_p);
        }
        return state_.update(name(), 100.0 * bleu, in.predictions.size(), 2, " %");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "BLEU" (BLEU-n for another max_ngram than 4).
    std::string name() const { return n_ == 4 ? "BLEU" : "BLEU-" + std::to_string(n_); }
    /// The last batch's score in percent.
    double value() const { return state_.value(); }

  private:
    static std::map<std::vector<std::string>, std::size_t> ngrams(
        const std::vector<std::string>& words, std::size_t n) {
        std::map<std::vector<std::string>, std::size_t> out;
        for (std::size_t i = 0; i + n <= words.size(); ++i)
            ++out[std::vector<std::string>(words.begin() + std::ptrdiff_t(i),
                                           words.begin() + std::ptrdiff_t(i + n))];
        return out;
    }
    std::size_t n_;
    NumericMetricState state_;
};

/// ROUGE-L in percent: per item, the F-measure 2·P·R / (P + R) of the longest common
/// subsequence of tokens (P = LCS / predicted tokens, R = LCS / reference tokens, 0 when
/// either is empty), averaged over the batch. Tokens as torchmetrics' ROUGEScore without
/// stemming: the text lower-cased, every run of characters other than a–z and 0–9 a separator.
class RougeLMetric {
  public:
    /// The input.
    using Input = TextInput;
    /// Updates with one batch; ShapeError when the counts differ or the batch is empty.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        detail::check_text_input(in, "RougeLMetric");
        double total = 0;
        for (std::size_t i = 0; i < in.predictions.size(); ++i) {
            const auto p = tokens(in.predictions[i]), r = tokens(in.references[i]);
            const double lcs = double(detail::lcs_length(p, r));
            if (lcs == 0) continue;
            const double precision = lcs / double(p.size()), recall = lcs / double(r.size());
            total += 2 * precision * recall / (precision + recall);
        }
        const double v = total / double(in.predictions.size());
        return state_.update(name(), 100.0 * v, in.predictions.size(), 2, " %");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "ROUGE-L".
    std::string name() const { return "ROUGE-L"; }
    /// The last batch's mean F-measure in percent.
    double value() const { return state_.value(); }

  private:
    static std::vector<std::string> tokens(const std::string& text) {
        std::string s = text;
        for (char& ch : s) {
            const auto u = static_cast<unsigned char>(ch);
            ch = ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z')) ? char(u)
                 : (u >= 'A' && u <= 'Z')                           ? char(u - 'A' + 'a')
                                                                    : ' ';
        }
        return detail::split_words(s);
    }
    NumericMetricState state_;
};

}  // namespace ember::train
