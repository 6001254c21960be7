"""A character-level language model, trained and sampled: minGPT in its plainest use.

The course ships this as a notebook; it is the shortest path through the pieces the
assignment reuses (GPT, Trainer, sample). It learns to continue text one character at a
time from the project's own biographies.

    python src/submission/mingpt-demo/play_char.py                  # ~1 minute on a CPU
    python src/submission/mingpt-demo/play_char.py --epochs 5 --prompt "Ana Vidal. "
"""

import argparse
import os
import sys

import torch
from torch.utils.data import Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from submission.model import GPT, GPTConfig  # noqa: E402
from submission.trainer import Trainer, TrainerConfig  # noqa: E402
from submission.utils import sample, set_seed  # noqa: E402


class CharDataset(Dataset):
    """Every window of block_size + 1 characters: predict each next character.

    Ids start at 1: the model's loss ignores id 0 (the assignment's PAD).
    """

    def __init__(self, text, block_size):
        chars = sorted(set(text))
        self.stoi = {c: i + 1 for i, c in enumerate(chars)}
        self.itos = {i: c for c, i in self.stoi.items()}
        self.block_size, self.vocab_size = block_size, len(chars) + 1
        self.ids = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)

    def __len__(self):
        return len(self.ids) - self.block_size

    def __getitem__(self, i):
        chunk = self.ids[i:i + self.block_size + 1]
        return chunk[:-1], chunk[1:]


def main():
    argp = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    argp.add_argument("--text", default=os.path.join(HERE, "..", "..", "..", "data", "wiki.txt"))
    argp.add_argument("--chars", type=int, default=100_000, help="train on the first N characters")
    argp.add_argument("--epochs", type=int, default=1)
    argp.add_argument("--prompt", default="Where")
    args = argp.parse_args()
    set_seed(0)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()[:args.chars]
    data = CharDataset(text, block_size=64)
    model = GPT(GPTConfig(data.vocab_size, data.block_size, n_layer=2, n_head=4, n_embd=128))
    windows = torch.utils.data.Subset(data, range(0, len(data), 4))  # overlapping windows: every 4th
    Trainer(model, windows, None, TrainerConfig(max_epochs=args.epochs, batch_size=64, learning_rate=3e-3,
                                                lr_decay=True, warmup_tokens=2e4,
                                                final_tokens=args.epochs * len(windows) * 64)).train()
    prompt = torch.tensor([[data.stoi[c] for c in args.prompt if c in data.stoi]])
    out = sample(model.cpu(), prompt, 200, temperature=0.8, sample=True, top_k=10)[0]
    print("".join(data.itos[int(i)] for i in out))


if __name__ == "__main__":
    main()
