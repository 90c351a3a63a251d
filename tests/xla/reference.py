"""Plain PyTorch on the host: the weights a run under `trnsim torchrun` must end with."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).parents[2]


def mlp_example():
    """examples/mlp.py: the model and batches the training examples share."""
    spec = importlib.util.spec_from_file_location("mlp", ROOT / "examples" / "mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def data_parallel(model, opt, batch, loss, ranks: int, steps: int) -> dict:
    """Data parallelism written out: each step, every rank's gradient of `loss(x, y)` on `batch(rank, step)`,
    averaged, then one optimizer step."""
    for step in range(steps):
        grads = []
        for r in range(ranks):
            model.zero_grad()
            loss(*batch(r, step)).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for i, p in enumerate(model.parameters()):
            p.grad = sum(g[i] for g in grads) / ranks
        opt.step()
    return model.state_dict()
