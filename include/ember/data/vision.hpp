#pragma once
// Built-in image datasets, as Burn's burn::data::dataset::vision: MnistDataset over the IDX files
// of (Fashion-)MNIST and ImageFolderDataset over a directory tree of images. Both satisfy the
// Dataset concept (get(index) -> optional<Item>, len()) and are cheap to copy: the loaded data is
// shared, so a DataLoader can hand a copy to every worker.
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "../export.hpp"
#include "ember/tensor/data.hpp"
#include "mnist_item.hpp"

namespace ember::data {

/// The MNIST or Fashion-MNIST images and labels of one split, loaded whole into memory from the
/// IDX files (`train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-...`, each plain or
/// gzipped with a `.gz` suffix).
///
/// Where the files are looked for, in order: the directory given; else, when EMBER_DATA_DIR is
/// set, `$EMBER_DATA_DIR/fashion-mnist`, `$EMBER_DATA_DIR/mnist`, `$EMBER_DATA_DIR`; then
/// Debian's `dataset-fashion-mnist` directory (`/usr/share/datasets/fashion-mnist`). A missing or
/// malformed file throws FormatError naming the paths looked at and how to install the data.
class EMBER_API MnistDataset {
  public:
    /// The 60,000 training items from the default locations.
    static MnistDataset train();
    /// The 60,000 training items from the files in `dir`.
    static MnistDataset train(const std::filesystem::path& dir);
    /// The 10,000 test items from the default locations.
    static MnistDataset test();
    /// The 10,000 test items from the files in `dir`.
    static MnistDataset test(const std::filesystem::path& dir);

    /// The directories searched when no directory is given, in order (EMBER_DATA_DIR read now).
    static std::vector<std::filesystem::path> default_dirs();
    /// Debian's dataset-fashion-mnist directory.
    static const char* debian_dir() { return "/usr/share/datasets/fashion-mnist"; }

    /// Item `index`, or nullopt past the end.
    std::optional<MnistItem> get(std::size_t index) const;
    /// Number of items.
    std::size_t len() const { return labels_ ? labels_->size() : 0; }
    /// Whether there are no items.
    bool is_empty() const { return len() == 0; }

    /// The raw 8-bit pixels of item `index` (784 of them); throws IndexError past the end.
    const std::uint8_t* pixels(std::size_t index) const;
    /// The label of item `index`; throws IndexError past the end.
    std::uint8_t label(std::size_t index) const;
    /// The image file the items were read from (`.gz` included when it was gzipped).
    const std::filesystem::path& images_path() const { return images_path_; }
    /// The label file the items were read from.
    const std::filesystem::path& labels_path() const { return labels_path_; }

  private:
    static MnistDataset load(const std::string& split,
                             const std::vector<std::filesystem::path>& dirs);

    std::shared_ptr<const std::vector<std::uint8_t>> images_;  // len() * 784 pixels
    std::shared_ptr<const std::vector<std::uint8_t>> labels_;
    std::filesystem::path images_path_;
    std::filesystem::path labels_path_;
};

namespace detail {
/// An IDX array: its dims and its elements (unsigned bytes only, the type MNIST uses).
struct IdxArray {
    /// The dims, outermost first.
    std::vector<std::uint32_t> dims;
    /// The elements, row-major.
    std::vector<std::uint8_t> values;
};
/// Reads the IDX file `path` (plain or gzip) holding unsigned bytes in `rank` dims; throws
/// FormatError naming the file on a bad magic number, another rank, a truncated body or bytes
/// after the end.
IdxArray read_idx_u8(const std::filesystem::path& path, std::size_t rank);
}  // namespace detail

/// The annotation of an image, as Burn's Annotation: one class index (classification) or the
/// sorted class indices present (multi-label classification).
using Annotation = std::variant<std::size_t, std::vector<std::size_t>>;

/// One image of an ImageFolderDataset, as Burn's ImageDatasetItem.
struct EMBER_API ImageDatasetItem {
    /// The pixels as U8 data of shape [height, width, channels], channels interleaved.
    TensorData image;
    /// The class index (classification) or indices (multi-label).
    Annotation annotation;
    /// The file the image was read from.
    std::filesystem::path image_path;

    /// The class index; throws ArgumentError for a multi-label item.
    std::size_t label() const;
    /// The class indices: one for a classification item, any number (sorted) for multi-label.
    std::vector<std::size_t> labels() const;
};

/// Images in files, each with a class or a set of classes; images are decoded (through stb_image)
/// when an item is read, so the dataset holds only paths and labels.
class EMBER_API ImageFolderDataset {
  public:
    /// The extensions read by default (lower case; matched case-insensitively).
    static std::vector<std::string> default_extensions();

    /// A classification dataset from `root/<class>/<image>`: each subdirectory is a class, named
    /// by the subdirectory, with classes sorted by name and labelled 0, 1, ... in that order.
    /// Files of other extensions are skipped; throws FormatError when `root` is not a directory
    /// or holds no images.
    static ImageFolderDataset new_classification(const std::filesystem::path& root);
    /// As new_classification, reading only files with the given extensions (e.g. {"png"}).
    static ImageFolderDataset new_classification_with(const std::filesystem::path& root,
                                                      const std::vector<std::string>& extensions);
    /// A classification dataset from (image path, class name) pairs; labels follow the order of
    /// `classes`. Throws ArgumentError for a class not in `classes` or a repeated class.
    static ImageFolderDataset new_classification_with_items(
        const std::vector<std::pair<std::filesystem::path, std::string>>& items,
        const std::vector<std::string>& classes);
    /// A multi-label dataset from (image path, class names) pairs; labels follow the order of
    /// `classes`. Throws ArgumentError for a class not in `classes` or a repeated class.
    static ImageFolderDataset new_multilabel_classification_with_items(
        const std::vector<std::pair<std::filesystem::path, std::vector<std::string>>>& items,
        const std::vector<std::string>& classes);

    /// A copy that converts every image to `channels` channels (1 grey, 2 grey+alpha, 3 RGB,
    /// 4 RGBA), so that images of mixed formats batch together; 0 keeps each file's own.
    ImageFolderDataset with_channels(int channels) const;

    /// Item `index` (its image decoded now), or nullopt past the end; throws FormatError naming
    /// the file when it cannot be read or decoded.
    std::optional<ImageDatasetItem> get(std::size_t index) const;
    /// Number of images.
    std::size_t len() const { return entries_ ? entries_->size() : 0; }
    /// Whether there are no images.
    bool is_empty() const { return len() == 0; }
    /// The class names, in label order.
    const std::vector<std::string>& classes() const { return *classes_; }
    /// Number of classes.
    std::size_t num_classes() const { return classes_->size(); }

  private:
    struct Entry {
        std::filesystem::path path;
        Annotation annotation;
    };
    std::shared_ptr<const std::vector<Entry>> entries_;
    std::shared_ptr<const std::vector<std::string>> classes_ =
        std::make_shared<const std::vector<std::string>>();
    int channels_ = 0;
};

}  // namespace ember::data
