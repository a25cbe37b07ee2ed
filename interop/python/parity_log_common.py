"""What parity's two logging helpers share: the log directory writer, digests, safetensors.

parity_torch_log (PyTorch) and parity_jax_log (JAX/Flax) both write, under one log directory:

    metrics.jsonl                     one JSON object per optimizer step, in the run directory's
                                      StepMetrics format (common/run_dir/include/parity/common/run_dir.h):
                                      step, loss, replica_losses, grad_norm, param_norm, lr,
                                      step_seconds, samples_digest and, when the script passes
                                      the step's global sample ids, samples_set_digest and
                                      duplicate_samples
    tensors/step_NNNNNN.safetensors   at the requested steps: params/<name> (after the update)
                                      and grads/<name> (the reduced gradient), in the
                                      framework's own names and layouts; batch_stats/<name>
                                      (BatchNorm's running statistics) where the helper
                                      records them
    rng.jsonl                         with log_dropout: one line per step, replica and dropout
                                      site, in the run directory's format
                                      (common/run_dir/include/parity/common/rng_streams.h): the keep
                                      mask's size, kept count, digest and first 4,096 bits, the
                                      drop rate and, where the mask came from a jax.random key,
                                      the key's words

`parity import metrics LOG_DIR/metrics.jsonl --case CASE --map loss=loss ...` turns the
metrics into a run directory, and LOG_DIR/rng.jsonl into its RNG streams; the tensors keep the
framework's names for `parity import tensors`, which maps them onto parity's canonical names
(dense0.kernel, ...).

Plain Python 3.11 and NumPy; nothing else (Debian has no python3-safetensors, so safetensors
files are written here from the format's description).
"""

import json
import math
import os
import struct

import numpy as np

# 64-bit FNV-1a as common/base/src/digest.cpp computes it: for each byte, state ^= byte, then
# state *= prime, modulo 2^64. Published parameters: http://www.isthe.com/chongo/tech/comp/fnv/
FNV64_OFFSET_BASIS = 14695981039346656037
FNV64_PRIME = 1099511628211
_MASK64 = (1 << 64) - 1


def fnv1a64(data, state=FNV64_OFFSET_BASIS):
    """FNV-1a 64 of `data` (bytes), continuing from `state`."""
    for byte in data:
        state = ((state ^ byte) * FNV64_PRIME) & _MASK64
    return state


def _ids_as_int64(sample_ids):
    """Sample ids as a flat list of Python ints that fit an int64 (the C++ side's type)."""
    ids = [int(i) for i in np.asarray(sample_ids).reshape(-1).tolist()]
    for i in ids:
        if not -(1 << 63) <= i < (1 << 63):
            raise ValueError(f"sample id {i} does not fit in an int64")
    return ids


def digest_sample_ids(sample_ids):
    """digest_sample_ids of digest.cpp: FNV-1a 64 of the ids as little-endian int64, in order,
    printed as 16 lower-case hex digits."""
    ids = _ids_as_int64(sample_ids)
    # '<q' is little-endian two's complement int64, the bytes the C++ loop builds by shifting.
    return f"{fnv1a64(struct.pack(f'<{len(ids)}q', *ids)):016x}"


def digest_sample_set(sample_ids):
    """digest_sample_set of digest.cpp: the same digest of the ids sorted."""
    return digest_sample_ids(sorted(_ids_as_int64(sample_ids)))


def count_duplicates(sample_ids):
    """count_duplicates of digest.cpp: how many ids repeat an id earlier in the list."""
    ids = _ids_as_int64(sample_ids)
    return len(ids) - len(set(ids))


# ---- dropout masks (rng.jsonl) -----------------------------------------------------------------

# kMaskPrefixBits of common/run_dir/include/parity/common/rng_streams.h: how many of a mask's first
# elements the line carries as bits, what compare measures replica agreement on.
MASK_PREFIX_BITS = 4096


def summarise_mask(keep):
    """summarise_mask of common/run_dir/src/rng_streams.cpp: the mask (nonzero = kept) as one byte per
    element, 1 kept, 0 dropped, in row-major order; its size, kept count, FNV-1a 64 digest of
    those bytes (16 hex digits) and its first MASK_PREFIX_BITS elements packed eight per byte,
    the first element in the lowest bit, as hex."""
    elements = (np.asarray(keep) != 0).reshape(-1).astype(np.uint8)
    if elements.size == 0:
        raise ValueError("a dropout mask has at least one element; this one is empty")
    prefix = np.packbits(elements[:MASK_PREFIX_BITS], bitorder="little")
    return {"size": int(elements.size), "kept": int(elements.sum()),
            "digest": f"{fnv1a64(elements.tobytes()):016x}", "prefix": prefix.tobytes().hex()}


def dropout_draw_line(step, replica, site, rate, summary, key=None):
    """One rng.jsonl line (as a dict) for the mask `summary` (summarise_mask) that dropout site
    `site` (its module path, "Residual_1/Dropout_0") drew on `replica` at `step` with drop rate
    `rate`; `key`: the jax.random key's two uint32 words [hi, lo] (jax.random.key_data), or None
    for a generator without keys (torch's). Checks what the C++ reader would refuse."""
    step, replica, rate = int(step), int(replica), float(rate)
    if step < 0 or replica < 0:
        raise ValueError(f"step {step}, replica {replica}: both count from 0")
    if not isinstance(site, str) or not site:
        raise ValueError(f"site {site!r}: pass the dropout module's path, e.g. 'Dropout_0'")
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"site {site}: rate {rate} is outside [0, 1); pass the drop rate, not "
                         "the keep probability")
    line = {"step": step, "replica": replica, "site": site, "rate": rate}
    if key is not None:
        words = [int(word) for word in np.asarray(key).reshape(-1).tolist()]
        if len(words) != 2 or not all(0 <= word < (1 << 32) for word in words):
            raise ValueError(f"site {site}: key {words} is not two uint32 words [hi, lo]; pass "
                             "jax.random.key_data(key)")
        line["key"] = words
    line.update(summary)
    return line


def global_l2_norm(arrays):
    """The L2 norm of all elements of all arrays together, accumulated in float64 as ddp_ref's
    global_l2_norm (ddp_ref/src/trainer.cpp) does."""
    total = 0.0
    for array in arrays:
        values = np.asarray(array, dtype=np.float64)
        total += float(np.sum(values * values))
    return math.sqrt(total)


def json_number(value):
    """A finite float as itself; NaN and infinities as the strings run directories use for them
    (JSON has neither, and a diverging run must stay visible)."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


# ---- safetensors ------------------------------------------------------------------------------
# Format (huggingface/safetensors README): an 8-byte little-endian u64 N, N bytes of JSON
# mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the
# data that follows) plus an optional "__metadata__" string-to-string map, then the data. The
# tensors must tile the data exactly (common/tensors/src/safetensors.cpp refuses holes and overlaps),
# little-endian, row-major.

_SAFETENSORS_DTYPES = {
    "float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16",
    "int32": "I32", "int64": "I64", "uint32": "U32", "uint8": "U8", "bool": "BOOL",
}
_NUMPY_DTYPES = {code: name for name, code in _SAFETENSORS_DTYPES.items() if name != "bfloat16"}


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: array} to `path` atomically (temporary file, then rename), so a reader never
    sees half a file. bfloat16 arrays (ml_dtypes, what np.asarray gives for a JAX bf16 array)
    are written as BF16."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        code = _SAFETENSORS_DTYPES.get(array.dtype.name)
        if code is None:
            raise TypeError(f"tensor '{name}': dtype {array.dtype} has no safetensors code here; "
                            f"convert it to one of {', '.join(sorted(_SAFETENSORS_DTYPES))}")
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": code, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # The reference writer pads the header with spaces to a multiple of 8 so the data is aligned.
    text += b" " * (-len(text) % 8)
    temp_path = os.path.join(os.path.dirname(path) or ".", "." + os.path.basename(path) + ".tmp")
    with open(temp_path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for chunk in chunks:
            out.write(chunk)
    os.replace(temp_path, path)


def read_safetensors(path):
    """Reads a safetensors file into {name: numpy array} (BF16 is not supported here), checking
    what a truncated or foreign file would get wrong."""
    with open(path, "rb") as file:
        blob = file.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: {len(blob)} bytes, shorter than the 8-byte header length")
    (header_length,) = struct.unpack("<Q", blob[:8])
    if header_length > len(blob) - 8:
        raise ValueError(f"{path}: header length {header_length} runs past the end of the file")
    header = json.loads(blob[8:8 + header_length])
    data = memoryview(blob)[8 + header_length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _NUMPY_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor '{name}': dtype {entry['dtype']} not supported here")
        begin, end = entry["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor '{name}': data_offsets {[begin, end]} outside the "
                             f"{len(data)} data bytes")
        array = np.frombuffer(data[begin:end], dtype=np.dtype(dtype).newbyteorder("<"))
        tensors[name] = array.reshape(entry["shape"]).copy()
    return tensors


# ---- the log directory ------------------------------------------------------------------------

def resolve_record_steps(record_steps, steps=None):
    """Record steps as a set of step numbers; negative entries count from the end (-1 = the last
    step), as the case key train.record_steps does, and need `steps`."""
    resolved = set()
    for step in record_steps or ():
        step = int(step)
        if step < 0:
            if steps is None:
                raise ValueError(f"record step {step} counts from the end: pass steps=")
            step += int(steps)
        resolved.add(step)
    return resolved


class LogDirWriter:
    """Writes metrics.jsonl and tensors/ under `log_dir`. One per run; only the process that
    should write (rank 0, process 0) makes one."""

    def __init__(self, log_dir, record_steps=(), steps=None, overwrite=False):
        self.log_dir = os.fspath(log_dir)
        self.record_steps = resolve_record_steps(record_steps, steps)
        metrics_path = os.path.join(self.log_dir, "metrics.jsonl")
        if os.path.exists(metrics_path) and not overwrite:
            raise FileExistsError(f"{metrics_path} exists (an earlier run's log); pass "
                                  "overwrite=True to replace it")
        # An earlier run's masks must not be imported with this run's metrics.
        self._rng_path = os.path.join(self.log_dir, "rng.jsonl")
        if os.path.exists(self._rng_path):
            if not overwrite:
                raise FileExistsError(f"{self._rng_path} exists (an earlier run's log); pass "
                                      "overwrite=True to replace it")
            os.remove(self._rng_path)
        os.makedirs(os.path.join(self.log_dir, "tensors"), exist_ok=True)
        self._metrics = open(metrics_path, "w", encoding="utf-8")
        self._rng = None  # opened by the first write_dropout
        self._last_step = None

    def wants_tensors(self, step):
        return int(step) in self.record_steps

    def write_step(self, step, loss, *, replica_losses=(), grad_norm, param_norm, lr,
                   step_seconds=0.0, sample_ids=None):
        """One metrics.jsonl line, keys in the order the C++ writer uses, flushed at once so a
        killed run keeps every finished step."""
        step = int(step)
        if self._last_step is not None and step <= self._last_step:
            raise ValueError(f"step {step} after step {self._last_step}: steps must increase "
                             "(the run directory reader refuses anything else)")
        self._last_step = step
        line = {
            "step": step,
            "loss": json_number(loss),
            "replica_losses": [json_number(v) for v in replica_losses],
            "grad_norm": json_number(grad_norm),
            "param_norm": json_number(param_norm),
            "lr": json_number(lr),
            "step_seconds": json_number(step_seconds),
            # The reader requires the key; an empty digest means "not recorded" to compare.
            "samples_digest": "",
        }
        if sample_ids is not None:
            line["samples_digest"] = digest_sample_ids(sample_ids)
            line["samples_set_digest"] = digest_sample_set(sample_ids)
            line["duplicate_samples"] = count_duplicates(sample_ids)
        self._metrics.write(json.dumps(line, separators=(",", ":"), allow_nan=False) + "\n")
        self._metrics.flush()

    def write_dropout(self, line):
        """One rng.jsonl line (dropout_draw_line), flushed. `parity import metrics` requires
        every imported step to hold every replica at every site its first step has."""
        if self._rng is None:
            self._rng = open(self._rng_path, "w", encoding="utf-8")
        # Keys sorted and no spaces: the bytes nlohmann::json's dump() gives the C++ writer.
        self._rng.write(json.dumps(line, separators=(",", ":"), sort_keys=True) + "\n")
        self._rng.flush()

    def write_tensors(self, step, params, grads, metadata=None, batch_stats=None):
        """tensors/step_NNNNNN.safetensors with params/<name>, grads/<name> and
        batch_stats/<name> (model state: BatchNorm's running statistics) as given."""
        tensors = {f"params/{name}": value for name, value in params.items()}
        tensors.update({f"grads/{name}": value for name, value in grads.items()})
        tensors.update({f"batch_stats/{name}": value
                        for name, value in (batch_stats or {}).items()})
        path = os.path.join(self.log_dir, "tensors", f"step_{int(step):06d}.safetensors")
        write_safetensors(path, tensors, metadata)

    def close(self):
        self._metrics.close()
        if self._rng is not None:
            self._rng.close()
