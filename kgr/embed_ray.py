"""The Ray engine of an ingest (`embedding.engine = "ray"`): its parts of texts encoded by a pool of encoder actors."""

from __future__ import annotations

import logging
import os
import re
import socket
import time
import warnings
from typing import Iterator, Sequence

import numpy as np

from kgr.embed import CHECKPOINT_BATCHES, Encoder
from kgr.errors import KgrError

INSTALL_HINT = "pip install 'kgr[ray]'"


def require_ray():
    """The `ray` module with Ray Data, or a one-line KgrError saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401  (Ray Data is the `data` extra of ray)
    except ImportError:
        raise KgrError(f"embedding.engine = \"ray\" needs Ray Data, which is not installed: {INSTALL_HINT}") from None
    return ray


class EncoderActor:
    """One Ray Data actor: loads the model once, then encodes whole parts, one per call."""

    # `[embedding]` settings (model, batch_size, threads, precision, backend, quantize), set on the subclass
    # `with_settings` makes
    settings: tuple = ()

    def __init__(self):
        self.encoder = Encoder(*self.settings)
        _ = self.encoder.model  # loaded now, once per actor, not inside the first part's time
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    def __call__(self, batch):
        """`batch`: rows (part, texts); returns rows (part, vectors flattened, seconds, worker)."""
        import pyarrow as pa

        parts, vectors, seconds = [], [], []
        for part, texts in zip(batch.column("part").to_pylist(), batch.column("texts").to_pylist()):
            began = time.perf_counter()
            vectors.append(self.encoder.encode(texts).astype(np.float32, copy=False).ravel())
            seconds.append(time.perf_counter() - began)
            parts.append(part)
        return pa.table({
            "part": pa.array(parts, pa.int64()),
            "vectors": pa.array(vectors, type=pa.list_(pa.float32())),
            "seconds": pa.array(seconds, pa.float64()),
            "worker": pa.array([self.worker] * len(parts), pa.string()),
        })


class RayEngine:
    """Encodes an ingest's parts on a Ray cluster (`[ray]` settings): a Ray Dataset of parts, `map_batches` over a
    pool of `EncoderActor`s, results streamed back in part order as they finish."""

    def __init__(self, config, encoder: Encoder, actor: type = EncoderActor):
        """Actors encode as `encoder` does (its model, batch size and threads; `embedding.precision` as configured, so
        "auto" is each actor's CPU's choice); `actor`: the actor class (a test swaps in one that fails)."""
        require_ray()
        self.encoder_settings = (encoder.model_name, encoder.batch_size, encoder.threads, config.embedding.precision,
                                 encoder.backend, encoder.quantize)
        self.settings = config.ray
        self.actor = actor
        self.part_size = config.ray.batch_size or max(encoder.batch_size, 1) * CHECKPOINT_BATCHES
        self.encode_seconds = 0.0  # summed over the actors' calls
        self.seconds_by_worker: dict[str, float] = {}
        self.texts_by_worker: dict[str, int] = {}

    def encode_parts(self, parts: Sequence[Sequence[str]]) -> Iterator[np.ndarray]:
        """Each part's vectors, in order, as the actors finish them (no Ray is started when there is nothing to
        encode). A failing actor stops the stream with a KgrError; nothing is retried."""
        if not parts:
            return
        ray = require_ray()
        started = connect(ray, self.settings.address)
        try:
            yield from self._stream(ray, parts)
        finally:
            if started:
                ray.shutdown()

    def _stream(self, ray, parts: Sequence[Sequence[str]]) -> Iterator[np.ndarray]:
        import pyarrow as pa

        cpus = max(self.encoder_settings[2], 1)
        workers = self.settings.workers or max(int(ray.cluster_resources().get("CPU", 1) // cpus), 1)
        # one block per part: each part is one actor call, so its vectors are the ones the local engine gives it
        blocks = [pa.table({"part": pa.array([index], pa.int64()),
                            "texts": pa.array([list(texts)], pa.list_(pa.string()))}) for index, texts in enumerate(parts)]
        # the settings ride on the class (pickled with it), not as constructor arguments in the object store
        actor = type(self.actor.__name__, (self.actor,), {"settings": self.encoder_settings})
        dataset = ray.data.from_arrow(blocks).map_batches(
            actor, batch_size=1, batch_format="pyarrow", num_cpus=cpus,
            compute=ray.data.ActorPoolStrategy(size=min(workers, len(parts))),
        )
        done: dict[int, np.ndarray] = {}
        wanted = 0
        try:
            for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
                for part, flat, seconds, worker in zip(*(batch.column(c).to_pylist()
                                                         for c in ("part", "vectors", "seconds", "worker"))):
                    done[part] = np.asarray(flat, dtype=np.float32).reshape(len(parts[part]), -1)
                    self.encode_seconds += seconds
                    self.seconds_by_worker[worker] = self.seconds_by_worker.get(worker, 0.0) + seconds
                    self.texts_by_worker[worker] = self.texts_by_worker.get(worker, 0) + len(parts[part])
                while wanted in done:
                    yield done.pop(wanted)
                    wanted += 1
        except ray.exceptions.RayError as exc:
            raise KgrError(f"encoding on Ray failed: {first_line(exc)}") from None
        if wanted != len(parts):
            raise KgrError(f"encoding on Ray failed: {len(parts) - wanted} of {len(parts)} parts came back missing")


def connect(ray, address: str) -> bool:
    """Join the Ray at `address`, or start a private one on this machine when it is "" (unless this process already
    joined one); return whether this call started or joined it (then the caller shuts it down)."""
    # Ray Data logs every execution plan and draws progress bars (and warns that they are off): kgr draws its own;
    # a failure reaches kgr as an exception, so only errors are logged
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    ray.data.DataContext.get_current().enable_progress_bars = False
    if ray.is_initialized():
        return False
    options = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    with warnings.catch_warnings():
        # lancedb warns of any fork after it ran; Ray's processes fork only to exec at once
        warnings.filterwarnings("ignore", message="lancedb fork support", category=RuntimeWarning)
        # "" starts a private instance (Ray 2.60 binds it to the machine's address; its token authentication guards it)
        ray.init(address=address or None, **options)
    return True


def first_line(exc: BaseException) -> str:
    """A Ray error's root cause in one line: the first "Name: message" line of its text (the exception the actor
    raised, before Ray's own wrappers), else its last line."""
    lines = [line.rstrip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        found = re.match(r"([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): (.*)", line)
        if found:
            return f"{found.group(1).rsplit('.', 1)[-1]}: {found.group(2)}"
    return lines[-1].strip() if lines else type(exc).__name__
