// ImageFolderDataset: the directory scan, the label tables, and decoding through stb_image (its
// implementation is compiled here, once for the library).
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <span>

#include "ember/data/vision.hpp"
#include "ember/record/untrusted.hpp"
#include "ember/tensor/error.hpp"

// STB_IMAGE_STATIC: stb's functions get internal linkage, so that libember_data exports none
// of them and a program with its own copy of stb_image links without clashes.
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>

namespace ember::data {
namespace fs = std::filesystem;

namespace {

/// A path as error messages show it: file and directory names come from whoever made the
/// folder, so their control bytes are escaped (record::printable).
std::string shown(const fs::path& path) {
    return record::printable(path.string(), 4096);
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Class name → label, in the order given; throws on a repeated class.
std::map<std::string, std::size_t> class_index(const std::vector<std::string>& classes,
                                               const char* op) {
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < classes.size(); ++i)
        EMBER_CHECK(index.emplace(classes[i], i).second, Argument, "ImageFolderDataset::", op,
                    ": class \"", record::printable(classes[i]), "\" is listed twice");
    return index;
}

std::size_t lookup(const std::map<std::string, std::size_t>& index, const std::string& name,
                   const fs::path& path, const char* op) {
    const auto it = index.find(name);
    EMBER_CHECK(it != index.end(), Argument, "ImageFolderDataset::", op, ": ", shown(path),
                " has class \"", record::printable(name), "\", which is not among the ",
                index.size(), " classes given");
    return it->second;
}

// stb_image 2.27 (Debian 12's) writes past its tables when a JPEG's Define-Huffman-Table
// segment lists more than 256 codes (stbi__build_huffman checks the code lengths only after
// storing them; tests/fuzz/crashes/image/). Such a file is not a valid JPEG, so it is refused
// before stb sees it. Every DHT segment stb could process is found: stb reads a marker at each 0xFF
// (fill bytes skipped) that is not byte stuffing (0xFF00) or a restart marker, and every segment
// it accepts is exactly as long as its length field; walking the same way, and looking at every
// such marker (also those stb would reject earlier), finds a superset of stb's.
bool jpeg_huffman_tables_fit(std::span<const unsigned char> b) {
    const std::size_t n = b.size();
    // stb takes the first marker after any number of 0xFF fill bytes, so the start of image may
    // come late ("FF FF ... FF D8").
    if (n < 2 || b[0] != 0xFF) return true;  // not a JPEG: stb's other decoders
    std::size_t i = 1;
    while (i < n && b[i] == 0xFF) ++i;
    if (i >= n || b[i] != 0xD8) return true;
    ++i;
    auto at = [&](std::size_t k) -> unsigned { return k < n ? b[k] : 0u; };  // stb reads 0 at EOF
    while (i < n) {
        if (b[i] != 0xFF) {  // entropy-coded data, or junk stb skips between segments
            ++i;
            continue;
        }
        std::size_t j = i + 1;
        while (j < n && b[j] == 0xFF) ++j;
        if (j >= n) break;
        const unsigned marker = b[j];
        i = j + 1;
        if (marker == 0x00 || (marker >= 0xD0 && marker <= 0xD8)) continue;  // data, RSTn, SOI
        if (marker == 0xD9) break;                                           // EOI
        const std::size_t length = (at(i) << 8) | at(i + 1);
        if (marker == 0xC4) {
            std::size_t p = i + 2;
            long left = static_cast<long>(length) - 2;
            while (left > 0) {
                if ((at(p) >> 4) > 1 || (at(p) & 15) > 3) break;  // stb refuses the table
                std::size_t codes = 0;
                for (std::size_t k = 1; k <= 16; ++k) codes += at(p + k);
                if (codes > 256) return false;
                p += 17 + codes;
                left -= static_cast<long>(17 + codes);
            }
        }
        if (length < 2) break;  // stb refuses the segment
        i += length;
    }
    return true;
}

// stb_image 2.27 grows its buffer of compressed PNG data to the length an IDAT chunk claims
// before it reads the chunk (stbi__parse_png_file: realloc, then stbi__getn), so a 120-byte PNG
// whose chunk says 1.3 GB made it allocate 2 GiB (found by fuzzing; tests/fuzz/crashes/image/).
// A chunk cannot be longer than what follows its header: such files are refused first.
// stb_image also copies each IDAT chunk's data into a buffer it allocates at the first chunk that
// has data: for an empty first IDAT it called memcpy with a null destination (undefined
// behaviour, also found by fuzzing). An empty IDAT carries nothing, so such chunks (length, type,
// CRC: 12 bytes) are removed from `b`; the image is the same. Walks the chunks as stb does
// (length, type, data, CRC) up to IEND; false when the file is refused.
bool fit_png_chunks(std::vector<unsigned char>& b) {
    static constexpr unsigned char kSignature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    if (b.size() < 8 || !std::equal(kSignature, kSignature + 8, b.begin()))
        return true;  // not a PNG
    auto be32 = [&](std::size_t k) {
        return (std::uint32_t(b[k]) << 24) | (std::uint32_t(b[k + 1]) << 16) |
               (std::uint32_t(b[k + 2]) << 8) | std::uint32_t(b[k + 3]);
    };
    std::size_t pos = 8;
    while (pos + 8 <= b.size()) {
        const std::size_t n = b.size();
        const std::size_t length = be32(pos);
        const bool idat = b[pos + 4] == 'I' && b[pos + 5] == 'D' && b[pos + 6] == 'A' &&
                          b[pos + 7] == 'T';
        const bool iend = b[pos + 4] == 'I' && b[pos + 5] == 'E' && b[pos + 6] == 'N' &&
                          b[pos + 7] == 'D';
        if (idat && length > n - pos - 8) return false;
        if (iend || length > n - pos - 8) break;  // stb stops here (or fails reading on)
        if (idat && length == 0) {
            const auto first = b.begin() + std::ptrdiff_t(pos);
            b.erase(first, first + std::ptrdiff_t(std::min<std::size_t>(12, n - pos)));
            continue;
        }
        pos += 12 + length;
    }
    return true;
}

// stb_image 2.27 reads the numbers of a binary PGM/PPM header (P5, P6) into an int without an
// overflow check (stbi__pnm_getinteger: undefined behaviour, then a garbage size), and
// mishandles 16-bit samples (below); tests/fuzz/crashes/image/. Such headers are refused first: the
// same reading (whitespace, '#' comments, digits up to the end of the data) with each number
// checked against INT_MAX and the maximum sample value against 255 (8-bit files only).
bool pnm_header_numbers_fit(std::span<const unsigned char> b) {
    const std::size_t n = b.size();
    if (n < 2 || b[0] != 'P' || (b[1] != '5' && b[1] != '6')) return true;  // not one stb reads
    std::size_t pos = 2;
    auto at_eof = [&] { return pos >= n; };
    auto get8 = [&]() -> unsigned { return pos < n ? b[pos++] : 0u; };
    auto space = [](unsigned c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
    unsigned c = get8();
    for (int field = 0; field < 3; ++field) {  // width, height, maximum value
        for (;;) {
            while (!at_eof() && space(c)) c = get8();
            if (at_eof() || c != '#') break;
            while (!at_eof() && c != '\n' && c != '\r') c = get8();
        }
        std::int64_t value = 0;
        while (!at_eof() && c >= '0' && c <= '9') {
            value = value * 10 + (c - '0');
            if (value > INT_MAX) return false;
            c = get8();
        }
        // 16-bit samples: stb converts them to the channels asked for with its 8-bit routine
        // and then reads twice the buffer it made (a heap overflow; tests/fuzz/crashes/image/).
        if (field == 2 && value > 255) return false;
    }
    return true;
}

}  // namespace

std::size_t ImageDatasetItem::label() const {
    const auto* one = std::get_if<std::size_t>(&annotation);
    EMBER_CHECK(one != nullptr, Argument, "ImageDatasetItem::label: ", shown(image_path),
                " has a multi-label annotation; use labels()");
    return *one;
}

std::vector<std::size_t> ImageDatasetItem::labels() const {
    if (const auto* one = std::get_if<std::size_t>(&annotation)) return {*one};
    return std::get<std::vector<std::size_t>>(annotation);
}

std::vector<std::string> ImageFolderDataset::default_extensions() {
    // What stb_image decodes (Burn also lists tiff, which stb_image cannot read).
    return {"bmp", "gif", "jpeg", "jpg", "pgm", "png", "ppm", "tga"};
}

ImageFolderDataset ImageFolderDataset::new_classification(const fs::path& root) {
    return new_classification_with(root, default_extensions());
}

ImageFolderDataset ImageFolderDataset::new_classification_with(
    const fs::path& root, const std::vector<std::string>& extensions) {
    std::error_code ec;
    EMBER_CHECK(fs::is_directory(root, ec), Format,
                "ImageFolderDataset::new_classification: ", shown(root),
                " is not a directory (expected root/<class>/<image files>)");
    std::vector<std::string> wanted;
    for (const std::string& e : extensions)
        wanted.push_back(lower(e.starts_with('.') ? e.substr(1) : e));

    // Classes are the subdirectories, sorted so labels do not depend on the directory order.
    std::vector<std::string> classes;
    for (const fs::directory_entry& d : fs::directory_iterator(root))
        if (d.is_directory()) classes.push_back(d.path().filename().string());
    std::sort(classes.begin(), classes.end());

    std::vector<std::pair<fs::path, std::string>> items;
    for (const std::string& c : classes) {
        std::vector<fs::path> files;
        for (const fs::directory_entry& f : fs::recursive_directory_iterator(root / c)) {
            if (!f.is_regular_file()) continue;
            const std::string ext = lower(f.path().extension().string());
            if (ext.size() > 1 &&
                std::find(wanted.begin(), wanted.end(), ext.substr(1)) != wanted.end())
                files.push_back(f.path());
        }
        std::sort(files.begin(), files.end());
        for (fs::path& p : files) items.emplace_back(std::move(p), c);
    }
    std::string exts;
    for (const std::string& e : wanted) exts += (exts.empty() ? "" : ", ") + e;
    EMBER_CHECK(!items.empty(), Format, "ImageFolderDataset::new_classification: no image files (",
                exts, ") in the subdirectories of ", shown(root),
                " (expected root/<class>/<image files>)");
    return new_classification_with_items(items, classes);
}

ImageFolderDataset ImageFolderDataset::new_classification_with_items(
    const std::vector<std::pair<fs::path, std::string>>& items,
    const std::vector<std::string>& classes) {
    const auto index = class_index(classes, "new_classification_with_items");
    std::vector<Entry> entries;
    entries.reserve(items.size());
    for (const auto& [path, name] : items)
        entries.push_back({path, lookup(index, name, path, "new_classification_with_items")});
    ImageFolderDataset ds;
    ds.entries_ = std::make_shared<const std::vector<Entry>>(std::move(entries));
    ds.classes_ = std::make_shared<const std::vector<std::string>>(classes);
    return ds;
}

ImageFolderDataset ImageFolderDataset::new_multilabel_classification_with_items(
    const std::vector<std::pair<fs::path, std::vector<std::string>>>& items,
    const std::vector<std::string>& classes) {
    const char* op = "new_multilabel_classification_with_items";
    const auto index = class_index(classes, op);
    std::vector<Entry> entries;
    entries.reserve(items.size());
    for (const auto& [path, names] : items) {
        std::vector<std::size_t> labels;
        for (const std::string& n : names) labels.push_back(lookup(index, n, path, op));
        std::sort(labels.begin(), labels.end());
        labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
        entries.push_back({path, std::move(labels)});
    }
    ImageFolderDataset ds;
    ds.entries_ = std::make_shared<const std::vector<Entry>>(std::move(entries));
    ds.classes_ = std::make_shared<const std::vector<std::string>>(classes);
    return ds;
}

ImageFolderDataset ImageFolderDataset::with_channels(int channels) const {
    EMBER_CHECK(channels >= 0 && channels <= 4, Argument,
                "ImageFolderDataset::with_channels: channels must be 0 (as stored) or 1..4, got ",
                channels);
    ImageFolderDataset ds = *this;
    ds.channels_ = channels;
    return ds;
}

std::optional<ImageDatasetItem> ImageFolderDataset::get(std::size_t index) const {
    if (index >= len()) return std::nullopt;
    const Entry& e = (*entries_)[index];
    // A regular file only (one swapped for a FIFO since the listing is refused, not waited
    // on), within the read limits.
    const std::string name = shown(e.path);
    std::vector<unsigned char> file;
    {
        const auto raw = record::detail::RegularFile(e.path, "an image").read_all();
        const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
        file.assign(p, p + raw.size());
    }
    EMBER_CHECK(file.size() <= INT_MAX, Format, "ImageFolderDataset: cannot read image ", name,
                " (larger than 2 GiB)");
    // Before anything of stb reads the file: stbi_info parses a JPEG's Huffman tables too.
    EMBER_CHECK(jpeg_huffman_tables_fit(file), Format, "ImageFolderDataset: cannot read image ",
                name, " (corrupt JPEG: a Huffman table of more than 256 codes)");
    EMBER_CHECK(fit_png_chunks(file), Format, "ImageFolderDataset: cannot read image ", name,
                " (corrupt PNG: an IDAT chunk longer than the rest of the file)");
    EMBER_CHECK(pnm_header_numbers_fit(file), Format, "ImageFolderDataset: cannot read image ",
                name,
                " (PGM/PPM: a header number beyond 2147483647, or samples of more than 8 bits)");
    // The pixels a header announces are checked against the read limits before stb_image
    // allocates them: a small PNG of zeros may claim gigabytes. At least four bytes a pixel,
    // whatever the channels asked for: stb decodes GIFs (and converts others) through RGBA, so
    // a 67-byte GIF of 18176x17993 grey pixels made it allocate 1.3 GB (tests/fuzz/crashes/image).
    {
        int iw = 0, ih = 0, ic = 0;
        if (stbi_info_from_memory(file.data(), static_cast<int>(file.size()), &iw, &ih, &ic)) {
            const std::uint64_t pixels = std::uint64_t(iw) * std::uint64_t(ih) *
                                         std::uint64_t(std::max({channels_, ic, 4}));
            record::detail::check_decoded_size(pixels, file.size(), "the image's pixels",
                                               "ImageFolderDataset: " + name);
        }
    }
    int w = 0, h = 0, c = 0;
    // stb_image keeps its failure reason in a thread-local, so DataLoader workers can decode
    // concurrently.
    stbi_uc* px =
        stbi_load_from_memory(file.data(), static_cast<int>(file.size()), &w, &h, &c, channels_);
    EMBER_CHECK(px != nullptr, Format, "ImageFolderDataset: cannot read image ", name, " (",
                stbi_failure_reason() ? stbi_failure_reason() : "unknown error", ")");
    const std::size_t ch =
        channels_ != 0 ? static_cast<std::size_t>(channels_) : static_cast<std::size_t>(c);
    const std::size_t n = static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * ch;
    std::vector<std::byte> bytes(n);
    if (n != 0) std::memcpy(bytes.data(), px, n);  // an empty vector's data() may be null
    stbi_image_free(px);
    return ImageDatasetItem{
        TensorData(std::move(bytes),
                   Shape{static_cast<std::size_t>(h), static_cast<std::size_t>(w), ch}, DType::U8),
        e.annotation, e.path};
}

}  // namespace ember::data
