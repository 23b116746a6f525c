"""A project with its vectors on S3-compatible storage vs a local one (issue #38 item 3), on a local moto server.

    python bench/objectstore.py                       # the MetaQA fixture slice, each layout twice
    python bench/objectstore.py --kb fixtures/metaqa/kb.txt --repeat 3

Starts a moto S3 server on 127.0.0.1 (a free port; `pip install 'moto[server]'`), then for each round runs, as child
processes with the AWS_* environment pointing at it: `kgr ingest` into a fresh local project, the same into a
project with `storage.vectors_uri = s3://kgr-bench/ROUND`, and the same with `--engine ray` (a private Ray, so its
wall time includes Ray's start); then `kgr reach` and `kgr retrieve --questions QA --out F.jsonl` on each. Reported:
wall seconds of each command, the encoder's seconds, and whether each S3 project's records equal the local one's
(timings removed). The server is in this process: its request handling shares the 2 cores with kgr. Output:
bench/out/objectstore.json and a markdown table on stdout (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUCKET = "kgr-bench"


def start_server() -> tuple[object, str]:
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_REGION": "us-east-1"})
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    return server, endpoint


def kgr(*args: str) -> tuple[float, str]:
    """Run `kgr ARGS` as a child process; its wall seconds and stdout (exit on failure)."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kgr", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kgr {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return time.perf_counter() - began, done.stdout


def untimed(value):
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in ("latency_ms", "timings_ms")}
    return [untimed(v) for v in value] if isinstance(value, list) else value


def run_layout(project: Path, kb: Path, schema: Path, questions: Path, settings: list[str]) -> dict:
    shutil.rmtree(project, ignore_errors=True)
    sets = [arg for setting in settings for arg in ("--set", setting)]
    ingest_s, report = kgr("ingest", str(project), str(kb), "--schema", str(schema), "--json", *sets)
    reach_s, _ = kgr("reach", str(project))
    out = project.with_suffix(".jsonl")
    retrieve_s, _ = kgr("retrieve", str(project), "--questions", str(questions), "--out", str(out), "-q")
    records = [untimed(json.loads(line)) for line in out.read_text(encoding="utf-8").splitlines()]
    return {"settings": settings, "ingest_s": round(ingest_s, 1), "encoder_s": json.loads(report)["seconds"]["encoder"],
            "reach_s": round(reach_s, 1), "retrieve_s": round(retrieve_s, 1), "records": records,
            "load": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "fixtures/metaqa/kb.txt")
    parser.add_argument("--schema", type=Path, default=ROOT / "fixtures/metaqa/schema.toml")
    parser.add_argument("--questions", type=Path, default=ROOT / "fixtures/metaqa/qa_2hop.txt")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/objectstore")
    args = parser.parse_args()
    server, endpoint = start_server()
    rows = []
    try:
        for round_ in range(args.repeat):
            layouts = {"local": [], "s3": [f"storage.vectors_uri=s3://{BUCKET}/r{round_}"],
                       "s3, --engine ray": [f"storage.vectors_uri=s3://{BUCKET}/r{round_}-ray", "embedding.engine=ray"]}
            results = {name: run_layout(args.out / f"{round_}-{i}", args.kb, args.schema, args.questions, settings)
                       for i, (name, settings) in enumerate(layouts.items())}
            for name, result in results.items():
                result["same_records"] = result["records"] == results["local"]["records"]
                rows.append({"round": round_, "layout": name,
                             **{k: v for k, v in result.items() if k != "records"},
                             "questions": len(result["records"])})
    finally:
        server.stop()
    (ROOT / "bench/out").mkdir(exist_ok=True)
    (ROOT / "bench/out/objectstore.json").write_text(json.dumps({"endpoint": endpoint, "rows": rows}, indent=1))
    print("| round | vectors | ingest s | encoder s | reach s | retrieve s (questions) | records = local | load |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['round']} | {row['layout']} | {row['ingest_s']} | {row['encoder_s']} | {row['reach_s']} | "
              f"{row['retrieve_s']} ({row['questions']}) | {row['same_records']} | {row['load']} |")


if __name__ == "__main__":
    main()
