// The text the training code reads back (src/train): a metric log of an earlier epoch (read on
// --resume to rebuild the early-stopping history) and the /proc/stat and /proc/meminfo texts of
// the CPU metrics. The first byte picks which; the rest is the text.
#include <ember/train/logger.hpp>
#include <ember/train/metrics.hpp>

#include "fuzz.hpp"

EMBER_FUZZ_TARGET(train_text) {
    using namespace ember;
    fuzz::Reader in(input);
    const std::uint8_t mode = in.byte();
    const std::string text(fuzz::as_text(in.rest()));
    switch (mode % 3) {
        case 0: {
            const auto dir = fuzz::scratch_dir() / "train_text";
            const train::FileMetricLogger logger(dir);
            std::filesystem::create_directories(logger.file("Loss", 1).parent_path());
            fuzz::write_file(logger.file("Loss", 1), in.rest());
            fuzz::refused_or_fine([&] { (void)logger.read_numeric("Loss", 1); });
            break;
        }
        case 1:
            // (The sums wrap for counters near 2^64, which the kernel never writes: no check.)
            fuzz::refused_or_fine([&] { (void)train::detail::parse_proc_stat(text, "fuzz"); });
            break;
        default:
            fuzz::refused_or_fine([&] { (void)train::detail::parse_meminfo(text, "fuzz"); });
            break;
    }
}
