"""Log a JAX/Flax training loop (jit, pmap or shard_map) for parity.

Writes, under a log directory (parity_log_common describes the files): metrics.jsonl in the
run directory's StepMetrics format and, at the steps you ask for,
tensors/step_NNNNNN.safetensors holding params/<path> and grads/<path> for every leaf of the
pytrees you pass. Pytrees are nested dicts (or Flax FrozenDicts: any Mapping) of array-likes;
a leaf's path joins its keys with '/', as flax.traverse_util.flatten_dict(tree, sep='/') does,
so Flax variables {'params': {'Dense_0': {'kernel': k}}} give "params/params/Dense_0/kernel"
(the file's "params/" prefix, then the path). Layouts stay Flax's (a Dense kernel is (in, out));
`parity import tensors` maps names and layouts onto parity's canonical ones. Leaves are
converted with numpy.asarray, which copies a jax.Array to the host.

Usage, in every process (only process 0 writes; jax.process_index() decides when JAX is
importable, else pass process_index=):

    logger = JaxRunLogger("log", record_steps=[0, -1], steps=steps)
    for step in range(steps):
        start = time.perf_counter()
        params, opt_state, losses, grads = p_train_step(params, opt_state, x, y)
        losses.block_until_ready()
        logger.log_step(step, params=params, grads=grads, replica_losses=losses, lr=1e-3,
                        sample_ids=ids, step_seconds=time.perf_counter() - start,
                        replicated=True)

Dropout masks: to let parity's RNG check judge them, return each dropout's keep mask and key
from the step (e.g. with Flax's Module.sow, or by drawing the mask yourself), and log them for
every site at every logged step (before log_step):

    logger.log_dropout(step, "Residual_1/Dropout_0", masks, rate=0.1,
                       keys=jax.random.key_data(site_keys))

masks: one keep mask per replica (nonzero = kept), stacked on axis 0 as pmap returns them, in
Flax's layout; keys (optional): each replica's key the mask was drawn from, shape (replicas, 2),
uint32 [hi, lo], i.e. the key bernoulli used (for nn.Dropout, make_rng("dropout")'s key), which
parity's RNG check recomputes from the case's [rng]. The site is the Dropout module's path.

With pmap the returned params and grads carry a leading device axis; replicated=True keeps
device 0's copy (flax.jax_utils.unreplicate does the same). replica_losses are the
per-device losses; loss defaults to their mean, which is the global mean because pmap gives
every device a batch of the same size. sample_ids are the step's global sample ids in device
order. grads should be the reduced (pmean'd) gradient.

Honesty note: JAX is not installable where parity is developed and tested, so this helper is
tested only with NumPy arrays standing in for jax.Arrays (tests/interop, JaxHelperWithNumpyArrays
tests); nothing here calls JAX except the optional jax.process_index().
"""

from collections.abc import Mapping

import numpy as np

from parity_log_common import LogDirWriter, dropout_draw_line, global_l2_norm, summarise_mask


def flatten_pytree(tree, sep="/"):
    """{'a': {'b': x}} -> {'a/b': x}, in flax.traverse_util.flatten_dict's order and with its
    rules (flax/traverse_util.py): Mappings are nodes, anything else a leaf, empty Mappings
    vanish."""
    flat = {}

    def visit(node, prefix):
        if not isinstance(node, Mapping):
            flat[sep.join(prefix)] = node
            return
        for key, value in node.items():
            visit(value, prefix + (str(key),))

    if not isinstance(tree, Mapping):
        raise TypeError(f"expected a (nested) dict of arrays, got {type(tree).__name__}")
    visit(tree, ())
    return flat


def _process_index():
    try:
        import jax  # optional: only to ask which process this is
    except ImportError:
        return 0
    return jax.process_index()


class JaxRunLogger:
    def __init__(self, log_dir, *, record_steps=(), steps=None, overwrite=False,
                 process_index=None):
        self.process_index = _process_index() if process_index is None else process_index
        self._writer = (LogDirWriter(log_dir, record_steps, steps, overwrite)
                        if self.process_index == 0 else None)

    def log_step(self, step, *, params, grads=None, loss=None, replica_losses=None, lr=0.0,
                 step_seconds=0.0, sample_ids=None, grad_norm=None, replicated=False):
        if self._writer is None:
            return
        if loss is None and replica_losses is None:
            raise ValueError(f"step {step}: pass loss= or replica_losses=")
        replica_losses = ([] if replica_losses is None
                          else [float(v) for v in np.asarray(replica_losses).reshape(-1)])
        if loss is None:
            loss = sum(replica_losses) / len(replica_losses)

        def host(tree):
            leaves = {k: np.asarray(v) for k, v in flatten_pytree(tree).items()}
            return {k: v[0] for k, v in leaves.items()} if replicated else leaves

        params = host(params)
        grads = host(grads) if grads is not None else {}
        if grad_norm is None:
            if not grads:
                raise ValueError(f"step {step}: pass grads= or grad_norm=")
            grad_norm = global_l2_norm(grads.values())
        self._writer.write_step(
            step, float(loss), replica_losses=replica_losses, grad_norm=float(grad_norm),
            param_norm=global_l2_norm(params.values()), lr=float(lr),
            step_seconds=step_seconds, sample_ids=sample_ids)
        if self._writer.wants_tensors(step):
            self._writer.write_tensors(step, params, grads, {
                "producer": "parity_jax_log", "naming": "flax", "step": str(int(step))})

    def log_dropout(self, step, site, masks, *, rate, keys=None):
        """One rng.jsonl line per replica: row r of `masks` (and of `keys`, when given) is
        replica r's draw at `site` (module docstring)."""
        if self._writer is None:
            return
        masks = np.asarray(masks)
        if masks.ndim < 2:
            raise ValueError(f"step {step}, site {site}: masks of shape {masks.shape}; stack one "
                             "mask per replica on axis 0 (masks[None] for a single replica)")
        if keys is not None:
            keys = np.asarray(keys)
            if keys.shape != (masks.shape[0], 2):
                raise ValueError(f"step {step}, site {site}: keys of shape {keys.shape}, expected "
                                 f"({masks.shape[0]}, 2): one [hi, lo] per replica")
        for replica, mask in enumerate(masks):
            key = None if keys is None else keys[replica]
            self._writer.write_dropout(
                dropout_draw_line(step, replica, site, rate, summarise_mask(mask), key))

    def close(self):
        if self._writer is not None:
            self._writer.close()
