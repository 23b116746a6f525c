"""The encoder's ONNX Runtime backend (`embedding.backend = "onnx"`): the model's transformer and pooling exported
locally from its own weights, optionally with int8 weights, cached on disk, and run by ONNX Runtime."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Sequence

import numpy as np

from kgr.errors import KgrError

INSTALL_HINT = "pip install 'kgr[onnx]'"
# Bumped when the exported graph or its quantization changes: the cache keys name it, so old files are not reused.
EXPORT_VERSION = 1
ONNX_OPSET = 17
MODEL_FILE = "model.onnx"


def require_onnxruntime():
    """The onnxruntime module, or a KgrError saying how to install it."""
    try:
        import onnxruntime
    except ImportError:
        raise KgrError(f"embedding.backend = \"onnx\" needs onnxruntime, which is not installed: {INSTALL_HINT}") \
            from None
    return onnxruntime


def cache_root() -> Path:
    """Where exported models are kept: $KGR_CACHE_DIR, else $XDG_CACHE_HOME/kgr, else ~/.cache/kgr."""
    if os.environ.get("KGR_CACHE_DIR"):
        return Path(os.environ["KGR_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "kgr"


def pooling_mode(model) -> str:
    """"mean" or "cls": the pooling of a SentenceTransformer made of a transformer, a pooling and at most a
    normalization (what the export reproduces); a KgrError for any other model."""
    names = [type(module).__name__ for module in model]
    mode = getattr(model[1], "pooling_mode", None) if len(names) > 1 else None
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]) or \
            mode not in ("mean", "cls") or not getattr(model[1], "include_prompt", True):
        raise KgrError(f"embedding.backend = \"onnx\" supports models of a transformer and mean or CLS pooling; "
                       f"this one is {' + '.join(names)}")
    return mode


def int8_dot_products() -> bool:
    """Whether this CPU has VNNI int8 dot products (AVX-512 VNNI or AVX-VNNI), as Linux's /proc/cpuinfo lists them;
    False where it cannot tell."""
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("avx512_vnni", "avx_vnni"))


def export_key(model, name: str, model_path: str, quantize: str) -> str:
    """The cache folder's name for `model` (`name`, loaded from `model_path`) exported with `quantize`: it changes with
    the weights' files, the export code and the libraries that write the graph."""
    import onnxruntime
    import torch
    import transformers

    weights = []
    folder = Path(model_path)
    if folder.is_dir():
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in (".safetensors", ".bin", ".json", ".txt"):
                stat = path.stat()
                weights.append([str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns])
    made_by = [EXPORT_VERSION, ONNX_OPSET, str(folder.resolve()) if folder.is_dir() else model_path, weights,
               torch.__version__, transformers.__version__, onnxruntime.__version__, quantize,
               quantize == "int8" and not int8_dot_products(),  # `quantize_int8`'s reduced range
               int(model.max_seq_length or 0)]
    digest = hashlib.blake2b(json.dumps(made_by).encode("utf-8"), digest_size=8).hexdigest()
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in name.rsplit("/", 1)[-1])[:40]
    return f"{stem}-{quantize}-{digest}"


def exported_model(model, name: str, model_path: str, quantize: str, root: Path | None = None) -> Path:
    """The ONNX file of `model`'s transformer and pooling (int8 weights when `quantize` is "int8"): from the cache, or
    exported now and written there whole (a temporary name renamed at the end: a kill never leaves half a file)."""
    folder = (root or cache_root()) / "onnx" / export_key(model, name, model_path, quantize)
    path = folder / MODEL_FILE
    if path.exists():
        return path
    require_onnxruntime()
    folder.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex
    plain = folder / f".{tag}.fp32.tmp"
    final = folder / f".{tag}.tmp"
    try:
        export(model, plain)
        if quantize == "int8":
            quantize_int8(plain, final)
        else:
            os.replace(plain, final)
        os.replace(final, path)
    finally:
        for leftover in (plain, final):
            with suppress(OSError):
                leftover.unlink(missing_ok=True)
    return path


def export(model, path: Path) -> None:
    """Write `model`'s transformer followed by its pooling as one ONNX graph: (input_ids, attention_mask) -> pooled
    float32 vectors (not normalized), batch and length dynamic."""
    import torch

    mode = pooling_mode(model)
    transformer = model[0].auto_model
    token_types = "token_type_ids" in getattr(model.tokenizer, "model_input_names", ())

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask):
            extra = {"token_type_ids": torch.zeros_like(input_ids)} if token_types else {}
            hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
            if mode == "cls":
                return hidden[:, 0]
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)

    ids = torch.tensor([[101, 2054, 2003, 102], [101, 2054, 102, 0]])
    module = Pooled().eval()
    import warnings

    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's notes on transformers' tracing
        # the TorchScript exporter: the dynamo one needs onnxscript and re-traces the model per release
        torch.onnx.export(module, (ids, (ids > 0).long()), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["vector"], opset_version=ONNX_OPSET, dynamo=False,
                          dynamic_axes={"input_ids": {0: "rows", 1: "tokens"},
                                        "attention_mask": {0: "rows", 1: "tokens"}, "vector": {0: "rows"}})


def quantize_int8(source: Path, target: Path) -> None:
    """Dynamic int8 quantization of `source`'s weight matrices, per output channel (per-tensor scales moved vectors to
    cosine 0.96 on average, 0.89 at worst; per channel 0.992 / 0.98: docs/decisions.md). Without VNNI, weights use 7
    bits (onnxruntime's advice: its AVX2 kernels' 16-bit sums of u8 x s8 products may saturate at 8 bits; on a VNNI
    CPU 7 bits cost 0.001 of mean cosine)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # its pre-processing advice
    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     reduce_range=not int8_dot_products())


class OnnxModel:
    """An exported model in an ONNX Runtime session, with the SentenceTransformer's tokenizer and window."""

    def __init__(self, model, path: Path, threads: int):
        """`threads`: the session's intra-op threads, 0 = ONNX Runtime's default (one per core)."""
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(threads, 0)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = model.tokenizer
        self.max_length = int(model.max_seq_length or self.tokenizer.model_max_length)
        self.pad_id = int(self.tokenizer.pad_token_id or 0)
        self.dimension = int(model.get_embedding_dimension())

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Unit-length float32 vectors of `texts`, in their order: tokenized (cut to the window), in batches of
        `batch_size` texts of like token length (the order depends on the texts alone, so the batches do too)."""
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        lengths = np.fromiter((len(each) for each in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(ids), self.dimension), dtype=np.float32)
        for start in range(0, len(order), max(batch_size, 1)):
            rows = order[start:start + batch_size]
            width = int(lengths[rows].max())
            input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for row, index in enumerate(rows):
                input_ids[row, :lengths[index]] = ids[index]
                mask[row, :lengths[index]] = 1
            out[rows] = self.session.run(None, {"input_ids": input_ids, "attention_mask": mask})[0]
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
