// Images of an ImageFolderDataset (src/data/image_folder.cpp): the bytes of one image file as
// stb_image decodes them (PNG, JPEG, BMP, GIF, TGA, PNM, ...), into a tensor of the channels
// asked for. The first byte picks the channels (0: as stored, 1..4); the rest is the file.
#include <ember/data/vision.hpp>

#include "fuzz.hpp"

EMBER_FUZZ_TARGET(image) {
    using namespace ember;
    fuzz::Reader in(input);
    const int channels = in.byte() % 5;
    const auto file = fuzz::scratch_dir() / "image.png";
    fuzz::write_file(file, in.rest());
    fuzz::refused_or_fine([&] {
        const auto ds =
            data::ImageFolderDataset::new_classification_with_items({{file, "a"}}, {"a"})
                .with_channels(channels);
        const auto item = ds.get(0);
        if (!item) throw std::logic_error("fuzz: ImageFolderDataset::get(0) empty");
        const auto& t = item->image;
        if (t.bytes().size() != t.num_elements() || t.shape().rank() != 3 ||
            (channels != 0 && t.shape()[2] != std::size_t(channels)))
            throw std::logic_error("fuzz: the image tensor disagrees with its shape");
    });
}
