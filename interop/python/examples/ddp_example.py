"""What the real PyTorch DDP examples (train_mlp2_ddp.py, train_cnn_ddp.py) share: the case file,
the Fashion-MNIST data, the optimizer, one rank's training loop and the launcher of the ranks.

Each example gives its model (built and loaded from `parity init`'s file); everything else is
what ddp_ref does (ddp_ref/src/trainer.cpp; common/data/src/fashion_mnist.cpp,
distributed_sampler.cpp), so that the two runs train the same thing:
  - data: the Fashion-MNIST train split from the IDX .gz files, pixels as float32 p / 255
    (torchvision/transforms/functional.py, to_tensor: a float32 division by 255), labels as
    int64, each sample a flat row of 784 (a model that wants an image reshapes it);
  - order: DistributedSampler(num_replicas, rank, shuffle, seed, drop_last) with set_epoch(e)
    at each epoch e = 0, 1, ... (torch/utils/data/distributed.py: __iter__ seeds randperm with
    seed + epoch), and DataLoader(batch_size=per_replica_batch, drop_last), one optimizer step
    per batch (the last, shorter batch of an epoch included unless drop_last);
  - DistributedDataParallel with its defaults (it broadcasts rank 0's parameters and, before
    every forward, its buffers: BatchNorm's running statistics);
  - loss: F.cross_entropy (batch mean, with the case's label_smoothing); optimizer:
    torch.optim.SGD / Adam / AdamW with the case's hyperparameters; clip_grad_norm_ when the
    case clips;
  - one intra-op thread per rank, as ddp_ref pins it. Neither pins OpenBLAS's own thread pool
    (OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else the core count), and the gradients'
    last bits depend on it: with the same count on both sides the two runs are bit-identical.
Refused with a message (ddp_ref supports them, these examples do not): other datasets and
losses, gradient accumulation, 16-bit dtypes.

Without RANK in the environment a script starts parallel.replicas copies of itself (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE), waits for them with a deadline, and stops the others when one
fails. Like torchrun's agent, the launcher hosts the rendezvous store itself, on a port the
kernel gives it (TCPStore port 0), and the ranks join it as clients
(TORCHELASTIC_USE_AGENT_STORE; torch/distributed/rendezvous.py, _create_c10d_store): a port
picked free and released before rank 0 binds it could be taken in between by another job on
the machine. A rank still running at the deadline prints its Python stacks (faulthandler on
SIGUSR1) before it is stopped, so a stall says where it stood. A rank that has written its log
ends at the last barrier with os._exit, not through the process group's teardown, which can
deadlock in torch 1.13 (leave_without_teardown). Started by torchrun it runs as the rank
torchrun gives it.
"""

import argparse
import datetime
import gzip
import os
import faulthandler
import signal
import subprocess
import sys
import time
import tomllib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # interop/python: the helpers
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# docs/case-schema.md: the defaults of the keys these scripts read.
DEFAULTS = {
    "model": {"activation": "tanh", "loss": "softmax_cross_entropy", "label_smoothing": 0.0,
              "label_smoothing_form": "uniform"},
    "data": {"dataset": "fashion-mnist", "per_replica_batch": 64, "seed": 0, "shuffle": True,
             "drop_last": False},
    "parallel": {"replicas": 8, "processes": 1},
    "train": {"steps": 200, "optimizer": "adam", "lr": 1e-3, "momentum": 0.0, "nesterov": False,
              "weight_decay": 0.0, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "eps_root": 0.0,
              "rms_decay": 0.99, "initial_accumulator_value": 0.0, "eps_in_sqrt": False,
              "clip_grad_norm": 0.0, "clip_placement": "after_mean", "grad_accum_steps": 1,
              "dtype": "f32", "record_steps": []},
}


def script_name():
    return os.path.splitext(os.path.basename(sys.argv[0]))[0]


def load_case(path, overrides):
    with open(path, "rb") as file:
        case = tomllib.load(file)
    for section, keys in DEFAULTS.items():
        for key, value in keys.items():
            case.setdefault(section, {}).setdefault(key, value)
    for override in overrides:
        key, _, text = override.partition("=")
        section, _, name = key.partition(".")
        if not text or section not in case or not name:
            sys.exit(f"--set {override}: expected section.key=value, e.g. parallel.replicas=2")
        # A TOML value, as `parity --set` reads it (2, 1e-3, true, [0, -1], "adam").
        try:
            case[section][name] = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            case[section][name] = text  # a bare word: a string
    problems = []
    if case["data"]["dataset"] != "fashion-mnist":
        problems.append(f"data.dataset = {case['data']['dataset']!r} (only fashion-mnist)")
    if case["model"]["loss"] != "softmax_cross_entropy":
        problems.append(f"model.loss = {case['model']['loss']!r}")
    if case["model"]["label_smoothing"] and case["model"]["label_smoothing_form"] != "uniform":
        problems.append(f"model.label_smoothing_form = "
                        f"{case['model']['label_smoothing_form']!r} (torch has only 'uniform')")
    if case["train"]["grad_accum_steps"] != 1:
        problems.append("train.grad_accum_steps != 1")
    if case["train"]["dtype"] != "f32":
        problems.append(f"train.dtype = {case['train']['dtype']!r}")
    if case["train"]["eps_root"] != 0:
        problems.append("train.eps_root != 0 (torch.optim has no eps_root)")
    if case["train"]["eps_in_sqrt"]:
        problems.append("train.eps_in_sqrt = true (torch's RMSprop and Adagrad add eps after "
                        "the square root only)")
    if case["train"]["clip_placement"] != "after_mean":
        problems.append(f"train.clip_placement = {case['train']['clip_placement']!r} (DDP "
                        "averages the gradients during backward, before the loop can clip)")
    if case["train"]["optimizer"] in ("rmsprop", "adagrad") and case["train"]["momentum"] != 0:
        problems.append(f"train.momentum != 0 with {case['train']['optimizer']}")
    if problems:
        sys.exit(f"{script_name()}.py does not train: " + "; ".join(problems))
    return case


# ---- data -------------------------------------------------------------------------------------

def read_idx(path, magic):
    """One gzip'd IDX file (magic 0x00000803 images, 0x00000801 labels; big-endian header)."""
    with gzip.open(path, "rb") as file:
        blob = file.read()
    num_dims = magic & 0xFF
    found = int.from_bytes(blob[:4], "big")
    if found != magic:
        raise ValueError(f"{path}: IDX magic {found:#010x}, expected {magic:#010x}")
    dims = [int.from_bytes(blob[4 + 4 * d:8 + 4 * d], "big") for d in range(num_dims)]
    data = np.frombuffer(blob, dtype=np.uint8, offset=4 + 4 * num_dims)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} data bytes for dimensions {dims}")
    return data.reshape(dims)


def load_fashion_mnist(data_dir):
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 0x00000803)
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 0x00000801)
    # float32 p / float32 255, correctly rounded: the bits of fashion_mnist.cpp's
    # static_cast<float>(p) / 255.0f and of torchvision's ToTensor.
    features = images.reshape(len(images), -1).astype(np.float32) / np.float32(255.0)
    return features, labels.astype(np.int64)


# ---- one rank ---------------------------------------------------------------------------------

def make_optimizer(torch, case, params):
    train = case["train"]
    if train["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=train["lr"], momentum=train["momentum"],
                               nesterov=train["nesterov"], weight_decay=train["weight_decay"])
    if train["optimizer"] == "rmsprop":
        # torch/optim/rmsprop.py: alpha is the case's rms_decay; eps after the square root.
        return torch.optim.RMSprop(params, lr=train["lr"], alpha=train["rms_decay"],
                                   eps=train["eps"], weight_decay=train["weight_decay"])
    if train["optimizer"] == "adagrad":
        return torch.optim.Adagrad(params, lr=train["lr"],
                                   initial_accumulator_value=train["initial_accumulator_value"],
                                   eps=train["eps"], weight_decay=train["weight_decay"])
    kind = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[train["optimizer"]]
    return kind(params, lr=train["lr"], betas=(train["beta1"], train["beta2"]), eps=train["eps"],
                weight_decay=train["weight_decay"])


def train_rank(args, case, build_model):
    """One rank's run. build_model(torch, case, init_path) returns the model, its parameters
    loaded from the init file."""
    # Imported here, not at the top: --help and a bad case file answer without torch's start-up.
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    from parity_torch_log import TorchRunLogger

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the launcher's dump_stacks
    torch.set_num_threads(1)  # ddp_ref runs each rank on one intra-op thread
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != case["parallel"]["replicas"]:
        sys.exit(f"WORLD_SIZE {world} but the case has parallel.replicas = "
                 f"{case['parallel']['replicas']} (one process per replica)")
    data, train = case["data"], case["train"]

    features, labels = load_fashion_mnist(args.data_dir)
    # The third tensor carries each sample's dataset index through the DataLoader, so the ids
    # logged are the ones the sampler really produced.
    dataset = TensorDataset(torch.from_numpy(features), torch.from_numpy(labels),
                            torch.arange(len(labels)))
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=data["shuffle"],
                                 seed=data["seed"], drop_last=data["drop_last"])
    loader = DataLoader(dataset, batch_size=data["per_replica_batch"], sampler=sampler,
                        drop_last=data["drop_last"])

    model = build_model(torch, case, args.init)
    ddp = DistributedDataParallel(model)
    optimizer = make_optimizer(torch, case, ddp.parameters())
    logger = TorchRunLogger(args.out, record_steps=train["record_steps"], steps=train["steps"],
                            overwrite=args.overwrite)
    logger.record_batch_stats(model)  # before the first forward: it counts each batch's elements

    step, epoch = 0, 0
    while step < train["steps"]:
        sampler.set_epoch(epoch)  # the epoch's order: randperm seeded with seed + epoch
        for x, y, ids in loader:
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x), y, label_smoothing=case["model"]["label_smoothing"])
            loss.backward()
            grad_norm = None
            if train["clip_grad_norm"] > 0:
                grad_norm = torch.nn.utils.clip_grad_norm_(ddp.parameters(),
                                                           train["clip_grad_norm"])
            optimizer.step()
            seconds = time.perf_counter() - start
            logger.log_step(step, ddp, loss, sample_ids=ids, optimizer=optimizer,
                            step_seconds=seconds, grad_norm=grad_norm)
            if rank == 0 and not args.quiet and (step % 20 == 0 or step + 1 == train["steps"]):
                print(f"{script_name()}: step {step + 1}/{train['steps']}  loss "
                      f"{loss.item():.6f} (rank 0)", file=sys.stderr, flush=True)
            step += 1
            if step == train["steps"]:
                break
        epoch += 1
    logger.close()
    dist.barrier()
    leave_without_teardown()


def leave_without_teardown():
    """Ends a rank whose work is written and whose peers passed the last barrier, skipping the
    process group's destruction. In torch 1.13 that destruction can deadlock: the last reference
    to ProcessGroupGloo goes (from ~Reducer, or from destroy_process_group) with the GIL held, and
    its destructor joins the Gloo worker threads, while a worker may be dropping the last
    reference to a tensor made in Python (the logger's gathers) and so waits for the GIL (gdb:
    ~ProcessGroupGloo -> thread::join on the main thread; ProcessGroupGloo::runLoop ->
    ~TensorImpl -> destroy_pyobj_if_needed -> PyEval_AcquireThread on the worker;
    pytorch/pytorch#56297). It stalled a CI run once in a few hundred launches."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---- launching --------------------------------------------------------------------------------

def dump_stacks(children):
    """Asks every rank still running to print its threads' Python stacks (train_rank registers
    faulthandler on SIGUSR1) and gives them a moment to write."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGUSR1)
    time.sleep(2)


def launch(args, world):
    """Starts `world` ranks of the running script and waits for all of them, at most
    args.deadline seconds; the first failure (or the deadline) stops the rest."""
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, world, True,
                          datetime.timedelta(seconds=args.timeout), wait_for_workers=False)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port),
               WORLD_SIZE=str(world), TORCHELASTIC_USE_AGENT_STORE="True",
               TORCHELASTIC_RESTART_COUNT="0")
    children = []
    # A SIGTERM (a test's timeout, a CI runner cancelling) must not leave ranks behind.
    signal.signal(signal.SIGTERM,
                  lambda signum, frame: sys.exit(f"{script_name()}: stopped by signal {signum}"))
    try:
        for rank in range(world):
            children.append(subprocess.Popen(
                [sys.executable, os.path.abspath(sys.argv[0])] + sys.argv[1:],
                env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank))))
        deadline = time.monotonic() + args.deadline
        failure = None
        while failure is None and any(c.poll() is None for c in children):
            for rank, child in enumerate(children):
                if child.poll() not in (None, 0):
                    failure = f"rank {rank} exited with status {child.returncode}"
            if time.monotonic() > deadline:
                failure = f"the ranks did not finish within --deadline {args.deadline} s"
                dump_stacks(children)
            time.sleep(0.05)
        if failure is None:
            failure = next((f"rank {r} exited with status {c.returncode}"
                            for r, c in enumerate(children) if c.returncode != 0), None)
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=10)
    if failure:
        sys.exit(f"{script_name()}: {failure}")


def main(description, default_case, build_model):
    """The examples' command line: trains as one rank under RANK, else launches the ranks."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--case", default=os.path.join(REPO, "cases", default_case),
                        help=f"the case file (default: cases/{default_case})")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a case key, as `parity ddp --set` does")
    parser.add_argument("--init", required=True, help="initial parameters from `parity init`")
    parser.add_argument("--out", required=True, help="the log directory parity_torch_log fills")
    parser.add_argument("--data-dir", default=os.environ.get("PARITY_DATA_DIR") or
                        "/usr/share/datasets/fashion-mnist")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds a rank waits for the others in a collective")
    parser.add_argument("--deadline", type=float, default=600,
                        help="seconds the launcher waits for the whole run")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier log")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    case = load_case(args.case, args.set)
    if "RANK" in os.environ:
        train_rank(args, case, build_model)
    else:
        launch(args, case["parallel"]["replicas"])
