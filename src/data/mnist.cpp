// MnistDataset: the IDX reader and the search for the files. zlib's gz* functions read gzipped
// and plain files alike, so one reader serves both.
#include <zlib.h>

#include <algorithm>
#include <cstdlib>

#include <unistd.h>

#include "ember/data/vision.hpp"
#include "ember/record/untrusted.hpp"
#include "ember/tensor/error.hpp"

namespace ember::data {
namespace fs = std::filesystem;

namespace detail {
namespace {

constexpr const char* kInstallHint =
    "install Fashion-MNIST with `apt-get install dataset-fashion-mnist` (Debian), or set "
    "EMBER_DATA_DIR to a directory holding the IDX files (plain or .gz)";

// Closes the gz handle however the reader leaves.
struct GzCloser {
    void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to `n` bytes; returns how many came (fewer only at the end of the data).
std::size_t read_some(gzFile f, const fs::path& path, std::uint8_t* out, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
        // gzread counts in unsigned int, so ask for at most 1 GiB at a time.
        const auto want = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
        const int r = gzread(f, out + got, want);
        if (r < 0) {
            int code = 0;
            const char* msg = gzerror(f, &code);
            EMBER_FAIL(Format, "MnistDataset: ", path.string(), " cannot be read (",
                       msg ? msg : "zlib error", "): it is truncated or corrupt; ", kInstallHint);
        }
        if (r == 0) break;
        got += static_cast<std::size_t>(r);
    }
    return got;
}

}  // namespace

IdxArray read_idx_u8(const fs::path& path, std::size_t rank) {
    // A regular file only (a FIFO or /dev/zero is refused before reading); its size bounds
    // what the header may announce.
    record::detail::RegularFile file(path, "an IDX file");
    const std::uint64_t file_size = file.size();
    unsigned char gz_magic[2] = {0, 0};
    const bool gzipped =
        ::pread(file.fd(), gz_magic, 2, 0) == 2 && gz_magic[0] == 0x1f && gz_magic[1] == 0x8b;
    GzHandle f(gzdopen(file.fd(), "rb"));
    EMBER_CHECK(f != nullptr, Format, "MnistDataset: cannot open ", path.string(), "; ",
                kInstallHint);
    file.release();               // gzclose closes it now
    gzbuffer(f.get(), 1u << 20);  // fewer, larger reads: the image files are 47 MB unpacked

    std::uint8_t magic[4];
    EMBER_CHECK(read_some(f.get(), path, magic, 4) == 4, Format, "MnistDataset: ", path.string(),
                " is truncated inside its IDX header; ", kInstallHint);
    // IDX magic: two zero bytes, the element type (0x08 = unsigned byte), the number of dims.
    EMBER_CHECK(magic[0] == 0 && magic[1] == 0 && magic[2] == 0x08 && magic[3] == rank, Format,
                "MnistDataset: ", path.string(), " has IDX magic number ", int(magic[0]), ",",
                int(magic[1]), ",", int(magic[2]), ",", int(magic[3]), " where 0,0,8,", rank,
                " (unsigned bytes in ", rank, " dims) was expected; ", kInstallHint);

    IdxArray out;
    std::vector<std::uint8_t> header(4 * rank);
    EMBER_CHECK(read_some(f.get(), path, header.data(), header.size()) == header.size(), Format,
                "MnistDataset: ", path.string(), " is truncated inside its IDX header; ",
                kInstallHint);
    std::uint64_t total = 1;
    for (std::size_t d = 0; d < rank; ++d) {
        const std::uint8_t* b = header.data() + 4 * d;
        const std::uint32_t dim = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
                                  (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
        out.dims.push_back(dim);
        total *= dim;
        // A corrupt header must not make us reserve terabytes; 16 GiB is far beyond any IDX set.
        EMBER_CHECK(total <= (std::uint64_t{1} << 34), Format, "MnistDataset: ", path.string(),
                    " announces an implausible size in its IDX header; ", kInstallHint);
    }

    // Before allocating: a plain file must hold what its header announces, a gzipped one may
    // not inflate beyond the read limits for its compressed size (a 3 MB file announcing 4 GB
    // of zeros is refused here).
    const std::uint64_t header_size = 4 + 4 * rank;
    if (gzipped) {
        record::detail::check_decoded_size(total + header_size, file_size,
                                           "the IDX data its header announces",
                                           "MnistDataset: " + path.string());
    } else {
        EMBER_CHECK(total + header_size <= file_size, Format, "MnistDataset: ", path.string(),
                    " is truncated: its IDX header announces ", total, " bytes but the file has ",
                    file_size - std::min(file_size, header_size), " after the header; ",
                    kInstallHint);
    }
    // Grow the buffer as data arrives rather than trusting the header for one huge allocation.
    const auto n = static_cast<std::size_t>(total);
    constexpr std::size_t kChunk = std::size_t{1} << 24;
    out.values.reserve(std::min(n, std::size_t{1} << 26));
    while (out.values.size() < n) {
        const std::size_t at = out.values.size();
        const std::size_t want = std::min(kChunk, n - at);
        out.values.resize(at + want);
        const std::size_t got = read_some(f.get(), path, out.values.data() + at, want);
        EMBER_CHECK(got == want, Format, "MnistDataset: ", path.string(),
                    " is truncated: ", at + got, " of the ", n, " bytes its IDX header announces; ",
                    kInstallHint);
    }
    std::uint8_t extra;
    EMBER_CHECK(read_some(f.get(), path, &extra, 1) == 0, Format, "MnistDataset: ", path.string(),
                " has bytes after the ", n, " its IDX header announces; ", kInstallHint);
    // gzread reports a stream cut before its trailer (CRC-32 and length) only through gzerror,
    // as Z_BUF_ERROR, so that files still being written can be read: here it is an error, or
    // the CRC check would be skipped.
    int code = Z_OK;
    gzerror(f.get(), &code);
    EMBER_CHECK(code == Z_OK, Format, "MnistDataset: ", path.string(),
                " is truncated: its gzip data ends without the trailer that holds its CRC-32 and "
                "length; ",
                kInstallHint);
    return out;
}

}  // namespace detail

namespace {

// `dir/name`, or `dir/name.gz` when only that exists; nullopt when neither does.
std::optional<fs::path> find_file(const fs::path& dir, const std::string& name) {
    std::error_code ec;
    for (const fs::path& p : {dir / name, dir / (name + ".gz")})
        if (fs::is_regular_file(p, ec)) return p;
    return std::nullopt;
}

}  // namespace

std::vector<fs::path> MnistDataset::default_dirs() {
    std::vector<fs::path> dirs;
    if (const char* env = std::getenv("EMBER_DATA_DIR"); env != nullptr && *env != '\0') {
        const fs::path root(env);
        dirs.push_back(root / "fashion-mnist");
        dirs.push_back(root / "mnist");
        dirs.push_back(root);
    }
    dirs.emplace_back(debian_dir());
    return dirs;
}

MnistDataset MnistDataset::train() {
    return load("train", default_dirs());
}
MnistDataset MnistDataset::train(const fs::path& dir) {
    return load("train", {dir});
}
MnistDataset MnistDataset::test() {
    return load("t10k", default_dirs());
}
MnistDataset MnistDataset::test(const fs::path& dir) {
    return load("t10k", {dir});
}

MnistDataset MnistDataset::load(const std::string& split, const std::vector<fs::path>& dirs) {
    const std::string images_name = split + "-images-idx3-ubyte";
    const std::string labels_name = split + "-labels-idx1-ubyte";
    std::optional<fs::path> images, labels;
    std::string looked;
    for (const fs::path& dir : dirs) {
        images = find_file(dir, images_name);
        labels = find_file(dir, labels_name);
        if (images && labels) break;
        looked += (looked.empty() ? "" : ", ") + dir.string();
    }
    EMBER_CHECK(images && labels, Format, "MnistDataset: no ", images_name, "[.gz] and ",
                labels_name, "[.gz] found together in ", looked, "; ", detail::kInstallHint);

    detail::IdxArray img = detail::read_idx_u8(*images, 3);
    detail::IdxArray lab = detail::read_idx_u8(*labels, 1);
    EMBER_CHECK(img.dims[1] == MNIST_HEIGHT && img.dims[2] == MNIST_WIDTH, Format,
                "MnistDataset: ", images->string(), " holds images of ", img.dims[1], "x",
                img.dims[2], " pixels where 28x28 was expected; ", detail::kInstallHint);
    EMBER_CHECK(img.dims[0] == lab.dims[0], Format, "MnistDataset: ", images->string(), " holds ",
                img.dims[0], " images but ", labels->string(), " holds ", lab.dims[0], " labels; ",
                detail::kInstallHint);
    const auto bad =
        std::find_if(lab.values.begin(), lab.values.end(), [](std::uint8_t l) { return l > 9; });
    EMBER_CHECK(bad == lab.values.end(), Format, "MnistDataset: ", labels->string(), " has label ",
                int(bad == lab.values.end() ? 0 : *bad), " at item ", bad - lab.values.begin(),
                " where MNIST classes are 0..9; ", detail::kInstallHint);

    MnistDataset ds;
    ds.images_ = std::make_shared<const std::vector<std::uint8_t>>(std::move(img.values));
    ds.labels_ = std::make_shared<const std::vector<std::uint8_t>>(std::move(lab.values));
    ds.images_path_ = *images;
    ds.labels_path_ = *labels;
    return ds;
}

std::optional<MnistItem> MnistDataset::get(std::size_t index) const {
    if (index >= len()) return std::nullopt;
    MnistItem item;
    const std::uint8_t* px = images_->data() + index * MNIST_PIXELS;
    std::copy(px, px + MNIST_PIXELS, item.image.begin());
    item.label = (*labels_)[index];
    return item;
}

const std::uint8_t* MnistDataset::pixels(std::size_t index) const {
    EMBER_CHECK(index < len(), Index, "MnistDataset::pixels: index ", index, " out of range for ",
                len(), " items");
    return images_->data() + index * MNIST_PIXELS;
}

std::uint8_t MnistDataset::label(std::size_t index) const {
    EMBER_CHECK(index < len(), Index, "MnistDataset::label: index ", index, " out of range for ",
                len(), " items");
    return (*labels_)[index];
}

}  // namespace ember::data
