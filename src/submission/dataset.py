"""The two datasets of the assignment, and the one vocabulary they share.

The vocabulary is made from the pretraining text alone (CharCorruptionDataset): id 0 is
PAD, id 1 is MASK, then every distinct character of the text in sorted order. NameDataset
borrows it, so a finetuned model reads the same ids its pretraining wrote.

    python dataset.py charcorruption   # a few span-corruption examples from data/wiki.txt
    python dataset.py namedata         # a few question/answer examples
"""

import argparse
import os
import random
import sys

import torch
from torch.utils.data import Dataset

PAD_CHAR = "\u25A1"  # □
MASK_CHAR = "\u2047"  # ⁇
MIN_DOC_CHARS = 4


class DataError(ValueError):
    """A problem with a user's data file, phrased for one line of output."""


def split_rows(text, source):
    """Split TSV text into (line_number, question, answer-or-None) rows.

    A trailing newline is optional (so are blank lines after the last row, and CRLF line
    ends); blank lines inside the file and rows with more than one tab are errors naming the
    line, because silently skipping them shifts every prediction.
    """
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    rows = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line.strip():
            raise DataError(f"{source}:{n}: empty row")
        fields = line.split("\t")
        if len(fields) > 2:
            raise DataError(f"{source}:{n}: expected 'question<TAB>answer', found {len(fields) - 1} tabs")
        rows.append((n, fields[0], fields[1] if len(fields) == 2 else None))
    return rows


class Vocabulary:
    """Character <-> id maps; characters outside the vocabulary are counted, then dropped."""

    def __init__(self, text, source="pretraining text"):
        chars = sorted(set(text))
        for special in (PAD_CHAR, MASK_CHAR):
            if special in chars:
                line = text.count("\n", 0, text.index(special)) + 1
                raise DataError(f"{source}:{line}: contains {special!r}, which the model reserves for "
                                f"{'padding' if special == PAD_CHAR else 'masks'}; remove or replace it")
        chars = [PAD_CHAR, MASK_CHAR] + chars
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.itos = {i: ch for i, ch in enumerate(chars)}

    def encodable(self, s):
        """s without the characters the vocabulary lacks, and how many were dropped.

        PAD and MASK count as lacking: in a question or answer they would break its format.
        """
        kept = "".join(c for c in s if c in self.stoi and c not in (PAD_CHAR, MASK_CHAR))
        return kept, len(s) - len(kept)

    def unknown(self, s):
        """The characters of s that `encodable` drops."""
        return {c for c in s if c not in self.stoi or c in (PAD_CHAR, MASK_CHAR)}

    def encode(self, s):
        return [self.stoi[c] for c in s]

    def decode(self, ids):
        return "".join(self.itos[int(i)] for i in ids)


def describe_dropped(dropped, chars, rows, total_rows):
    """'dropped 5 characters (3 distinct: 'Ü', 'ë', 'ó') from 1 of 2 rows'."""
    shown = ", ".join(repr(c) for c in sorted(chars)[:10]) + (", ..." if len(chars) > 10 else "")
    return (f"dropped {dropped} character{'s' if dropped != 1 else ''} not in the pretraining vocabulary "
            f"({len(chars)} distinct: {shown}) from {rows} of {total_rows} rows")


class CharCorruptionDataset(Dataset):
    """Span corruption on one document per line (a one-span simplification of T5's).

    Each item truncates a document to a random length in [4, int(block_size * cap)], cuts a
    random span of about a quarter of it, and asks the model to write the span back:

        prefix MASK suffix MASK span PAD...    (x = all but the last char, y = all but the first)

    Every line of the text is a document, as in the course: `len` is the number of lines,
    so a file ending in a newline has an empty last document, and the course's learning-rate
    schedule (final_tokens = 200 * len * block_size) counts it. A document shorter than the
    drawn length is used whole; an empty one becomes `MASK MASK PAD...`.

    `cap` is the truncation cap as a fraction of the block: 7/8 in the 2021-2024 editions,
    3/4 in the 2025 edition's grader.
    """

    PAD_CHAR = PAD_CHAR
    MASK_CHAR = MASK_CHAR

    def __init__(self, data, block_size, source="pretraining text", cap=7 / 8):
        if not MIN_DOC_CHARS <= int(block_size * cap) <= block_size - 2:
            raise ValueError(f"truncation cap {cap:g} of a {block_size}-character block must leave "
                             f"{MIN_DOC_CHARS} to {block_size - 2} characters (the two masks need room)")
        self.vocab = Vocabulary(data, source)
        self.stoi, self.itos = self.vocab.stoi, self.vocab.itos
        self.block_size = block_size
        self.cap = cap
        self.max_length = int(block_size * cap)
        self.vocab_size = len(self.stoi)
        self.data = data.split("\n")
        self.short = sum(len(d) < MIN_DOC_CHARS for d in self.data)
        print(f"data has {len(data)} characters, {self.vocab_size} unique.")
        if self.short:
            print(f"{self.short} of {len(self.data)} documents are shorter than {MIN_DOC_CHARS} characters "
                  f"(empty lines included); they are used whole")

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        doc = self.data[idx]
        doc = doc[:random.randint(MIN_DOC_CHARS, self.max_length)]
        n = len(doc)
        quarter = max(1, round(n / 4))  # Python's round: halves to even
        span = min(n, random.randint(1, 2 * quarter - 1))  # mean: a quarter of the truncated document
        start = random.randint(0, n - span)
        prefix, masked, suffix = doc[:start], doc[start:start + span], doc[start + span:]
        s = prefix + MASK_CHAR + suffix + MASK_CHAR + masked
        s += PAD_CHAR * (self.block_size - len(s))
        ids = torch.tensor(self.vocab.encode(s), dtype=torch.long)
        return ids[:-1], ids[1:]


class NameDataset(Dataset):
    """'Where was X born?<TAB>place' rows as `question MASK place MASK PAD...`.

    y is PAD over the question, so the loss (ignore_index = PAD) only teaches the answer.
    Characters the pretraining vocabulary lacks are dropped, with one warning.
    """

    def __init__(self, pretraining_dataset, data, source="finetuning data"):
        self.MASK_CHAR, self.PAD_CHAR = MASK_CHAR, PAD_CHAR
        self.vocab = pretraining_dataset.vocab
        self.itos, self.stoi = self.vocab.itos, self.vocab.stoi
        self.block_size = pretraining_dataset.block_size
        self.data, dropped, unknown, rows_hit = [], 0, set(), 0
        rows = split_rows(data, source)
        for n, question, answer in rows:
            if answer is None:
                raise DataError(f"{source}:{n}: no tab: expected 'question<TAB>answer'")
            if not answer.strip():
                raise DataError(f"{source}:{n}: empty answer after the tab")
            unknown |= self.vocab.unknown(question + answer)
            (question, dq), (answer, da) = self.vocab.encodable(question), self.vocab.encodable(answer)
            dropped += dq + da
            rows_hit += bool(dq + da)
            if len(question) + len(answer) + 2 > self.block_size:
                raise DataError(f"{source}:{n}: question and answer are {len(question) + len(answer) + 2} "
                                f"characters with the masks; the block holds {self.block_size}")
            self.data.append((question, answer))
        if dropped:
            print(f"warning: {source}: {describe_dropped(dropped, unknown, rows_hit, len(rows))}; "
                  f"training on the rest of each row", file=sys.stderr)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        inp, oup = self.data[idx]
        x = inp + MASK_CHAR + oup + MASK_CHAR
        x = x + PAD_CHAR * (self.block_size - len(x))
        y = PAD_CHAR * (len(inp) - 1) + x[len(inp):]
        x = x[:-1]
        return (torch.tensor(self.vocab.encode(x), dtype=torch.long),
                torch.tensor(self.vocab.encode(y), dtype=torch.long))


def main():
    argp = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    argp.add_argument("dataset_type", choices=["namedata", "charcorruption"])
    argp.add_argument("--data_dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                          "..", "..", "data"))
    args = argp.parse_args()
    with open(os.path.join(args.data_dir, "wiki.txt"), encoding="utf-8") as f:
        corruption_dataset = CharCorruptionDataset(f.read(), 128)
    if args.dataset_type == "namedata":
        path = os.path.join(args.data_dir, "birth_places_train.tsv")
        with open(path, encoding="utf-8") as f:
            dataset = NameDataset(corruption_dataset, f.read(), source=path)
    else:
        dataset = corruption_dataset
    for _, example in zip(range(4), dataset):
        x, y = example
        print("x:", corruption_dataset.vocab.decode(x))
        print("y:", corruption_dataset.vocab.decode(y))


if __name__ == "__main__":
    main()
