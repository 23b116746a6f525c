"""`kgr.schema`: the type-level steps of the tiny movie graph (tests/data/tiny_movies, see tests/test_dotrag.py) and
how typical each is."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from kgr.schema import (OPEN_VOCABULARY_LABELS, OPEN_VOCABULARY_SHARE, RARE_SOURCE_SHARE, open_vocabulary,
                        rare_label_share, step_counts, step_priors, subject_arrivals, type_schema)
from test_dotrag import tiny_movies_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    yield from tiny_movies_store(tmp_path_factory)


def test_type_schema(store):
    _, graph = store
    schema = type_schema(graph)
    assert set(schema["movie"]) == {("starred_actors", "actor"), ("directed_by", "director"),
                                    ("written_by", "writer"), ("has_genre", "genre"), ("in_language", "language")}
    assert schema["movie"][0] == ("starred_actors", "actor")  # most frequent first (13 relationships)
    assert ("written_by", "movie") in schema["writer"] and ("in_language", "movie") in schema["language"]
    assert ("directed_by", "movie") in schema["director"] and ("starred_actors", "movie") in schema["actor"]
    # Clint Ranger makes `starred_actors` reach a director and `directed_by` reach an actor: minor multi-type steps.
    assert ("starred_actors", "director") not in schema["movie"] and ("directed_by", "actor") not in schema["movie"]
    loose = type_schema(graph, share=0.1)
    assert {("starred_actors", "director"), ("directed_by", "actor")} <= set(loose["movie"])
    assert set(schema) == set(graph.type_names)


def test_subject_arrivals_are_the_steps_into_a_relations_subject_end(store):
    _, graph = store
    arrivals = subject_arrivals(graph)
    # a movie is the subject of `directed_by`: the step from a director to his movies arrives at the subject end
    assert {("directed_by", "movie"), ("starred_actors", "movie"), ("in_language", "movie")} <= arrivals
    assert ("directed_by", "director") not in arrivals and ("in_language", "language") not in arrivals
    # Clint Ranger, an actor who directs: `directed_by` reaches an actor at its object end only
    assert ("directed_by", "actor") not in arrivals


def test_step_priors_penalize_only_the_readings_made_by_multi_typing(store):
    _, graph = store
    priors = step_priors(step_counts(graph))
    assert priors[("movie", "directed_by", "director")] == 0.0
    assert priors[("movie", "starred_actors", "actor")] == 0.0
    # Clint Ranger directs and acts: `starred_actors` reaching a director is a minor reading of the relation
    assert priors[("movie", "starred_actors", "director")] < 0
    assert priors[("movie", "directed_by", "actor")] < 0


def test_step_priors_penalize_a_type_that_holds_a_sliver_of_a_relation():
    # role-typed actors who share a movie's name carry its `release_year`: 10 of 1,000 such edges leave the actor type
    tally = Counter({("movie", "release_year", "year"): 1000, ("actor", "release_year", "year"): 10,
                     ("writer", "written_by", "movie"): 300, ("director", "written_by", "movie"): 100})
    priors = step_priors(tally)
    assert priors[("movie", "release_year", "year")] == 0.0
    assert priors[("actor", "release_year", "year")] == pytest.approx(math.log(10 / (RARE_SOURCE_SHARE * 1000)))
    assert priors[("director", "written_by", "movie")] == 0.0  # a third of the writers' share: a reading of its own


def test_rare_label_share_counts_the_relationships_whose_label_at_most_one_other_carries(store):
    # labels used 3, 2 and 1 times: the 2 + 1 relationships on the last two labels are rare
    assert rare_label_share(SimpleNamespace(relation_ids=np.array([0, 0, 0, 1, 1, 2]))) == 0.5
    assert rare_label_share(SimpleNamespace(relation_ids=np.array([], dtype=np.int32))) == 0.0
    _, graph = store
    assert rare_label_share(graph) == 0.0 and not open_vocabulary(graph)  # a vocabulary: every label recurs


def test_an_open_vocabulary_has_hundreds_of_labels_most_relationships_rare():
    def graph(uses: list[int]) -> SimpleNamespace:
        """A graph whose label i carries uses[i] relationships."""
        return SimpleNamespace(relation_ids=np.repeat(np.arange(len(uses)), uses),
                               relation_labels=[f"label {i}" for i in range(len(uses))])

    phrasings = [1] * OPEN_VOCABULARY_LABELS
    assert open_vocabulary(graph(phrasings))
    assert not open_vocabulary(graph(phrasings[1:]))  # a small graph's labels are rare because it is small
    # a vocabulary used by most relationships: the share of rare ones falls under the bar
    common = math.ceil(OPEN_VOCABULARY_LABELS * (1 - OPEN_VOCABULARY_SHARE) / OPEN_VOCABULARY_SHARE) + 1
    assert not open_vocabulary(graph(phrasings + [common]))
    assert open_vocabulary(graph(phrasings + [common - 2]))
