"""A project whose vectors live on S3-compatible object storage (`storage.vectors_uri`), against a moto server this
module starts on 127.0.0.1 (a free port) and stops: `kgr ingest --engine ray` into it and `kgr retrieve` from it
give the local project's records; credentials never reach the project's files; a bad URI or an unreachable store is
one line and a non-zero exit; an ingest that fails leaves the previous state current. Skipped only without moto."""

from __future__ import annotations

import json
import socket
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from conftest import untimed, vectors

from kgr import api
from kgr.config import ConfigError, load_config
from kgr.errors import ExitStatus, KgrError
from kgr.ingest import stage
from kgr.objectstore import ObjectFolder, check_uri, storage_options
from kgr.project import STORAGE_ID_FILE, VECTORS_DIR, Project

ROOT = Path(__file__).resolve().parent.parent
METAQA = ROOT / "fixtures" / "metaqa"
BUCKET = "kgr-test"
KEY_ID, SECRET = "AKIAKGRTESTKEY0001", "kgr-test-secret-0123456789abcdef"


# -- URIs and options, no server ------------------------------------------------------------------------------------
def test_a_vectors_uri_is_s3_bucket_and_prefix_without_credentials():
    assert check_uri("s3://my-bucket/kgr/movies/") == "s3://my-bucket/kgr/movies"
    assert check_uri("s3://my-bucket") == "s3://my-bucket"
    for bad in ("file:///tmp/x", "s3://", "s3://My_Bucket/x", "s3://key:secret@bucket/x", "s3://bucket/x?secret=1"):
        with pytest.raises(KgrError, match="expected s3://BUCKET/PREFIX") as caught:
            check_uri(bad)
        assert "secret" not in caught.value.message.split("expected")[0]


def test_a_bad_vectors_uri_is_a_setting_error_naming_the_setting():
    with pytest.raises(ConfigError, match=r"^option storage.vectors_uri: the URI given: expected s3://BUCKET"):
        load_config(None, {"storage.vectors_uri": "s3://key:secret@bucket/x"}, environ={})
    assert load_config(None, {"storage.vectors_uri": "s3://bucket/p/"}, environ={}).storage.vectors_uri == \
        "s3://bucket/p"


def test_storage_options_come_from_the_aws_environment_and_allow_http_only_for_an_http_endpoint():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_DEFAULT_REGION": "eu-west-1", "HOME": "/root"}
    assert storage_options(env) == {"aws_endpoint": "http://127.0.0.1:9000", "aws_access_key_id": "id",
                                    "aws_secret_access_key": "s", "aws_region": "eu-west-1", "allow_http": "true"}
    assert storage_options({"AWS_ENDPOINT_URL": "https://s3.example.com"}) == {"aws_endpoint": "https://s3.example.com"}


# -- against a local S3 server ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3_endpoint():
    """A moto S3 server on 127.0.0.1 with one bucket, and the AWS_* environment pointing at it (for the module)."""
    server_module = pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install "
                                                              "'kgr[test]'): no local S3 server to test against")
    import boto3

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_REGION": "us-east-1"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield endpoint
    server.stop()


@pytest.fixture(scope="module")
def ray_on_s3(s3_endpoint, ray_instance):
    """Ray started after the AWS_* environment is set: its workers read the vectors from the S3 server too."""
    return ray_instance


def records(root: Path, questions: Path, **options) -> list[dict]:
    return [untimed(asdict(r)) for r in api.retrieve(root, questions, run="compare", **options)]


def generations(root: Path) -> list[ObjectFolder]:
    with Project.open(root) as project:
        return project.generations(VECTORS_DIR)


def files_hold(root: Path, text: str) -> list[str]:
    """The files under `root` whose bytes contain `text`."""
    return [str(p) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.ray
def test_an_s3_project_ingested_on_ray_retrieves_the_local_projects_records(ray_on_s3, run_kgr, metaqa_project,
                                                                           tmp_path):
    root = tmp_path / "s3-project"
    uri = f"s3://{BUCKET}/projects"
    ingest = run_kgr("ingest", root, METAQA / "kb.txt", "--schema", METAQA / "schema.toml", "--engine", "ray",
                     "--set", f"storage.vectors_uri={uri}", "--set", "ray.workers=2")
    assert ingest.exit_code == 0, ingest.stderr
    assert run_kgr("reach", root).exit_code == 0

    with Project.open(root) as project:
        folder = project.artifact("ingest", "vectors")
    storage_id = (root / STORAGE_ID_FILE).read_text(encoding="utf-8")
    assert isinstance(folder, ObjectFolder) and str(folder).startswith(f"{uri}/{storage_id}/vectors/")
    assert not (root / VECTORS_DIR).exists()  # nothing of the vectors is kept locally
    ours, theirs = vectors(root), vectors(metaqa_project)
    for name in ours:  # the local engine's vectors, bit for bit: same parts, same CPU (test_ray_engine)
        assert np.array_equal(ours[name], theirs[name]), name

    expected = records(metaqa_project, METAQA / "qa_2hop.txt")
    assert records(root, METAQA / "qa_2hop.txt") == expected
    on_ray = records(root, METAQA / "qa_2hop.txt", engine="ray", workers=2)  # workers read the vectors from S3
    assert on_ray == expected
    retrieve = run_kgr("retrieve", root, "--questions", METAQA / "qa_2hop.txt", "--out", tmp_path / "out.jsonl")
    assert retrieve.exit_code == 0, retrieve.stderr
    assert [untimed(json.loads(line)) for line in (tmp_path / "out.jsonl").read_text().splitlines()] == expected

    # the credentials are in no file of the project, in no output; only the URI is recorded
    assert files_hold(root, SECRET) == [] and files_hold(root, KEY_ID) == []
    for result in (ingest, retrieve):
        assert SECRET not in result.stdout + result.stderr
    assert files_hold(root, uri)  # kgr.toml and the manifest name where the vectors are


def test_an_ingest_that_fails_leaves_the_previous_s3_state_current_and_a_rerun_prunes_its_leftovers(
        s3_endpoint, tmp_path, monkeypatch):
    kb = tmp_path / "kb.txt"
    lines = (METAQA / "kb.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    kb.write_text("".join(lines[:30]), encoding="utf-8")
    root = tmp_path / "project"
    settings = {"storage.vectors_uri": f"s3://{BUCKET}/failing"}
    api.ingest(root, [kb], settings=settings)
    [first] = generations(root)
    before = vectors(root)

    written = stage.write_vector_table

    def fail_on_relationships(directory, name, *args, **kwargs):
        if name == "relationships":
            raise KgrError("disk gone")
        return written(directory, name, *args, **kwargs)

    kb.write_text("".join(lines[:60]), encoding="utf-8")
    monkeypatch.setattr(stage, "write_vector_table", fail_on_relationships)
    with pytest.raises(KgrError, match="disk gone"):
        api.ingest(root, [kb], mode="replace", settings=settings)
    with Project.open(root) as project:
        assert project.artifact("ingest", "vectors") == first
        assert project.last_run("ingest").counts["relationships"] == 30
    assert all(np.array_equal(a, b) for a, b in zip(vectors(root).values(), before.values()))
    assert len(generations(root)) == 2  # the failed run's folder, kept for its vectors (reused by the rerun)

    monkeypatch.undo()
    report = api.ingest(root, [kb], mode="replace", settings=settings)
    assert report.counts["relationships"] == 60
    [current] = generations(root)
    assert current != first
    with Project.open(root) as project:
        assert project.artifact("ingest", "vectors") == current


def test_an_unreachable_store_or_a_missing_bucket_is_one_line_and_leaves_no_project(run_kgr, s3_endpoint, tmp_path,
                                                                                   monkeypatch):
    kb = METAQA / "kb.txt"
    missing = run_kgr("ingest", tmp_path / "a", kb, "--set", "storage.vectors_uri=s3://no-such-bucket/p")
    assert missing.exit_code == ExitStatus.ERROR
    assert missing.stderr.strip().splitlines() == [
        f"kgr: error: s3://no-such-bucket: no such bucket at the object store ({s3_endpoint})"]
    assert not (tmp_path / "a").exists()

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed)
    unreachable = run_kgr("ingest", tmp_path / "b", kb, "--set", f"storage.vectors_uri=s3://{BUCKET}/p")
    assert unreachable.exit_code == ExitStatus.ERROR
    [line] = unreachable.stderr.strip().splitlines()
    assert line.startswith(f"kgr: error: s3://{BUCKET}: the object store at {closed} failed to look it up: ")
    assert SECRET not in line
    assert not (tmp_path / "b").exists()

    bad = run_kgr("ingest", tmp_path / "c", kb, "--set", f"storage.vectors_uri=s3://{KEY_ID}:{SECRET}@bucket/p")
    assert bad.exit_code == ExitStatus.USAGE
    assert SECRET not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
