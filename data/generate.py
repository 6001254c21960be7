#!/usr/bin/env python3
"""Deterministic generator for the project's own birth-place dataset.

The course data for this assignment cannot ship with the project, so this script builds a
world of its own with the same shape:

* ``wiki.txt``: one short biography per line, ``Name. <one sentence about them> .``, no
  trailing newline (the pretraining corpus);
* ``birth_places_train.tsv`` / ``birth_dev.tsv``: ``Where was NAME born?<TAB>PLACE`` rows;
* ``birth_test_inputs.tsv``: ``Where was NAME born?`` rows (no answers);
* ``birth_test.tsv``: the test answers (the world is ours, so they ship too).

With ``mentions=K`` (the quick preset's world; the shipped, course-sized world has none),
wiki.txt also gets K short lines per person, after the biographies, that name the person
and their birth place inside an article about something else (see MENTION_BODIES).

The people are fictional: their names are assembled from name parts written for this
project.  The places are real cities and countries (facts of the world).  Every sentence
template, occupation, topic and title was written for this project.  These tables live in
data/tables/*.json (described below, at tables()); this file holds the rules that combine
them, and data/stats.py the statistics that compare a world with the course's.

Usage::

    python data/generate.py                 # regenerate the files next to this script
    python data/generate.py --out DIR       # write them somewhere else
    python data/generate.py --stats         # Markdown table: ours vs the course data
    python data/generate.py --out DIR --people 400 --train 100 --dev 200 --test 100 --seed 7
    python data/generate.py --out DIR --people 520 --train 300 --dev 200 --test 20 --mentions 2

From Python (e.g. for small "quick preset" worlds)::

    generate(out_dir, n_people=400, seed=7, n_train=100, n_dev=200, n_test=100, mentions=2)

Standard library only; the output depends only on the arguments.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import functools
import json
import math
import random
import sys
import types
import unicodedata
from pathlib import Path


HERE = Path(__file__).resolve().parent

DEFAULT_SEED = 2937
COURSE_SPLITS = (2000, 500, 437)  # train / dev / test rows of the course data
COURSE_PEOPLE = sum(COURSE_SPLITS)
SEEN_CHARS = 112  # int(128 * 7 / 8): the longest prefix of a document pretraining ever sees

FILES = ("wiki.txt", "birth_places_train.tsv", "birth_dev.tsv",
         "birth_test_inputs.tsv", "birth_test.tsv")

# Share of question people per split whose biography never names the birth place
# (unanswerable) and whose biography names it only after the first SEEN_CHARS characters.
ABSENT_RATE = 0.045
LATE_RATE = 0.035

# Share of biographies naming the birth place early that open "Name. Born in X, ...": the
# course's documents do so often (the `dev: birth place right after the name` statistic), and
# a place right after the name is the easiest fact to reach from a question about that name.
OPENER_RATE = 0.15

# Document lengths are drawn from a log-normal law (median ~132 characters).
LEN_MU, LEN_SIGMA, LEN_MIN, LEN_MAX = 4.85, 0.39, 38, 520

# Birth places follow a Zipf-like law over the places (rank r has weight
# 1 / (r + ZIPF_B) ** ZIPF_S); ranks come from the common birth places of places.json, then
# the rest in a fixed shuffle.
ZIPF_S, ZIPF_B = 1.1, 5.0
PLACE_ORDER_SEED = 11


# ---------------------------------------------------------------------------------------
# Tables (data/tables/*.json, written for this project; the places are real):
#   places.json      real cities grouped by the region shown after a comma ("*": shown
#                    alone), countries, and the most common birth places, most common first
#                    (every other place follows them in a fixed shuffle, PLACE_ORDER_SEED, so
#                    the distribution does not depend on the seed).  No place name is part
#                    of another one.
#   names.json       name styles: given names by pronoun, surname pieces (prefix + suffix),
#                    particles used in longer names and a weight; parts of one-word names.
#   vocabulary.json  what a biography says: occupations by domain, subjects, topics, titles...
#   templates.json   sentences: cores that name the birth place (birth_cores, and the
#                    opener "Born in X, ..."), cores that do not (plain_cores), clauses
#                    appended to a core (tails), clauses naming the birth place late in a
#                    long biography (late_tails), verb phrases, mention titles and bodies.
#                    Fields: N full name, S short name, P birth place (only in
#                    cores that name it), Q lives in, R moved to, D died in, U studied in, T
#                    another place; BD/DD birth/death date, BY/DY years, BYQ uncertain birth
#                    year ("1874?"), Y1/Y2 years of adult life, DEC1/DEC2 decades; occ_a "a
#                    painter", Occ_a "A painter", occ "painter"; he/He/his/His/him pronouns;
#                    is/was, lives/lived, has/had by tense; VP a verb phrase.  "needs": "dead"
#                    or "alive"; "keys": facts the clause states (never stated twice);
#                    "domain": only for occupations of that domain.
# They are read on first use (tables()), never at import.
# ---------------------------------------------------------------------------------------

TABLES = HERE / "tables"


def _read_table(name):
    """One JSON table; a key written twice is an error rather than a silent overwrite."""
    def unique(pairs):
        keys = [k for k, _ in pairs]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"{TABLES / name}: {', '.join(dup)} written twice")
        return dict(pairs)

    with open(TABLES / name, encoding="utf-8") as f:
        return json.load(f, object_pairs_hook=unique)


def _template(entry):
    keys = set(entry.get("keys", ()))
    if any(f in entry["text"] for f in ("{occ_a}", "{Occ_a}", "{occ}")):
        keys.add("occ")  # the occupation is stated at most once
    return dict(text=entry["text"], needs=entry.get("needs"), keys=frozenset(keys),
                domain=entry.get("domain"))


def _parse_places(table):
    """name -> (region shown after a comma or None, "city" | "country")."""
    places = {}

    def add(name, region, kind):
        if not name or name in places:
            raise ValueError(f"empty or duplicate place {name!r}")
        places[name] = (region, kind)

    for region, names in table["cities"].items():
        for name in names:
            add(name, None if region == "*" else region, "city")
    for name in table["countries"]:
        add(name, None, "country")
    for a in places:
        for b in places:
            if a != b and a in b:
                raise ValueError(f"place {a!r} is part of place {b!r}")
    return places


def _place_law(places, head):
    """Birth places by rank and the cumulative Zipf-like law over the ranks."""
    if len(set(head)) != len(head) or not set(head) <= set(places):
        raise ValueError("the common birth places must be distinct known places")
    rest = sorted(p for p in places if p not in set(head))
    random.Random(PLACE_ORDER_SEED).shuffle(rest)
    ranking = list(head) + rest
    weights = [1.0 / (r + ZIPF_B) ** ZIPF_S for r in range(len(ranking))]
    total = sum(weights)
    probs = [w / total for w in weights]
    cum, acc = [], 0.0
    for p in probs:
        acc += p
        cum.append(acc)
    cum[-1] = 1.0
    return ranking, probs, cum


@functools.lru_cache(maxsize=None)
def tables():
    """Every table, read and checked once per process, as attributes (tables().places ...),
    with what the generator derives from them (the place law, the occupation domains)."""
    place_table = _read_table("places.json")
    names, words, sentences = (_read_table(f"{k}.json")
                               for k in ("names", "vocabulary", "templates"))
    places = _parse_places(place_table)
    ranking, probs, cum = _place_law(places, place_table["common_birth_places"])
    opener = _template(sentences["opener"])
    return types.SimpleNamespace(
        places=places, place_ranking=ranking, place_probs=probs, place_cum=cum,
        all_place_names=tuple(sorted(places, key=len, reverse=True)),
        name_styles=names["styles"], mononym_parts=names["mononym_parts"],
        occ_domain={occ: dom for dom, occs in words["occupations"].items() for occ in occs},
        **{k: words[k] for k in ("occupation_adjectives", "subjects", "topics", "works",
                                 "titles", "awards", "ventures", "trades", "parents",
                                 "ordinals", "relatives", "months", "numbers")},
        verb_phrases=[_template(t) for t in sentences["verb_phrases"]],
        opener=opener,  # "Name. Born in X, ..." (see OPENER_RATE); also a birth core
        birth_cores=[_template(t) for t in sentences["birth_cores"]] + [opener],
        plain_cores=[_template(t) for t in sentences["plain_cores"]],
        tails=[_template(t) for t in sentences["tails"]],
        late_tails=[_template(t) for t in sentences["late_tails"]],
        mention_titles=sentences["mention_titles"], mention_bodies=sentences["mention_bodies"],
    )


# Mentions: a person named, with their birth place, in a line about something else.
# In the course's data, as in our course-sized world, every name opens its own line and
# nowhere else; a model as small as the quick preset's then files each birth place under
# "the characters at positions 0, 1, 2, ..." and a question, which puts the name at
# position 10, cannot reach it (docs/quick-preset.md measures this).  Seeing each
# name at other positions too makes the fact a property of the name.  Titles (templates.json,
# "mention_titles") use the person's other places, never the birth place.
MENTION_SEED = 101  # mentions draw from their own generator: the biographies stay as they are


def _mention_lines(people, k, seed):
    """k lines per person, shuffled; each names the birth place once, within SEEN_CHARS."""
    tb = tables()
    rng = random.Random(seed * 1000 + MENTION_SEED)
    lines = []
    for person in people:
        fields = dict(person)
        fields.update({f: person[f].split(",")[0] for f in ("Q", "R", "T", "U")})  # no region in a title
        birth = person["birth"]
        for _ in range(k):
            for _attempt in range(100):
                line = _finish(rng.choice(tb.mention_titles).format_map(fields),
                               rng.choice(tb.mention_bodies).format_map(fields))
                if line.count(birth) == 1 and line.find(birth) + len(birth) <= SEEN_CHARS:
                    break
            else:  # pragma: no cover - titles and bodies are short
                raise RuntimeError(f"could not write a mention of {person['name']}")
            lines.append(line)
    rng.shuffle(lines)
    return lines


# ---------------------------------------------------------------------------------------
# The world.
# ---------------------------------------------------------------------------------------


def _draw_place(rng):
    tb = tables()
    cum = tb.place_cum
    return tb.place_ranking[min(bisect.bisect_right(cum, rng.random()), len(cum) - 1)]


def _stratified_places(rng, n):
    """n birth places in a random order: place k gets floor(n * p_k) people for sure and the
    remaining ones are drawn by the fractional parts of n * p_k.  The common places thus keep
    their share even in a small world, while the rare ones come and go as in a sample."""
    if n == 0:
        return []
    tb = tables()
    counts = [int(n * p) for p in tb.place_probs]
    out = [place for place, c in zip(tb.place_ranking, counts) for _ in range(c)]
    rest = n - len(out)
    if rest:
        fractions = [n * p - c for p, c in zip(tb.place_probs, counts)]
        out += rng.choices(tb.place_ranking, weights=fractions, k=rest)
    rng.shuffle(out)
    return out


def _article(phrase):
    return ("an " if phrase[0].lower() in "aeiou" else "a ") + phrase


def _contains_place(text):
    return any(p in text for p in tables().all_place_names)


ASCII_FOLD_RATE = 0.75
_FOLD = {"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "ı": "i", "æ": "ae", "ß": "ss", "đ": "d"}


def _fold(text):
    text = "".join(_FOLD.get(c, c) for c in text)
    return "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c))


_FEMININE = (("owski", "owska"), ("ecki", "ecka"), ("ski", "ska"), ("ov", "ova"), ("in", "ina"))


def _make_name(rng):
    tb = tables()
    styles = list(tb.name_styles)
    style = rng.choices(styles, weights=[tb.name_styles[s]["weight"] for s in styles])[0]
    st = tb.name_styles[style]
    he = "he" if rng.random() < 0.7 else "she"
    given = rng.choice(st[he])
    sur = rng.choice(st["pre"]) + rng.choice(st["suf"])
    if style == "slavic" and he == "she":
        for a, b in _FEMININE:
            if sur.endswith(a):
                sur = sur[: -len(a)] + b
                break
    if style == "nordic" and rng.random() < 0.15:
        sur = rng.choice(st["he"]) + ("sson" if rng.random() < 0.5 else "sen")
    r = rng.random()
    others = [g for g in st[he] if g != given]
    initial = lambda: rng.choice("ABCDEFGHJKLMNOPRSTVW") + "."  # noqa: E731
    if r < 0.003:
        name = rng.choice(tb.mononym_parts[0]) + rng.choice(tb.mononym_parts[1])
        return name, name, he, style
    if r < 0.038:  # middle initial
        tokens, short = [given, initial(), sur], sur
    elif r < 0.13:  # middle name
        tokens, short = [given, rng.choice(others), sur], sur
    elif r < 0.175:  # particle or double surname
        if st["particles"]:
            part = rng.choice(st["particles"])
            tokens, short = [given, part, sur], part + " " + sur
        else:
            sur2 = rng.choice(st["pre"]) + rng.choice(st["suf"])
            tokens, short = [given, sur, sur2], sur2
    elif r < 0.185:  # initials only
        tokens, short = [initial(), initial(), sur], sur
    elif r < 0.205:  # four or five parts
        middle = [rng.choice(others)]
        if rng.random() < 0.3:
            middle.append(initial())
        if st["particles"]:
            tokens, short = [given] + middle + [rng.choice(st["particles"]), sur], sur
        else:
            sur2 = rng.choice(st["pre"]) + rng.choice(st["suf"])
            tokens, short = [given] + middle + [sur, sur2], sur2
    else:
        tokens, short = [given, sur], sur
    name = " ".join(tokens)
    if rng.random() < ASCII_FOLD_RATE:  # most names lose their accents, as in English texts
        name, short = _fold(name), _fold(short)
    return name, short, he, style


def _format_date(fmt, day, month, year):
    months = tables().months
    if fmt == "dmy":
        return f"{day} {months[month]} {year}"
    return f"{months[month]} {day}, {year}"


def _make_life(rng, person):
    tb = tables()
    by = int(rng.triangular(1790, 1996, 1950))
    alive = (by >= 1975 or (by >= 1940 and rng.random() < 0.9)
             or (1925 <= by < 1940 and rng.random() < 0.5))
    if not alive:
        dy = min(by + int(rng.triangular(30, 99, 76)), 2023)
        if dy - by < 30:
            dy = by + 30
    else:
        dy = None
    last = dy if dy else 2023
    fmt = "dmy" if rng.random() < 0.55 else "mdy"
    person.update(
        alive=alive, BY=by, DY=dy,
        BD=_format_date(fmt, rng.randint(1, 28), rng.randrange(12), by),
        DD=_format_date(fmt, rng.randint(1, 28), rng.randrange(12), dy) if dy else None,
        BYQ=f"{by}?" if rng.random() < 0.5 else f"c. {by}",
    )
    y1 = rng.randint(by + 18, max(by + 18, last - 5))
    y2 = rng.randint(y1 + 1, max(y1 + 1, last))
    dec1 = (by + 20) // 10 * 10
    dec2 = max(dec1 + 10, min(dec1 + 10 * rng.randint(1, 4), last // 10 * 10))
    occ = rng.choice(sorted(tb.occ_domain))
    occ_phrase = (rng.choice(tb.occupation_adjectives) + " " + occ) if rng.random() < 0.25 else occ
    he = person["he"]
    person.update(
        Y1=y1, Y2=y2, RY=max(y2, min(last, by + rng.randint(55, 70))),
        DEC1=dec1, DEC2=dec2, occ=occ, domain=tb.occ_domain[occ],
        occ_a=_article(occ_phrase),
        he=he, him="him" if he == "he" else "her", his="his" if he == "he" else "her",
        subj=rng.choice(tb.subjects), topic=rng.choice(tb.topics),
        work=rng.choice(tb.works[tb.occ_domain[occ]]),
        title=rng.choice(tb.titles), award=rng.choice(tb.awards), venture=rng.choice(tb.ventures),
        trade=rng.choice(tb.trades), parent=rng.choice(tb.parents), ordinal=rng.choice(tb.ordinals),
        relative=rng.choice(tb.relatives[he]), occ2_a=_article(rng.choice(sorted(tb.occ_domain))),
        num=rng.choice(tb.numbers), age=rng.randint(17, 38), kidage=rng.randint(2, 14),
    )
    person["Occ_a"] = person["occ_a"][0].upper() + person["occ_a"][1:]
    person["is"] = "is" if alive else "was"
    person["lives"] = "lives" if alive else "lived"
    person["has"] = "has" if alive else "had"
    person["He"] = he.capitalize()
    person["His"] = person["his"].capitalize()


def _display(rng, place, p_region):
    region = tables().places[place][0]
    if region and place not in region and rng.random() < p_region:
        return f"{place}, {region}"
    return place


def _clash(a, a_disp, b, b_disp):
    return a in b_disp or b in a_disp


def _make_places(rng, person, birth):
    person["birth"] = birth
    person["P"] = _display(rng, birth, 0.3)
    chosen = [(birth, person["P"])]
    for field in ("Q", "R", "D", "U", "T"):
        for _ in range(1000):
            place = _draw_place(rng)
            disp = _display(rng, place, 0.25)
            if all(not _clash(place, disp, c, cd) for c, cd in chosen):
                break
        else:  # pragma: no cover - the place list is large
            raise RuntimeError("could not draw distinct places")
        chosen.append((place, disp))
        person[field] = disp


def _compatible(templates, person, used_keys=frozenset(), need_city=False):
    out = []
    for t in templates:
        if t["needs"] == "dead" and person["alive"]:
            continue
        if t["needs"] == "alive" and not person["alive"]:
            continue
        if t["keys"] & used_keys:
            continue
        if t["domain"] and t["domain"] != person["domain"]:
            continue
        if need_city and "at {P}" in t["text"]:
            continue
        out.append(t)
    return out


def _fill(rng, template, person, used_keys):
    fields = dict(person)
    keys = set(template["keys"])
    if "{VP}" in template["text"]:
        vps = _compatible(tables().verb_phrases, person, frozenset(used_keys | keys))
        vp = rng.choice(vps)
        fields["VP"] = vp["text"].format_map(fields)
        keys |= vp["keys"]
    return template["text"].format_map(fields), frozenset(keys)


def _finish(name, body):
    body = body[0].upper() + body[1:]
    return f"{name}. {body} ."


def _biography(rng, person, category, target):
    """One document for person whose birth place is named early (within SEEN_CHARS
    characters), late (only after them), or not at all (absent)."""
    tb = tables()
    name, birth = person["name"], person["birth"]
    prefix_len = len(name) + 2
    is_country = tb.places[birth][1] == "country"
    cores = tb.plain_cores
    if category == "early":
        cores = [tb.opener] if rng.random() < OPENER_RATE else tb.birth_cores
    for _attempt in range(300):
        cands = []
        for t in _compatible(cores, person, need_city=is_country):
            text, keys = _fill(rng, t, person, frozenset())
            if category == "early":
                pos = prefix_len + text.find(birth)
                if text.find(birth) < 0 or pos + len(birth) > SEEN_CHARS:
                    continue
            cands.append((text, keys))
        if not cands:
            continue
        fitting = [c for c in cands if prefix_len + len(c[0]) + 2 <= target + 12]
        body, used = rng.choice(fitting) if fitting else min(cands, key=lambda c: len(c[0]))

        def add_tails(body, used, goal, slack):
            while prefix_len + len(body) + 2 < goal - 6:
                opts = []
                for t in _compatible(tb.tails, person, used):
                    text, keys = _fill(rng, t, person, used)
                    if prefix_len + len(body) + len(text) + 2 <= goal + slack:
                        opts.append((text, keys))
                if not opts:
                    break
                text, keys = rng.choice(opts)
                body, used = body + text, used | keys
            return body, used

        if category == "late":
            body, used = add_tails(body, used, SEEN_CHARS - 4, 60)
            lates = _compatible(tb.late_tails, person, used)
            if not lates:
                continue
            text, keys = _fill(rng, rng.choice(lates), person, used)
            body, used = body + text, used | keys
        body, used = add_tails(body, used, target, 12)
        doc = _finish(name, body)
        count = doc.count(birth)
        if len(doc) > LEN_MAX or "  " in doc:
            continue
        if category == "absent" and count != 0:
            continue
        if category != "absent" and count != 1:
            continue
        if category == "early" and birth not in doc[:SEEN_CHARS]:
            continue
        if category == "late" and birth in doc[:SEEN_CHARS]:
            continue
        return doc
    raise RuntimeError(f"could not write a {category} biography for {name}")


def _target_length(rng, minimum=LEN_MIN):
    while True:
        n = int(round(math.exp(rng.gauss(LEN_MU, LEN_SIGMA))))
        if minimum <= n <= LEN_MAX:
            return n


def _categories(rng, n):
    absent = round(n * ABSENT_RATE)
    late = round(n * LATE_RATE)
    cats = ["absent"] * absent + ["late"] * late + ["early"] * (n - absent - late)
    rng.shuffle(cats)
    return cats


def _resolve_splits(n_people, n_train, n_dev, n_test):
    given = {k: v for k, v in (("train", n_train), ("dev", n_dev), ("test", n_test))
             if v is not None}
    for k, v in given.items():
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"n_{k} must be a non-negative int")
    free = [k for k in ("train", "dev", "test") if k not in given]
    left = n_people - sum(given.values())
    if left < 0:
        raise ValueError("n_train + n_dev + n_test exceeds n_people")
    if free:
        ratio = dict(zip(("train", "dev", "test"), COURSE_SPLITS))
        total = sum(ratio[k] for k in free)
        for k in free[:-1]:
            given[k] = round(left * ratio[k] / total)
        given[free[-1]] = left - sum(given[k] for k in free[:-1])
    return given["train"], given["dev"], given["test"]


def build_world(n_people=COURSE_PEOPLE, seed=DEFAULT_SEED, n_train=None, n_dev=None,
                n_test=None, mentions=0):
    """The world as data: (docs, people); people are dicts with at least name, birth,
    split ("train", "dev", "test" or None for people without a question) and category.
    docs[i] is the biography of people[i]; mention lines, if any, follow them."""
    if not isinstance(n_people, int) or n_people < 1:
        raise ValueError("n_people must be a positive int")
    if not isinstance(mentions, int) or mentions < 0:
        raise ValueError("mentions must be a non-negative int")
    n_train, n_dev, n_test = _resolve_splits(n_people, n_train, n_dev, n_test)
    rng = random.Random(seed)
    names, people = set(), []
    while len(people) < n_people:
        name, short, he, style = _make_name(rng)
        if name in names or _contains_place(name):
            continue
        names.add(name)
        people.append(dict(name=name, N=name, S=short, he=he, style=style))
    n_extra = n_people - n_train - n_dev - n_test
    splits = (["train"] * n_train + ["dev"] * n_dev + ["test"] * n_test + [None] * n_extra)
    sizes = (("train", n_train), ("dev", n_dev), ("test", n_test), (None, n_extra))
    births, cats = [], []
    for _split, n in sizes:
        births += _stratified_places(rng, n)
        cats += _categories(rng, n)
    docs = []
    for person, split, birth, cat in zip(people, splits, births, cats):
        person.update(split=split, category=cat)
        _make_life(rng, person)
        _make_places(rng, person, birth)
        target = _target_length(rng, 150 if cat == "late" else LEN_MIN)
        docs.append(_biography(rng, person, cat, target))
    _cover_question_characters(rng, docs, people)
    return docs + _mention_lines(people, mentions, seed), people


def _question(name):
    return f"Where was {name} born?"


def _cover_question_characters(rng, docs, people):
    """The vocabulary comes from wiki.txt alone: make sure every character of every question
    and answer occurs in it, by giving a few long-enough biographies one more clause."""
    def missing():
        have = set("".join(docs))
        need = set()
        for p in people:
            if p["split"] is not None:
                need |= set(_question(p["name"])) | set(p["birth"])
        return sorted(need - have)

    tb = tables()
    order = list(range(len(people)))
    rng.shuffle(order)
    for ch in missing():
        if ch in set("".join(docs)):
            continue
        places = sorted(p for p in tb.places if ch in p)
        titles = [t for t in tb.titles if ch in t]
        for i in order:
            person, doc = people[i], docs[i]
            if person["category"] != "early":
                continue
            if places:
                place = places[0]
                if _clash(place, place, person["birth"], person["P"]) or place in doc:
                    continue
                extra = f"; {person['he']} later visited {place}"
            elif titles:
                extra = f"; {person['his']} last {person['work']} was \"{titles[0]}\""
            else:
                raise RuntimeError(f"no way to put {ch!r} into wiki.txt")
            new = doc[:-2] + extra + " ."
            if len(new) <= LEN_MAX and new.count(person["birth"]) == 1:
                docs[i] = new
                break
        else:
            raise RuntimeError(f"no biography could take {ch!r}")


def generate(out_dir, n_people=COURSE_PEOPLE, seed=DEFAULT_SEED, n_train=None, n_dev=None,
             n_test=None, mentions=0):
    """Write the five data files of one world into out_dir (created if needed).

    n_people people each get one biography in wiki.txt (train people first, then dev, test,
    then people without a question).  Split sizes left as None share the people not
    already assigned in the course's 2000 : 500 : 437 proportions, so the defaults give the
    course's sizes and e.g. generate(d, n_people=400, n_dev=200) gives 164 / 200 / 36.
    mentions=K adds K mention lines per person after the biographies.
    Returns a dict with the paths written and the split sizes."""
    docs, people = build_world(n_people, seed, n_train, n_dev, n_test, mentions)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = collections.defaultdict(list)
    for p in people:
        if p["split"] is not None:
            rows[p["split"]].append((_question(p["name"]), p["birth"]))
    contents = {
        "wiki.txt": "\n".join(docs),
        "birth_places_train.tsv": "".join(f"{q}\t{a}\n" for q, a in rows["train"]),
        "birth_dev.tsv": "".join(f"{q}\t{a}\n" for q, a in rows["dev"]),
        "birth_test_inputs.tsv": "".join(f"{q}\n" for q, _ in rows["test"]),
        "birth_test.tsv": "".join(f"{q}\t{a}\n" for q, a in rows["test"]),
    }
    paths = {}
    for fname, text in contents.items():
        path = out / fname
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        paths[fname] = path
    return dict(paths=paths, n_people=n_people, seed=seed, n_train=len(rows["train"]),
                n_dev=len(rows["dev"]), n_test=len(rows["test"]), mentions=mentions)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE),
                    help="folder to write (or, with --stats, to read); default: this folder")
    ap.add_argument("--stats", action="store_true",
                    help="print a Markdown table of statistics (ours vs course) and exit")
    ap.add_argument("--course", default=None,
                    help="folder with the course data (default: <repo>/../shared/course-data)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--people", type=int, default=COURSE_PEOPLE)
    ap.add_argument("--train", type=int, default=None)
    ap.add_argument("--dev", type=int, default=None)
    ap.add_argument("--test", type=int, default=None)
    ap.add_argument("--mentions", type=int, default=0,
                    help="mention lines per person after the biographies (the quick preset's world)")
    args = ap.parse_args(argv)
    if args.stats:
        import stats  # data/stats.py: this folder is on sys.path when the script runs
        print(stats.stats_table(args.out, args.course))
        return 0
    info = generate(args.out, n_people=args.people, seed=args.seed, n_train=args.train,
                    n_dev=args.dev, n_test=args.test, mentions=args.mentions)
    print(f"wrote {', '.join(info['paths'])} to {args.out} "
          f"({info['n_train']} / {info['n_dev']} / {info['n_test']} questions, "
          f"{info['n_people']} biographies, {info['n_people'] * args.mentions} mention lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
