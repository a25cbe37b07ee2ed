#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora, fuzz/corpus/<parser>/, from real files.

Run from anywhere: /usr/bin/python3 fuzz/make-seeds.py (Debian's python3 with python3-numpy).
The seeds are committed, so `make fuzz` needs neither Python nor numpy; rerun this after
changing a format's writer and commit what changes. Sources:
  tfrecord, tf_events  tests/data/tfevents (real SummaryWriter and FileWriter files, MIT: see the
                       licences there); the FileWriter file without its graph records, which
                       are most of its 171 kB and would only slow the fuzzer down
  npy, npz             numpy's own np.save / np.savez / np.savez_compressed
  safetensors          the byte layout of the huggingface/safetensors README, as parity writes it
  case_toml            cases/*.toml without their case.name (the file is fuzz.toml)
  fashion_mnist        IDX files as in Debian's dataset-fashion-mnist, two samples
  run_dir              the run.json / metrics.jsonl layout parity's producers write
  metrics_jsonl, _csv  logs shaped like what training scripts write
Multi-part inputs join their parts with SEPARATOR (fuzz_support.h, kPartSeparator).
"""

import gzip
import io
import json
import pathlib
import re
import struct
import zipfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
SEPARATOR = b"|parity-fuzz-part|"


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path: pathlib.Path) -> list:
    data = path.read_bytes()
    records, at = [], 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        records.append(data[at + 12 : at + 12 + length])
        at += 12 + length + 4
    return records


def frame(records: list) -> bytes:
    out = b""
    for record in records:
        length = struct.pack("<Q", len(record))
        out += length + struct.pack("<I", masked_crc32c(length))
        out += record + struct.pack("<I", masked_crc32c(record))
    return out


def write(parser: str, name: str, data: bytes) -> None:
    folder = CORPUS / parser
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def tensorboard_seeds() -> None:
    data = ROOT / "tests" / "data" / "tfevents"
    pytorch = next((data / "pytorch-summarywriter").glob("events.out.tfevents.*"))
    keras = next((data / "tf1-keras-filewriter").glob("events.out.tfevents.*"))
    pytorch_records = read_records(pytorch)
    # The graph_def and meta_graph_def events are the only records over 512 bytes; the rest are
    # file_version and scalar summaries.
    keras_records = [r for r in read_records(keras) if len(r) < 512]
    write("tfrecord", "pytorch-summarywriter", pytorch.read_bytes())
    write("tfrecord", "tf1-filewriter-scalars", frame(keras_records[:20]))
    write("tf_events", "pytorch-summarywriter", SEPARATOR.join(pytorch_records[:12]))
    write("tf_events", "tf1-filewriter-scalars", SEPARATOR.join(keras_records[:12]))
    # A TF2 / CLU tensor scalar: Event{step=3, summary{value{tag="loss", tensor{dtype=DT_FLOAT,
    # tensor_shape{}, float_val=0.5}}}}, and the same as tensor_content; a DT_HALF half_val.
    def value(tag: bytes, tensor: bytes) -> bytes:
        inner = b"\x0a" + bytes([len(tag)]) + tag + b"\x42" + bytes([len(tensor)]) + tensor
        return b"\x0a" + bytes([len(inner)]) + inner

    def event(summary_value: bytes) -> bytes:
        return (b"\x09" + struct.pack("<d", 1.6e9) + b"\x10\x03" + b"\x2a" +
                bytes([len(summary_value)]) + summary_value)

    float_val = b"\x08\x01\x12\x00\x2d" + struct.pack("<f", 0.5)
    content = b"\x08\x01\x12\x00\x22\x04" + struct.pack("<f", 0.25)
    shaped = b"\x08\x02\x12\x04\x12\x02\x08\x01\x32\x08" + struct.pack("<d", 2.0)
    half = b"\x08\x13\x12\x00\x68\x80\x78"
    int64 = b"\x08\x09\x12\x00\x50\x07"
    write("tf_events", "tensor-scalars", SEPARATOR.join(
        [pytorch_records[0]] + [event(value(b"loss", t)) for t in
                                (float_val, content, shaped, half, int64)]))


def metrics_seeds() -> None:
    write("metrics_jsonl", "losses",
          b'{"step": 0, "loss": 2.30, "lr": 0.001}\n{"step": 1, "loss": 2.21, "lr": 0.001}\n'
          b'{"step": 2, "loss": "NaN", "grad_norm": 0.4}\n\n'
          b'{"step": 3, "loss": "Infinity", "acc": -1e-3, "note": "text"}\n')
    write("metrics_jsonl", "nested", b'{"step": 7, "train/loss": 1.5, "x": [1, {"y": null}],'
          b' "ok": true}\r\n{"step": 8, "train/loss": -0.0}')
    write("metrics_csv", "losses",
          b"step,loss,lr,grad_norm\n0,2.30,0.001,0.41\n1,2.21,0.001,\n2,2.13,1e-3,0.55\n")
    write("metrics_csv", "quoted", b'"epoch","step","train, loss"\r\n0,0,"1.5"\r\n0,10,1.25\r\n'
          b"\n1,20,inf\n")


def tensor_seeds() -> None:
    arrays = {
        "f32": np.arange(6, dtype="<f4").reshape(2, 3),
        "f64-fortran": np.asfortranarray(np.linspace(0, 1, 6).reshape(3, 2)),
        "f16": np.array([1.5, -2.0], dtype="<f2"),
        "i64-scalar": np.array(7, dtype="<i8"),
        "i32-empty": np.zeros((0, 4), dtype="<i4"),
        "u8": np.array([[1, 2], [3, 4]], dtype="u1"),
        "bool": np.array([True, False, True]),
        "u32": np.array([1, 2**32 - 1], dtype="<u4"),
    }
    for name, array in arrays.items():
        out = io.BytesIO()
        np.save(out, array)
        write("npy", name, out.getvalue())
    # Header versions 2.0 and 3.0 (a 4-byte header length; 3.0 allows UTF-8).
    for version in ((2, 0), (3, 0)):
        out = io.BytesIO()
        np.lib.format.write_array(out, arrays["f32"], version=version)
        write("npy", f"f32-v{version[0]}", out.getvalue())

    # fuzz_npz's mode byte: 1 = the archive as it is; 0 = members (name, data, ...) that the
    # target zips itself, stored; 2 = the same deflated.
    out = io.BytesIO()
    np.savez(out, w=arrays["f32"], b=arrays["f16"], n=arrays["i64-scalar"])
    write("npz", "savez", b"\x01" + out.getvalue())
    out = io.BytesIO()
    np.savez_compressed(out, w=arrays["f64-fortran"], m=arrays["bool"])
    write("npz", "savez-compressed", b"\x01" + out.getvalue())
    # A member that is not an .npy file, beside a good one.
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("a.npy", npy_bytes(arrays["u8"]))
        archive.writestr("notes.txt", b"not a tensor")
    write("npz", "other-member", b"\x01" + out.getvalue())
    members = [b"w.npy", npy_bytes(arrays["f32"]), b"dense/b.npy", npy_bytes(arrays["u32"]),
               b"n.npy", npy_bytes(arrays["i64-scalar"])]
    write("npz", "members-stored", b"\x00" + SEPARATOR.join(members))
    write("npz", "members-deflated", b"\x02" + SEPARATOR.join(members))

    def safetensors(tensors: dict, metadata=None) -> bytes:
        header, data = {}, b""
        if metadata is not None:
            header["__metadata__"] = metadata
        for name, (dtype, array) in tensors.items():
            raw = array.tobytes()
            header[name] = {"dtype": dtype, "shape": list(array.shape),
                            "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * ((8 - len(text) % 8) % 8)
        return struct.pack("<Q", len(text)) + text + data

    write("safetensors", "params", safetensors(
        {"dense0.w": ("F32", arrays["f32"]), "dense0.b": ("F32", np.zeros(3, "<f4")),
         "step": ("I64", arrays["i64-scalar"])}, {"step": "0", "producer": "pmap_engine"}))
    write("safetensors", "dtypes", safetensors(
        {"h": ("F16", arrays["f16"]), "bf": ("BF16", np.array([0x3F80, 0x4000], "<u2")),
         "d": ("F64", np.ones(2)), "i": ("I32", np.array([-1], "<i4")),
         "u": ("U32", arrays["u32"]), "b": ("U8", arrays["u8"]), "m": ("BOOL", arrays["bool"]),
         "e": ("F32", np.zeros((0, 2), "<f4"))}))


def npy_bytes(array) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def case_seeds() -> None:
    for name in ("mlp2-fmnist", "linear1024-mse", "mlp4-1024", "s7-gradient-accumulation",
                 "s8-mixed-precision", "s9-multi-process", "p6-batch-65-on-8",
                 "p2-psum-not-pmean"):
        text = (ROOT / "cases" / f"{name}.toml").read_text()
        text = re.sub(r'(?m)^name = ".*"\n', "", text)
        write("case_toml", name, text.encode())
    base = (CORPUS / "case_toml" / "mlp2-fmnist").read_bytes()
    write("case_toml", "mlp2-fmnist-overrides", SEPARATOR.join(
        [base, b"train.lr=3e-4", b"train.optimizer=sgd", b"parallel.replicas=4",
         b"train.record_steps=[0, 5, -1]"]))


def fashion_mnist_seeds() -> None:
    count = 2
    images = struct.pack(">IIII", 0x803, count, 28, 28) + bytes(range(256)) * 6 + bytes(32)
    labels = struct.pack(">II", 0x801, count) + bytes([3, 9])
    # Mode byte 0: the target gzips the parts (train split); 2: the test split; 1: the parts are
    # written as they are, here already gzip'd.
    write("fashion_mnist", "train-two-samples", b"\x00" + images + SEPARATOR + labels)
    write("fashion_mnist", "test-two-samples", b"\x02" + images + SEPARATOR + labels)
    write("fashion_mnist", "raw-gzip", b"\x01" + gzip.compress(images, mtime=0) + SEPARATOR +
          gzip.compress(labels, mtime=0))


def run_dir_seeds() -> None:
    info = {
        "format": "parity-run", "schema_version": 1, "producer": "pmap_engine",
        "status": "complete", "failure": "",
        "case": {"name": "mlp2-fmnist", "hash": "ab200e9036929d7c",
                 "toml": "[case]\nname = \"mlp2-fmnist\"\n\n[train]\nsteps = 3\n"},
        "replicas": 2, "processes": 1, "dtype": "f32", "optimizer": "adam", "seed": 0,
        "versions": {"parity": "0.1.0", "pmap_engine": "0.1.0"}, "host": "fuzz-seed",
        "started_at": "2026-01-01T00:00:00Z",
        "timings": {"setup_seconds": 0.5, "first_step_seconds": 0.04,
                    "steady_step_median_seconds": 0.016, "steady_step_spread_seconds": 0.002,
                    "steady_steps": 2},
        "memory": {"peak_bytes_per_replica": [4931584, 4931584],
                   "method": "counting CPU allocator (thread ranks)"},
        "results": {"final_loss": 2.134170949459076, "test_accuracy": "NaN"},
    }
    steps = [
        {"step": 0, "loss": 2.3027521669864655, "replica_losses": [2.3031, 2.3022],
         "grad_norm": 0.41480544840424244, "param_norm": 4.536561935867473, "lr": 0.001,
         "step_seconds": 0.041623659, "samples_digest": "e5bcfb480aa8352c"},
        {"step": 1, "loss": 2.218739151954651, "replica_losses": [2.2186, 2.2297],
         "grad_norm": 0.43529470636852846, "param_norm": 4.588693039588955, "lr": 0.001,
         "step_seconds": 0.016649365, "samples_digest": "6fce9c31ab3e15e2",
         "samples_set_digest": "0123456789abcdef", "duplicate_samples": 0,
         "replica_samples": ["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"]},
        {"step": 2, "loss": "Infinity", "replica_losses": ["NaN", 1.0], "grad_norm": 0.5,
         "param_norm": 4.6, "lr": 0.001, "step_seconds": 0.019, "samples_digest": "4d9ff2c1de0127ce"},
    ]
    run_json = json.dumps(info, indent=2).encode() + b"\n"
    metrics = b"".join(json.dumps(s, separators=(",", ":")).encode() + b"\n" for s in steps)
    write("run_dir", "complete", run_json + SEPARATOR + metrics)
    incomplete = dict(info, status="incomplete", failure="rank 2 at step 3: injected fault")
    write("run_dir", "incomplete-cut-line",
          json.dumps(incomplete).encode() + SEPARATOR + metrics + b'{"step":3,"loss":2.0')


def main() -> None:
    # Overwrites the seeds written here and leaves the others: regression-* are the fuzz
    # findings' inputs, kept by hand so that every `make fuzz` replays them under the sanitizers.
    tensorboard_seeds()
    metrics_seeds()
    tensor_seeds()
    case_seeds()
    fashion_mnist_seeds()
    run_dir_seeds()
    for folder in sorted(CORPUS.iterdir()):
        print(f"{folder.relative_to(ROOT)}: {len(list(folder.iterdir()))} seeds")


if __name__ == "__main__":
    main()
