"""The whole training step captured as one CUDA graph, as an expert writes it for PyTorch (the
figure ember's replayed steps are held against): warm-up steps on a side stream, as
torch.cuda.graphs asks (they also create the optimizer's state), then one step captured.
bench_cuda_torch.py, resnet_torch.py and gpt_torch.py share it."""
import torch


def capture_step(step, warmup=3):
    """Runs `step` `warmup` times on a side stream, captures one more call, and returns the
    graph's replay (one launch a step)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay
