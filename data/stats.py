"""Statistics of a birth-place world: ours (data/) beside the course's, when it is at hand.

The generator's rates (data/generate.py) were tuned until these numbers came close to the
course's; tests/test_data.py holds them there.  Works on any folder with the five files'
layout (birth_test.tsv optional).  ``python data/generate.py --stats`` prints the table.
"""

import collections
import statistics
from pathlib import Path

import generate  # data/generate.py: this folder is on sys.path for either script

HERE = generate.HERE
SEEN_CHARS = generate.SEEN_CHARS
AFTER_NAME = 10  # in "Name. Born in X" the place starts 10 characters after the name
_Q_HEAD, _Q_TAIL = "Where was ", " born?"


def _read_rows(path):
    text = path.read_text(encoding="utf-8")
    return [line.split("\t") for line in text.split("\n") if line]


def _name_of(question):
    assert question.startswith(_Q_HEAD) and question.endswith(_Q_TAIL), question
    return question[len(_Q_HEAD):-len(_Q_TAIL)]


def compute_stats(folder):
    """Statistics of the data files in folder (birth_test.tsv is optional)."""
    folder = Path(folder)
    wiki = (folder / "wiki.txt").read_text(encoding="utf-8")
    docs = wiki.split("\n")
    lengths = [len(d) for d in docs]
    splits = {"train": _read_rows(folder / "birth_places_train.tsv"),
              "dev": _read_rows(folder / "birth_dev.tsv")}
    test_inputs = _read_rows(folder / "birth_test_inputs.tsv")
    if (folder / "birth_test.tsv").exists():
        splits["test"] = _read_rows(folder / "birth_test.tsv")
    first_sentence = {d.split(". ")[0] for d in docs}
    by_prefix = {}  # every "NAME" such that a document starts with "NAME. "
    for d in docs:
        i = d.find(". ")
        while i >= 0:
            by_prefix.setdefault(d[:i], d)
            i = d.find(". ", i + 1)

    def biography(name):
        return by_prefix.get(name)

    s = {"documents": len(docs), "wiki_trailing_newline": wiki.endswith("\n"),
         "wiki_chars": len(set(wiki)),
         "wiki_non_ascii_chars": len({c for c in wiki if ord(c) > 127}),
         "len_min": min(lengths), "len_median": statistics.median(lengths),
         "len_mean": statistics.mean(lengths), "len_max": max(lengths),
         "len_over_seen": sum(n > SEEN_CHARS for n in lengths) / len(lengths),
         "n_train": len(splits["train"]), "n_dev": len(splits["dev"]),
         "n_test": len(test_inputs)}
    names = {k: [_name_of(r[0]) for r in rows] for k, rows in splits.items()}
    names["test"] = [_name_of(r[0]) for r in test_inputs]
    all_names = names["train"] + names["dev"] + names["test"]
    s["distinct_names"] = len(set(all_names))
    s["shared_train_dev"] = len(set(names["train"]) & set(names["dev"]))
    s["shared_train_test"] = len(set(names["train"]) & set(names["test"]))
    s["shared_dev_test"] = len(set(names["dev"]) & set(names["test"]))
    s["names_non_ascii"] = sum(any(ord(c) > 127 for c in n) for n in all_names) / len(all_names)
    s["names_with_dot"] = sum("." in n for n in all_names) / len(all_names)
    for k in ("train", "dev", "test"):
        ns = names[k]
        s[f"{k}_with_bio"] = sum(biography(n) is not None for n in ns) / len(ns) if ns else 0
        s[f"{k}_first_sentence_match"] = (sum(n in first_sentence for n in ns) / len(ns)
                                          if ns else 0)
        if k in splits and splits[k]:
            rows = splits[k]
            found = [biography(_name_of(q)) or "" for q, _ in rows]
            s[f"{k}_place_in_bio"] = sum(a in d for (q, a), d in zip(rows, found)) / len(rows)
            s[f"{k}_place_in_seen"] = (sum(a in d[:SEEN_CHARS] for (q, a), d in zip(rows, found))
                                       / len(rows))
            s[f"{k}_place_after_name"] = sum(
                0 <= d.find(a) - len(_name_of(q)) <= AFTER_NAME for (q, a), d in zip(rows, found)) / len(rows)
            places = collections.Counter(a for _, a in rows)
            top, top_n = places.most_common(1)[0]
            s[f"{k}_distinct_places"] = len(places)
            s[f"{k}_top_place"] = top
            s[f"{k}_top_share"] = top_n / len(rows)
    train_places = {a for _, a in splits["train"]}
    s["dev_place_unseen_in_train"] = (sum(a not in train_places for _, a in splits["dev"])
                                      / max(1, len(splits["dev"])))
    s["train_dev_distinct_places"] = len(train_places | {a for _, a in splits["dev"]})
    need = set()
    for k, rows in splits.items():
        for r in rows:
            need |= set(r[0]) | set(r[1] if len(r) > 1 else "")
    for r in test_inputs:
        need |= set(r[0])
    s["question_chars_missing"] = "".join(sorted(need - set(wiki)))
    # Whether the birth place is the first place (from our list) the biography names.
    firsts, place_names = [], set(generate.tables().all_place_names)
    for q, a in splits["dev"]:
        d = biography(_name_of(q))
        if not d or a not in d:
            continue
        body = d[len(_name_of(q)) + 2:]
        pos = [(body.find(p), -len(p), p) for p in place_names | {a} if p in body]
        firsts.append(min(pos)[2] == a)
    s["dev_place_first_named"] = sum(firsts) / len(firsts) if firsts else 0
    return s


def _pct(x):
    return f"{100 * x:.1f}%"


STAT_ROWS = [
    ("documents in wiki.txt", lambda s: str(s["documents"])),
    ("wiki.txt ends with a newline", lambda s: "yes" if s["wiki_trailing_newline"] else "no"),
    ("distinct characters in wiki.txt (non-ASCII)",
     lambda s: f"{s['wiki_chars']} ({s['wiki_non_ascii_chars']})"),
    ("document length min / median / mean / max",
     lambda s: f"{s['len_min']} / {s['len_median']:g} / {s['len_mean']:.1f} / {s['len_max']}"),
    (f"documents longer than {SEEN_CHARS} characters", lambda s: _pct(s["len_over_seen"])),
    ("train / dev / test questions", lambda s: f"{s['n_train']} / {s['n_dev']} / {s['n_test']}"),
    ("distinct names in all questions", lambda s: str(s["distinct_names"])),
    ("names shared train-dev / train-test / dev-test",
     lambda s: f"{s['shared_train_dev']} / {s['shared_train_test']} / {s['shared_dev_test']}"),
    ("names with non-ASCII letters / with a '.'",
     lambda s: f"{_pct(s['names_non_ascii'])} / {_pct(s['names_with_dot'])}"),
    ("train / dev / test people with a biography (`NAME. ` line)",
     lambda s: " / ".join(_pct(s[f"{k}_with_bio"]) for k in ("train", "dev", "test"))),
    ("same, matching `doc.split('. ')[0]` only (dev)",
     lambda s: _pct(s["dev_first_sentence_match"])),
    ("dev: birth place named in the biography", lambda s: _pct(s["dev_place_in_bio"])),
    (f"dev: birth place in its first {SEEN_CHARS} characters",
     lambda s: _pct(s["dev_place_in_seen"])),
    (f"dev: birth place right after the name (within {AFTER_NAME} characters)",
     lambda s: _pct(s["dev_place_after_name"])),
    ("train: birth place named / in first 112 characters",
     lambda s: f"{_pct(s['train_place_in_bio'])} / {_pct(s['train_place_in_seen'])}"),
    ("test: birth place named / in first 112 characters",
     lambda s: (f"{_pct(s['test_place_in_bio'])} / {_pct(s['test_place_in_seen'])}"
                if "test_place_in_bio" in s else "n/a (no answers)")),
    ("distinct places train / dev / train+dev",
     lambda s: f"{s['train_distinct_places']} / {s['dev_distinct_places']} / "
               f"{s['train_dev_distinct_places']}"),
    ("most common dev place (share of dev)",
     lambda s: f"{s['dev_top_place']} ({_pct(s['dev_top_share'])})"),
    ("most common train place (share of train)",
     lambda s: f"{s['train_top_place']} ({_pct(s['train_top_share'])})"),
    ("dev answers never seen as a train answer", lambda s: _pct(s["dev_place_unseen_in_train"])),
    ("question characters missing from wiki.txt",
     lambda s: repr(s["question_chars_missing"]) if s["question_chars_missing"] else "none"),
    ("dev: birth place is the first listed place named (places of this file's list)",
     lambda s: _pct(s["dev_place_first_named"])),
]


def default_course_dir():
    """<repo>/../shared/course-data, where the course's own files may be (never shipped)."""
    return HERE.parent.parent / "shared" / "course-data"


def stats_table(ours_dir=HERE, course_dir=None):
    """The Markdown table of STAT_ROWS for ours_dir, beside the course's data when present."""
    ours = compute_stats(ours_dir)
    course_dir = Path(course_dir) if course_dir else default_course_dir()
    course = compute_stats(course_dir) if (course_dir / "wiki.txt").exists() else None
    lines = ["| statistic | ours | course |" if course else "| statistic | ours |",
             "| --- | --- | --- |" if course else "| --- | --- |"]
    for label, fmt in STAT_ROWS:
        cells = [label, fmt(ours)] + ([fmt(course)] if course else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

