"""The project's own generated dataset (data/generate.py and the files it wrote)."""

import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
COURSE = ROOT.parent / "shared" / "course-data"  # the course's files, never shipped


def _load(name):
    """data/NAME.py as the scripts see it: data/ on sys.path (stats.py imports generate)."""
    if str(DATA) not in sys.path:
        sys.path.insert(0, str(DATA))
    return importlib.import_module(name)


gen = _load("generate")
data_stats = _load("stats")

QUESTION = re.compile(r"^Where was ([^\t\n]+) born\?$")


def _lines(path):
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), f"{path.name} must end with a newline"
    return text[:-1].split("\n")


def _pairs(path):
    rows = [line.split("\t") for line in _lines(path)]
    assert all(len(r) == 2 for r in rows), path.name
    return rows


@pytest.fixture(scope="module")
def stats():
    return data_stats.compute_stats(DATA)


@pytest.fixture(scope="module")
def course_stats():
    if not (COURSE / "wiki.txt").exists():
        pytest.skip("course data not available at ../shared/course-data")
    return data_stats.compute_stats(COURSE)


# --- the committed files are exactly what the generator writes -------------------------


def test_regeneration_is_byte_identical(tmp_path):
    info = gen.generate(tmp_path)
    assert (info["n_train"], info["n_dev"], info["n_test"]) == (2000, 500, 437)
    for name in gen.FILES:
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


def test_cli_regenerates_identically_under_another_hash_seed(tmp_path):
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, str(DATA / "generate.py"), "--out", str(tmp_path)],
                   check=True, env=env, capture_output=True)
    for name in gen.FILES:
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


def test_cli_stats_prints_markdown_table():
    out = subprocess.run([sys.executable, str(DATA / "generate.py"), "--stats"],
                         check=True, capture_output=True, text=True).stdout
    lines = out.strip().split("\n")
    assert lines[0].startswith("| statistic | ours |")
    assert all(line.startswith("| ") and line.endswith(" |") for line in lines)
    assert len(lines) == 2 + len(data_stats.STAT_ROWS)


def test_no_machine_paths_in_project_files():
    for path in [DATA / "generate.py", DATA / "stats.py", *(DATA / n for n in gen.FILES),
                 *sorted(gen.TABLES.glob("*.json"))]:
        assert str(ROOT) not in path.read_text(encoding="utf-8"), path.name


def test_importing_the_generator_reads_no_table(tmp_path):
    shutil.copy(DATA / "generate.py", tmp_path / "generate.py")  # no tables/ beside it
    spec = importlib.util.spec_from_file_location("lonely_generate", tmp_path / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.tables.cache_info().currsize == 0
    with pytest.raises(FileNotFoundError, match="places.json"):
        module.build_world(3)


def test_tables_reject_a_key_written_twice(tmp_path, monkeypatch):
    (tmp_path / "names.json").write_text('{"styles": {}, "styles": {}}', encoding="utf-8")
    monkeypatch.setattr(gen, "TABLES", tmp_path)
    with pytest.raises(ValueError, match="styles written twice"):
        gen._read_table("names.json")


# --- formats -------------------------------------------------------------------------


def test_file_formats():
    wiki = (DATA / "wiki.txt").read_text(encoding="utf-8")
    assert not wiki.endswith("\n"), "wiki.txt has no trailing newline, like the course's"
    assert "\t" not in wiki and "\r" not in wiki
    docs = wiki.split("\n")
    assert all(d.endswith(" .") and ". " in d for d in docs)
    for name in ("birth_places_train.tsv", "birth_dev.tsv", "birth_test.tsv"):
        for q, a in _pairs(DATA / name):
            assert QUESTION.match(q) and a and a == a.strip(), (name, q, a)
    inputs = _lines(DATA / "birth_test_inputs.tsv")
    assert all(QUESTION.match(q) for q in inputs)
    assert inputs == [q for q, _ in _pairs(DATA / "birth_test.tsv")]


def test_every_question_character_is_in_wiki():
    wiki_chars = set((DATA / "wiki.txt").read_text(encoding="utf-8"))
    used = set()
    for name in ("birth_places_train.tsv", "birth_dev.tsv", "birth_test.tsv"):
        for q, a in _pairs(DATA / name):
            used |= set(q) | set(a)
    assert used - wiki_chars == set()
    assert set("Where was born?") <= wiki_chars
    assert set("éüøñ") <= wiki_chars  # names with accented letters


def test_people_are_unique_and_splits_disjoint():
    names = {}
    for name in ("birth_places_train.tsv", "birth_dev.tsv", "birth_test.tsv"):
        names[name] = [QUESTION.match(q).group(1) for q, _ in _pairs(DATA / name)]
    everyone = sum(names.values(), [])
    assert len(everyone) == len(set(everyone)) == 2937
    docs = (DATA / "wiki.txt").read_text(encoding="utf-8").split("\n")
    for n, d in zip(everyone, docs):  # one biography per person, in question order
        assert d.startswith(n + ". ")


def test_answers_are_real_places_and_people_fictional():
    for name in ("birth_places_train.tsv", "birth_dev.tsv", "birth_test.tsv"):
        for q, a in _pairs(DATA / name):
            assert a in gen.tables().places
            assert not gen._contains_place(QUESTION.match(q).group(1))


# --- statistics close to the course's ---------------------------------------------------


def test_statistics_in_range(stats):
    s = stats
    assert s["documents"] == 2937
    assert 36 <= s["len_min"] <= 60
    assert 120 <= s["len_median"] <= 145
    assert 130 <= s["len_mean"] <= 155
    assert 380 <= s["len_max"] <= gen.LEN_MAX
    assert (s["n_train"], s["n_dev"], s["n_test"]) == (2000, 500, 437)
    assert 200 <= s["dev_distinct_places"] <= 300
    assert 400 <= s["train_distinct_places"] <= 650
    assert s["dev_top_place"] == "London" and 0.04 <= s["dev_top_share"] <= 0.06
    assert 0.03 <= s["dev_place_unseen_in_train"] <= 0.12
    for k in ("train", "dev", "test"):
        assert s[f"{k}_with_bio"] == 1.0  # like the course: everyone has a biography ...
        assert 0.93 <= s[f"{k}_place_in_bio"] <= 0.98  # ... ~5% never name the birth place
        assert 0.90 <= s[f"{k}_place_in_seen"] <= 0.95
    assert 0.92 <= s["dev_first_sentence_match"] <= 0.97
    assert 0.6 <= s["dev_place_first_named"] <= 0.95  # not trivially the first place named
    assert 0.03 <= s["names_non_ascii"] <= 0.12
    assert s["question_chars_missing"] == ""
    assert s["shared_train_dev"] == s["shared_train_test"] == s["shared_dev_test"] == 0


def test_statistics_close_to_course(stats, course_stats):
    ours, course = stats, course_stats
    for key in ("documents", "n_train", "n_dev", "n_test", "wiki_trailing_newline"):
        assert ours[key] == course[key], key
    assert abs(ours["len_median"] - course["len_median"]) <= 0.1 * course["len_median"]
    assert abs(ours["len_mean"] - course["len_mean"]) <= 0.1 * course["len_mean"]
    assert abs(ours["dev_distinct_places"] - course["dev_distinct_places"]) <= 40
    assert abs(ours["dev_top_share"] - course["dev_top_share"]) <= 0.015
    assert ours["dev_top_place"] == course["dev_top_place"]
    for key in ("dev_place_in_bio", "dev_place_in_seen", "train_place_in_bio",
                "train_place_in_seen", "dev_with_bio"):
        assert abs(ours[key] - course[key]) <= 0.03, key


def test_nothing_copied_from_course(course_stats):
    ours_docs = set((DATA / "wiki.txt").read_text(encoding="utf-8").split("\n"))
    course_docs = set((COURSE / "wiki.txt").read_text(encoding="utf-8").split("\n"))
    assert not ours_docs & course_docs
    ours_q = set()
    for name in ("birth_places_train.tsv", "birth_dev.tsv", "birth_test.tsv"):
        ours_q |= {q for q, _ in _pairs(DATA / name)}
    course_q = set()
    for name in ("birth_places_train.tsv", "birth_dev.tsv", "birth_test_inputs.tsv"):
        course_q |= {line.split("\t")[0] for line in _lines(COURSE / name)}
    assert not ours_q & course_q


# --- small worlds -------------------------------------------------------------------------


def _read_all(folder):
    return {n: (folder / n).read_bytes() for n in gen.FILES}


def test_small_world_is_deterministic_and_seeded(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    gen.generate(a, n_people=300, seed=7, n_dev=200)
    gen.generate(b, n_people=300, seed=7, n_dev=200)
    gen.generate(c, n_people=300, seed=8, n_dev=200)
    assert _read_all(a) == _read_all(b)
    assert _read_all(a)["wiki.txt"] != _read_all(c)["wiki.txt"]
    assert _read_all(a)["birth_dev.tsv"] != _read_all(c)["birth_dev.tsv"]


def test_small_world_keeps_the_proportions(tmp_path):
    info = gen.generate(tmp_path, n_people=400, seed=3, n_dev=200)
    assert (info["n_train"], info["n_dev"], info["n_test"]) == (164, 200, 36)
    s = data_stats.compute_stats(tmp_path)
    assert s["documents"] == 400 and s["n_dev"] == 200
    assert s["question_chars_missing"] == ""
    assert s["dev_with_bio"] == 1.0
    assert 0.94 <= s["dev_place_in_bio"] <= 0.97
    assert 0.90 <= s["dev_place_in_seen"] <= 0.94
    assert s["dev_top_place"] == "London" and 0.04 <= s["dev_top_share"] <= 0.06
    assert 110 <= s["len_median"] <= 155
    assert s["shared_train_dev"] == s["shared_train_test"] == s["shared_dev_test"] == 0


def test_split_sizes():
    assert gen._resolve_splits(2937, None, None, None) == (2000, 500, 437)
    assert gen._resolve_splits(400, None, 200, None) == (164, 200, 36)
    assert gen._resolve_splits(300, 60, 200, 40) == (60, 200, 40)
    with pytest.raises(ValueError):
        gen._resolve_splits(100, None, 200, None)


def test_people_without_questions(tmp_path):
    info = gen.generate(tmp_path, n_people=60, seed=1, n_train=20, n_dev=20, n_test=10)
    docs = (tmp_path / "wiki.txt").read_text(encoding="utf-8").split("\n")
    assert len(docs) == 60 and info["n_test"] == 10
    assert len(_lines(tmp_path / "birth_dev.tsv")) == 20


@pytest.mark.parametrize("n_people", [1, 5, 37])
def test_tiny_worlds_build(n_people):
    docs, people = gen.build_world(n_people, seed=n_people)
    assert len(docs) == len(people) == n_people
    chars = set("".join(docs))
    for p in people:
        if p["split"]:
            assert set(f"Where was {p['name']} born?") | set(p["birth"]) <= chars


# --- mention lines (the quick preset's world) ------------------------------------------------

def test_mentions_name_each_person_elsewhere_and_leave_the_biographies_alone():
    bios, people = gen.build_world(40, seed=5, n_train=20, n_dev=10, n_test=5)
    docs, again = gen.build_world(40, seed=5, n_train=20, n_dev=10, n_test=5, mentions=3)
    assert docs[:40] == bios and [p["name"] for p in again] == [p["name"] for p in people]
    lines = docs[40:]
    assert len(lines) == 120
    assert lines == gen.build_world(40, seed=5, n_train=20, n_dev=10, n_test=5, mentions=3)[0][40:]
    assert lines != gen.build_world(40, seed=6, n_train=20, n_dev=10, n_test=5, mentions=3)[0][40:]
    starts = set()
    for p in people:
        mine = [line for line in lines if p["name"] in line]
        assert len(mine) == 3, p["name"]
        for line in mine:
            at = line.index(p["name"])
            assert at > 0 and not line.startswith(p["name"] + ". ")  # never where a biography has it
            assert line.count(p["birth"]) == 1 and line.index(p["birth"]) + len(p["birth"]) <= gen.SEEN_CHARS
            starts.add(at)
    assert len(starts) >= 10  # the name turns up at many positions, not one


def test_mentions_must_be_a_count():
    for bad in (-1, 1.5):
        with pytest.raises(ValueError, match="mentions"):
            gen.build_world(10, mentions=bad)
