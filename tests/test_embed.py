"""`kgr.embed`: the Encoder with the packaged model (a question-sized batch takes the direct path, its texts packed
into rows, and gets the same vectors as SentenceTransformer.encode), its precision, and the per-question memo of text
vectors (TextVectors) over a fake encoder that records its calls."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import kgr.embed
from conftest import RecordingEncoder, SettledEncoder
from kgr.embed import (CALL_SLOTS, SMALL_BATCH, Encoder, PhraseCache, TextVectors, lean_bert, length_groups,
                       pack_rows, packing_pooling, resolve_precision, verified)


def test_small_and_large_batches_give_sentence_transformers_vectors(monkeypatch):
    encoder = Encoder(batch_size=256, threads=1, precision="float32")
    texts = ["who directed [Dark Harbor]", "uncle", "a long passage about harbours " * 60, ""]
    reference = encoder.model.encode(texts, batch_size=256, normalize_embeddings=True, convert_to_numpy=True)
    direct = []
    monkeypatch.setattr(encoder, "_forward", lambda batch, forward=encoder._forward: direct.append(batch) or forward(batch))
    small = encoder.encode(texts)
    assert direct == [texts] and small.dtype == np.float32
    np.testing.assert_allclose(small, reference, atol=1e-6)
    many = [f"text number {i}" for i in range(SMALL_BATCH + 1)]
    large = encoder.encode(many)
    assert direct == [texts]  # more than SMALL_BATCH texts: SentenceTransformer.encode
    np.testing.assert_allclose(np.linalg.norm(large, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(many[:3]), large[:3], atol=1e-6)


def test_bfloat16_vectors_are_unit_float32_close_to_float32s():
    texts = ["who directed [Dark Harbor]", "uncle", "a long passage about harbours " * 60]
    many = [f"text number {i}" for i in range(SMALL_BATCH + 1)]
    exact, half = Encoder(precision="float32"), Encoder(precision="bfloat16")
    for batch in (texts, many):  # the direct path and SentenceTransformer.encode's
        vectors = half.encode(batch)
        assert vectors.dtype == np.float32 and half.precision == "bfloat16"
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        assert ((vectors * exact.encode(batch)).sum(axis=1) > 0.99).all()
    np.testing.assert_allclose(half.encode(many[:3]), half.encode(many)[:3], atol=0.01)


def test_texts_packed_to_a_row_get_the_vectors_they_get_alone():
    encoder = Encoder(precision="float32")
    texts = ["who directed [Dark Harbor]", "uncle", "born", "the director of the film that won", "a b c d e f g h"]
    assert packing_pooling(encoder.model) == "mean"  # the packaged MiniLM: BERT, mean pooling, normalization
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(encoder.encode(texts), alone, atol=1e-6)


def test_the_lean_forward_gives_exactly_the_models_own_vectors():
    # both precisions, packed rows of several texts and padding: not close, equal (records must not move with it)
    texts = ["who directed [Dark Harbor]", "uncle", "born", "the director of the film that won", "a b c d e f g h",
             "Étienne De Crécy (1944 film)"]
    for precision in ("float32", "bfloat16"):
        encoder = Encoder(precision=precision)
        encoder.model
        assert encoder._bert is not None  # the packaged MiniLM passes the check at load
        lean = encoder.encode(texts)
        encoder._bert = None  # transformers' own forward
        assert np.array_equal(lean, encoder.encode(texts))


def test_a_lean_forward_that_computes_differently_is_not_used():
    encoder = Encoder(precision="float32")
    bert = encoder.model[0].auto_model
    lean = lean_bert(bert)
    assert verified(lean, bert) is lean
    off_by_a_bit = lambda ids, positions, mask: lean(ids, positions, mask) * (1 + 1e-7)  # noqa: E731
    assert verified(off_by_a_bit, bert) is None
    assert lean_bert(SimpleNamespace(config=SimpleNamespace(position_embedding_type="relative_key"),
                                     embeddings=object(), encoder=object())) is None
    assert lean_bert(SimpleNamespace()) is None


def test_pack_rows_fills_rows_as_long_as_the_longest_text():
    lengths = [5, 3, 2, 5, 1, 4]
    rows = pack_rows(lengths)
    assert rows == [[0], [3], [5, 4], [1, 2]]  # longest first, each into the first row it fits
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert pack_rows([]) == [] and pack_rows([7]) == [[0]]


def test_only_a_bert_with_mean_or_cls_pooling_is_packed():
    def named(name, **attributes):
        return type(name, (), attributes)()

    bert = SimpleNamespace(config=SimpleNamespace(model_type="bert", is_decoder=False))
    roberta = SimpleNamespace(config=SimpleNamespace(model_type="roberta", is_decoder=False))
    pooling = named("Pooling", pooling_mode="cls", include_prompt=True)
    assert packing_pooling([named("Transformer", auto_model=bert), pooling]) == "cls"
    assert packing_pooling([named("Transformer", auto_model=roberta), pooling]) is None  # positions from padding
    assert packing_pooling([named("Transformer", auto_model=bert), named("Pooling", pooling_mode="max",
                                                                         include_prompt=True)]) is None
    assert packing_pooling([named("Transformer", auto_model=bert), pooling, named("Dense")]) is None


def test_auto_precision_is_bfloat16_only_where_the_cpu_has_it(monkeypatch):
    monkeypatch.setattr(kgr.embed, "native_bfloat16", lambda: False)
    assert resolve_precision("auto") == "float32"
    monkeypatch.setattr(kgr.embed, "native_bfloat16", lambda: True)
    assert resolve_precision("auto") == "bfloat16" and resolve_precision("float32") == "float32"


def test_length_groups_keep_short_words_apart_from_sentences():
    # eight 3-token words padded beside a 60-token sentence would cost 9 x 60 slots; apart, 8 x 3 + 60 and one set-up
    assert length_groups([60] + [3] * 8) == [list(range(1, 9)), [0]]
    assert length_groups([12, 10, 11]) == [[1, 2, 0]]  # like lengths: one call, shortest first
    assert length_groups([]) == [] and length_groups([7]) == [[0]]
    # a split pays only when it saves more padded slots than a call's set-up costs
    slots = CALL_SLOTS["float32"]
    assert len(length_groups([3, 3 + slots // 2])) == 1
    assert len(length_groups([3, 3, 3, 3 + slots])) == 2
    assert len(length_groups([3, 3 + slots // 2], call_slots=slots // 4)) == 2  # a cheaper set-up: more calls
    rows = length_groups([5, 40, 3, 41, 4, 39])
    assert sorted(i for group in rows for i in group) == list(range(6))



def test_each_text_is_encoded_once():
    encoder = RecordingEncoder()
    vectors = TextVectors(encoder)
    first = vectors(["ab", "abc", "ab"])
    assert first.tolist() == [[2, 1], [3, 1], [2, 1]]
    assert vectors(["abc"]).tolist() == [[3, 1]] and vectors([]).shape == (0, 2)
    assert encoder.calls == [["ab", "abc"]]


def test_expected_texts_ride_along_with_the_next_miss():
    encoder = RecordingEncoder()
    vectors = TextVectors(encoder)
    vectors(["a"])
    vectors.expect(["bb", "a", "ccc"])  # "a" is known: not encoded again
    assert len(encoder.calls) == 1  # expecting calls nothing
    vectors(["a"])  # a hit does not encode what is expected either
    assert len(encoder.calls) == 1
    assert vectors(["dddd"]).tolist() == [[4, 1]]
    assert encoder.calls[-1] == ["dddd", "bb", "ccc"]
    assert vectors(["ccc", "bb"]).tolist() == [[3, 1], [2, 1]] and len(encoder.calls) == 2
    vectors(["e"])  # the expectations were spent with the last miss
    assert encoder.calls[-1] == ["e"]


def test_expected_texts_ride_along_only_while_the_batch_stays_small():
    # a small batch is packed, and a packed text's vector does not depend on what rides with it; a big one is not
    encoder = RecordingEncoder()
    vectors = TextVectors(encoder)
    many = [f"w{i}" for i in range(SMALL_BATCH + 5)]
    vectors.expect(many)
    vectors(["question"])
    assert encoder.calls[-1] == ["question", *many[:SMALL_BATCH - 1]]
    vectors(["next"])  # the rest ride with the next miss
    assert encoder.calls[-1] == ["next", *many[SMALL_BATCH - 1:]]


def test_a_question_starts_afresh_but_keeps_the_graphs_phrases():
    encoder = RecordingEncoder()
    vectors = TextVectors(encoder)
    vectors.keep(["label"])
    vectors(["a"])
    vectors.expect(["bb"])
    vectors.begin_question(["q", "label", "w"])  # the opening list in one pass; kept phrases are not encoded again
    assert encoder.calls[-1] == ["q", "w"]
    vectors(["a"])  # the last question's vectors and expectations are gone
    assert encoder.calls[-1] == ["a"]
    vectors.begin_question(["q", "w"])  # the same question's next stage keeps its opening pass, and only that
    vectors(["label", "q", "w"])
    vectors(["a"])
    assert encoder.calls[-2:] == [["a"], ["a"]]
    vectors.begin_question(["other"])
    vectors.begin_question(["q", "w"])  # not the last list: encoded again
    assert encoder.calls[-1] == ["q", "w"]


# What the arithmetic guarantees a packed text: its own slots and positions, so its vector is the one it gets alone up
# to rounding, which differs with where it sits in the pass (float32 ~1e-7, bfloat16 ~2e-3 in a coordinate; more on
# a CPU that emulates bfloat16); and the same pass twice gives the same bits.
PACKING_TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_packed_texts_vector_is_its_vector_alone_up_to_rounding(precision):
    encoder = Encoder(precision=precision)
    texts = ["who directed the movies written by Wendy Scribe", "director", "plays in club", "is in country"]
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    packed = encoder.encode(texts)
    assert np.abs(packed - alone).max() <= PACKING_TOLERANCE[precision]
    assert np.array_equal(encoder.encode(texts), packed)
    kept = TextVectors(encoder)
    kept.keep(texts, as_queries=True)
    assert np.array_equal(kept(texts), packed)


def test_long_lists_are_kept_and_read_back_from_the_phrase_cache(tmp_path):
    phrases = [f"label {i}" for i in range(SMALL_BATCH + 1)]
    encoder = SettledEncoder()
    memo = TextVectors(encoder, phrases=PhraseCache(tmp_path, encoder))
    memo(phrases)  # outside `warming` a list is only encoded
    assert not list(tmp_path.iterdir())
    memo = TextVectors(encoder, phrases=PhraseCache(tmp_path, encoder))
    with memo.warming():
        first = memo(phrases)
    assert len(list(tmp_path.glob("*.npy"))) == 1
    memo.begin_question(["a"])  # a new question forgets the last one's vectors; kept phrases stay
    calls = len(encoder.calls)
    assert np.array_equal(memo(phrases[:2]), first[:2]) and len(encoder.calls) == calls
    again = TextVectors(encoder, phrases=PhraseCache(tmp_path, encoder))
    with again.warming():
        assert np.array_equal(again(phrases), first)
    assert len(encoder.calls) == calls  # read from the file
    queries = TextVectors(encoder, phrases=PhraseCache(tmp_path, encoder))
    queries.keep(phrases, as_queries=True)  # another way of encoding: another file, in question-sized calls
    assert [len(c) for c in encoder.calls[calls:]] == [SMALL_BATCH, 1]


def test_a_damaged_or_unwritable_phrase_cache_only_costs_time(tmp_path):
    encoder = SettledEncoder()
    cache = PhraseCache(tmp_path / "cache", encoder)
    texts = ["alpha", "beta"]
    first = cache.vectors(texts, "list", encoder.encode)
    path = cache.path(texts, "list")
    path.write_bytes(path.read_bytes()[:40])  # cut short
    assert np.array_equal(cache.vectors(texts, "list", encoder.encode), first) and len(encoder.calls) == 2
    assert np.load(path).shape == (2, 2)  # replaced whole
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert np.array_equal(PhraseCache(blocked, encoder).vectors(texts, "list", encoder.encode), first)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.suffix == ".tmp"]


def test_a_model_that_cannot_pack_gets_its_vectors_in_length_groups():
    encoder = Encoder(precision="float32")
    texts = ["who directed [Dark Harbor]", "uncle", "a long passage about harbours " * 60, ""]
    reference = encoder.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    encoder._pooling = None  # as for a model `packing_pooling` refuses
    np.testing.assert_allclose(encoder.encode(texts), reference, atol=1e-6)
