"""Log a PyTorch training loop (plain or DistributedDataParallel) for parity.

Writes, under a log directory (parity_log_common describes the files): metrics.jsonl in the
run directory's StepMetrics format and, at the steps you ask for,
tensors/step_NNNNNN.safetensors holding params/<name> and grads/<name> (and batch_stats/<name>,
below) in torch's own names and layouts (an nn.Sequential's first Linear gives "0.weight",
shape (out, in)). Names are not converted: `parity import tensors` maps them onto parity's
canonical names.

Usage, on every rank (the call gathers each rank's loss and sample ids; only rank 0 writes):

    logger = TorchRunLogger("log", record_steps=[0, -1], steps=steps)
    for ...:
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()              # DDP all-reduces the gradients here
        optimizer.step()
        logger.log_step(step, model, loss, sample_ids=ids, optimizer=optimizer,
                        step_seconds=time.perf_counter() - start)
    logger.close()

Ending a distributed run under torch 1.13 with Gloo: the logger gathers tensors made in Python,
and a Gloo worker thread may drop the last reference to one just as the process group is
destroyed (destroy_process_group, or the DDP model going away), which joins that worker with the
GIL held while the worker waits for the GIL: the rank hangs. End each rank after logger.close()
with dist.barrier() and os._exit(0), as examples/ddp_example.py does (leave_without_teardown).

Call log_step after optimizer.step() and before the next zero_grad(): the parameters are then
the updated ones and .grad still holds the reduced gradient (optimizers do not change .grad).
If you clip with clip_grad_norm_, pass its return value as grad_norm= (the norm before
clipping, as ddp_ref records it); .grad then holds the clipped gradient, and so do the tensors.
A DDP-wrapped model is unwrapped, so names carry no "module." prefix.

BatchNorm's running statistics: call logger.record_batch_stats(model) once, before the first
forward, and the tensor files also hold batch_stats/<module>.running_mean and .running_var, the
variance converted to Flax's convention (what parity's run directories record,
docs/model-layers.md). torch updates it with the unbiased batch variance and momentum p, Flax
with the biased one and m = 1 - p:
    torch  r_t = m r_{t-1} + (1 - m) s_t n / (n - 1),   r_0 = 1
    Flax   f_t = m f_{t-1} + (1 - m) s_t,                f_0 = 1
with s_t the batch's biased variance over its n elements per channel (batch x height x width).
g_t = r_t (n - 1) / n follows Flax's recursion from g_0 = (n - 1) / n, so f_t - g_t =
m^t (f_0 - g_0) = m^t / n, and
    f_t = r_t (n - 1) / n + m^t / n,   t = num_batches_tracked,
exact while every batch has the same n; a module that sees two batch sizes is refused at the
next record step (set data.drop_last = true to keep the epoch's last batch from being shorter).

Dropout masks: to let parity's RNG check judge them, call, on every rank, for every dropout
site at every logged step (before log_step),

    logger.log_dropout(step, "Dropout_0", keep, rate=0.1)

with `keep` the mask this rank drew (nonzero = kept), e.g. from dropout written out as
    keep = torch.empty_like(x).bernoulli_(1 - rate); x = x * keep / (1 - rate)
(nn.Dropout does not expose its mask; `output != 0` recovers it where the input has no zeros).
Each rank's mask is its replica's (replica = rank). A 4-D mask is taken as NCHW and recorded
channels-last (NHWC), Flax's layout, as ddp_ref records its masks. torch's generator has no
keys, so none are recorded. Only each mask's summary (size, kept count, digest, first 4,096 bits)
travels to rank 0, not the mask.

Metrics per step: loss is the mean over all ranks' samples (each rank's mean loss weighted by
its batch size, as ddp_ref computes it), replica_losses each rank's mean, grad_norm the global
L2 norm of .grad, param_norm that of the parameters, lr the optimizer's first group's lr, and,
when sample_ids (this rank's dataset indices of the batch) are given, the digests of the global
ids in rank order.
"""

import functools
import math

import torch
import torch.distributed as dist

from parity_log_common import LogDirWriter, dropout_draw_line, summarise_mask


def _distributed():
    return dist.is_available() and dist.is_initialized()


def _l2_norm(tensors):
    """ddp_ref's global_l2_norm (ddp_ref/src/trainer.cpp) op for op: each tensor's float64 sum of
    squares, added in parameter order, so a bit-identical run logs bit-identical norms."""
    total = 0.0
    for tensor in tensors:
        total += tensor.detach().to(torch.float64).pow(2).sum().item()
    return math.sqrt(total)


def _as_float(value):
    return float(value.detach().item()) if torch.is_tensor(value) else float(value)


class TorchRunLogger:
    def __init__(self, log_dir, *, record_steps=(), steps=None, overwrite=False):
        self.rank = dist.get_rank() if _distributed() else 0
        self._writer = (LogDirWriter(log_dir, record_steps, steps, overwrite)
                        if self.rank == 0 else None)
        self._batch_norms = {}  # module name -> BatchNorm module
        self._elements_per_channel = {}  # module name -> the n of every training batch seen

    def record_batch_stats(self, model):
        """Records the running statistics of every BatchNorm module of `model` at the record
        steps (module docstring). Call once, before the first forward."""
        module = getattr(model, "module", model)
        for name, child in module.named_modules():
            if not isinstance(child, torch.nn.modules.batchnorm._BatchNorm):
                continue
            if isinstance(child, torch.nn.SyncBatchNorm):
                raise ValueError(f"{name}: SyncBatchNorm's running variance is corrected with "
                                 "the count over all ranks; record_batch_stats converts "
                                 "BatchNorm1d/2d/3d only")
            if not child.track_running_stats or child.momentum is None:
                raise ValueError(f"{name}: keeps no exponential running average "
                                 "(track_running_stats=False or momentum=None); Flax's "
                                 "BatchNorm always does")
            self._batch_norms[name] = child
            self._elements_per_channel[name] = set()
            child.register_forward_pre_hook(functools.partial(self._count_elements, name))

    def _count_elements(self, name, module, inputs):
        if module.training:
            x = inputs[0]
            self._elements_per_channel[name].add(x.numel() // x.shape[1])

    def _batch_stats(self, step):
        """{name.running_mean, name.running_var}, the variance in Flax's convention."""
        stats = {}
        for name, bn in self._batch_norms.items():
            counts = self._elements_per_channel[name]
            if len(counts) != 1:
                raise ValueError(
                    f"step {step}: BatchNorm {name} normalised batches of "
                    f"{sorted(counts) or 'no'} elements per channel; its running variance "
                    "converts to Flax's convention only when every batch has the same count "
                    "(set data.drop_last = true, or record before the epoch's short batch)")
            (n,) = counts
            m = 1.0 - bn.momentum
            t = int(bn.num_batches_tracked)
            var = bn.running_var.detach().to(torch.float64) * (n - 1) / n + m ** t / n
            stats[f"{name}.running_mean"] = bn.running_mean.detach().cpu().numpy()
            stats[f"{name}.running_var"] = var.to(torch.float32).cpu().numpy()
        return stats

    def log_step(self, step, model, loss, *, batch_size=None, sample_ids=None, optimizer=None,
                 lr=None, step_seconds=0.0, grad_norm=None):
        """Collective under torch.distributed: every rank calls it with its own loss (its
        batch's mean), batch size (default: len(sample_ids), else equal batches) and ids."""
        loss = _as_float(loss)
        if sample_ids is not None:
            sample_ids = torch.as_tensor(sample_ids).reshape(-1).tolist()
            if batch_size is None:
                batch_size = len(sample_ids)
        count = float(batch_size) if batch_size is not None else 1.0
        if _distributed():
            # Each rank's (loss * count, count) in float64, as ddp_ref's loss all-gather.
            mine = torch.tensor([loss * count, count], dtype=torch.float64)
            gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
            dist.all_gather(gathered, mine)
            sums = [float(g[0]) for g in gathered]
            counts = [float(g[1]) for g in gathered]
            if sample_ids is not None:
                all_ids = [None] * dist.get_world_size()
                dist.all_gather_object(all_ids, sample_ids)
                sample_ids = [i for ids in all_ids for i in ids]  # rank-major
        else:
            sums, counts = [loss * count], [count]
        if self._writer is None:
            return
        # DistributedDataParallel holds the user's model as .module (torch/nn/parallel/
        # distributed.py); its own names would all start with "module.".
        module = getattr(model, "module", model)
        named = list(module.named_parameters())
        missing = [name for name, p in named if p.grad is None]
        if missing and grad_norm is None:
            raise ValueError(f"step {step}: no .grad for {', '.join(missing)}; call log_step "
                             "after backward() and before zero_grad()")
        if grad_norm is None:
            grad_norm = _l2_norm(p.grad for _, p in named)
        if lr is None:
            lr = optimizer.param_groups[0]["lr"] if optimizer is not None else 0.0
        self._writer.write_step(
            step, sum(sums) / sum(counts),
            replica_losses=[s / c for s, c in zip(sums, counts)],
            grad_norm=_as_float(grad_norm), param_norm=_l2_norm(p for _, p in named),
            lr=lr, step_seconds=step_seconds, sample_ids=sample_ids)
        if self._writer.wants_tensors(step):
            params = {name: p.detach().cpu().numpy() for name, p in named}
            grads = {name: p.grad.detach().cpu().numpy() for name, p in named
                     if p.grad is not None}
            metadata = {"producer": "parity_torch_log", "naming": "torch",
                        "step": str(int(step)), "torch_version": torch.__version__}
            if self._batch_norms:
                metadata["running_var"] = "biased: Flax's convention"
            self._writer.write_tensors(step, params, grads, metadata,
                                       batch_stats=self._batch_stats(step))

    def log_dropout(self, step, site, keep, *, rate):
        """Collective under torch.distributed: every rank passes the keep mask its dropout at
        `site` (the module path parity's case names it by, e.g. "Residual_1/Dropout_0") drew at
        `step`; rank 0 writes one rng.jsonl line per rank (module docstring)."""
        keep = torch.as_tensor(keep).detach()
        if keep.dim() == 4:
            # NCHW -> NHWC, as to_flax_layout in ddp_ref/src/dropout_stream.cpp.
            keep = keep.permute(0, 2, 3, 1)
        summary = summarise_mask(keep.contiguous().cpu().numpy())
        summaries = [summary]
        if _distributed():
            summaries = [None] * dist.get_world_size()
            dist.all_gather_object(summaries, summary)
        if self._writer is None:
            return
        for replica, each in enumerate(summaries):
            self._writer.write_dropout(dropout_draw_line(step, replica, site, rate, each))

    def close(self):
        if self._writer is not None:
            self._writer.close()
