// Fortune files (src/data/fortunes.cpp): entries split at lines holding only '%', CR-LF line
// ends, empty entries and files; then the split, the corpus and CharTokenizer over it. The input
// is a little-endian u16 n, then n bytes of one category file and the rest of another.
#include <ember/data/text.hpp>

#include "fuzz.hpp"

EMBER_FUZZ_TARGET(fortunes) {
    using namespace ember;
    fuzz::Reader in(input);
    const std::uint16_t n = in.u16();
    const auto dir = fuzz::scratch_dir() / "fortunes";
    std::filesystem::create_directories(dir);
    fuzz::write_file(dir / "alpha", in.take(n));
    fuzz::write_file(dir / "beta", in.rest());
    fuzz::refused_or_fine([&] {
        const data::FortunesDataset ds(dir);
        for (std::size_t i = 0; i < ds.len(); ++i)
            if (ds.get(i)->label >= ds.num_categories())
                throw std::logic_error("fuzz: a fortune's label is not a category");
        const auto [train, test] = ds.split(0.5, n);
        if (train.len() + test.len() != ds.len())
            throw std::logic_error("fuzz: the split lost or added fortunes");
        const std::string corpus = ds.corpus();
        const data::CharTokenizer tokenizer(corpus);
        if (tokenizer.decode(tokenizer.encode(corpus)) != corpus)
            throw std::logic_error("fuzz: CharTokenizer does not round-trip the corpus");
    });
}
