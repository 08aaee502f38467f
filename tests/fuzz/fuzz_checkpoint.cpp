// The checkpoint manifests of an artifact directory (src/train/checkpoint.cpp), read on --resume
// to find the newest complete checkpoint: a JSON record naming the checkpoint's files and their
// sizes. The input is a little-endian u16 n, then n bytes of the manifest of epoch 2, then the
// manifest of epoch 1; the directory also holds model, optim and scheduler files of both epochs.
#include <ember/train/checkpoint.hpp>

#include "fuzz.hpp"

EMBER_FUZZ_TARGET(checkpoint) {
    using namespace ember;
    fuzz::Reader in(input);
    const std::uint16_t n = in.u16();
    const auto artifacts = fuzz::scratch_dir() / "checkpoint";
    const auto dir = artifacts / "checkpoint";
    std::filesystem::create_directories(dir);
    const std::string four = "abcd";
    for (const char* kind : {"model", "optim", "scheduler"})
        for (int epoch : {1, 2})
            fuzz::write_file(dir / (std::string(kind) + "-" + std::to_string(epoch) + ".mpk"),
                             std::as_bytes(std::span(four)));
    fuzz::write_file(dir / "checkpoint-2.json", in.take(n));
    fuzz::write_file(dir / "checkpoint-1.json", in.rest());
    fuzz::refused_or_fine([&] {
        const auto latest = train::latest_checkpoint(artifacts);
        if (latest && *latest != 1 && *latest != 2)
            throw std::logic_error("fuzz: latest_checkpoint names an epoch that has no manifest");
        std::vector<std::filesystem::path> files;
        for (const char* kind : {"model", "optim", "scheduler"})
            files.push_back(dir / (std::string(kind) + "-2.mpk"));
        train::detail::check_checkpoint(dir, 2, files);
    });
}
