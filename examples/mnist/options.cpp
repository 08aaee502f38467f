// `mnist`'s command line (CLI11 through examples/cli.hpp): the one file of the example that
// compiles the command-line library, kept apart from main.cpp (the models and the Learner).
#include "options.hpp"

#include <ember/dispatch/dispatch.hpp>

#include "../backend.hpp"
#include "../cli.hpp"

namespace mnist {

Options parse(int argc, char** argv) {
    Options o;
    CLI::App app{
        "Trains a classifier on Fashion-MNIST with the Learner, classifies test images "
        "with it, or exports it for examples/firmware.",
        "mnist"};
    ember_examples::setup(app);
    app.require_subcommand(1, 1);
    auto* train_cmd =
        app.add_subcommand("train", "train a classifier on Fashion-MNIST with the Learner");
    auto* infer_cmd =
        app.add_subcommand("infer", "load the trained model and classify test images");
    auto* export_cmd =
        app.add_subcommand("export", "write the model and test images for examples/firmware");
    auto& c = o.config;
    std::optional<double> lr;
    const auto* train_backend = ember_examples::add_backend_option(train_cmd, o.backend);
    const auto* infer_backend = ember_examples::add_backend_option(infer_cmd, o.backend);
    for (auto* cmd : {train_cmd, infer_cmd, export_cmd}) {
        cmd->add_option("--artifact-dir", o.artifact_dir,
                        "where checkpoints, logs and the model go");
        cmd->add_option(
            "--data", o.data_dir,
            "the IDX files (default: EMBER_DATA_DIR or Debian's dataset-fashion-mnist)");
        cmd->add_option("--threads", o.threads,
                        "CPU backend threads (default: EMBER_NUM_THREADS or all)")
            ->check(ember_examples::positive);
    }
    train_cmd
        ->add_option("--model", c.model,
                     "the guide's CNN, an MLP 784-512-512-10, or the MLP 784-64-10 that "
                     "examples/firmware runs")
        ->check(CLI::IsMember({"cnn", "mlp", "tiny"}));
    train_cmd->add_option("--epochs", c.num_epochs, "epochs to train")
        ->check(ember_examples::positive);
    train_cmd
        ->add_option("--batch-size", c.batch_size, "items per batch (per device with --devices)")
        ->check(ember_examples::positive);
    train_cmd
        ->add_option("--lr", lr,
                     "Adam's learning rate (default 1e-4 for the CNN, 1e-3 for the MLPs)")
        ->check(ember_examples::positive);
    train_cmd->add_option("--seed", c.seed, "the run's seed");
    train_cmd->add_option("--workers", c.num_workers, "data loader threads")
        ->check(ember_examples::non_negative);
    train_cmd
        ->add_option("--devices", o.devices,
                     "data-parallel training (docs/multi-device.md): on cpu, N replicas on "
                     "threads; on a GPU backend, the devices by index (0,1: two GPUs)")
        ->delimiter(',');
    train_cmd->add_flag("--plain", o.plain, "plain line output even on a terminal");
    train_cmd->add_flag("--resume", o.resume,
                        "go on from the last checkpoint in the artifact directory");
    train_cmd->add_flag("--capture", o.capture,
                        "(cuda) capture the training and validation steps once and replay them as "
                        "CUDA graphs (LearnerBuilder::capture_steps), on the concrete CUDA stack");
    infer_cmd->add_option("--count", o.count, "predictions to print")
        ->check(ember_examples::positive);
    export_cmd->add_option("--count", o.count, "test images to write")
        ->check(ember_examples::positive);
    export_cmd->add_option("--out", o.out_dir,
                           "where model.bin, images.bin, labels.bin and expected.bin go");
    ember_examples::parse_or_exit(app, argc, argv);
    ember_examples::backend_from_env(app, {train_backend, infer_backend}, o.backend);
    o.command = train_cmd->parsed() ? "train" : infer_cmd->parsed() ? "infer" : "export";
    if (lr)
        c.learning_rate = *lr;
    else if (c.model != "cnn")
        c.learning_rate = 1e-3;
    const auto device = ember_examples::backend_device_of(o.backend);
    if (o.capture && (device.kind() != ember::DispatchKind::Cuda || device.has_fusion()))
        throw ember::ArgumentError(
            "mnist: --capture replays CUDA graphs: it needs --backend cuda[:i] (without +fusion)");
    if (device.kind() == ember::DispatchKind::Cpu && !o.devices.empty() &&
        (o.devices.size() != 1 || o.devices[0] == 0))
        throw ember::ArgumentError(
            "mnist: on the cpu, --devices takes a number of replicas (>= 1)");
    return o;
}

TrainingConfig load_config(const fs::path& file) {
    return TrainingConfig::load(file);
}

void save_config(const TrainingConfig& config, const fs::path& file) {
    config.save(file);
}

}  // namespace mnist
