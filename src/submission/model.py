"""GPT: the course's minGPT model, with every edition's attention variant (variants.py).

Module names are the course's (tok_emb, pos_emb, blocks.N.{ln1,attn,ln2,mlp}, ln_f, head;
the Perceiver's down_block and up_block), so a state_dict written by the course's code
loads here strictly and vice versa.
"""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import variants
from .attention import CausalCrossAttention
from .config import Config
from .kernels import Dropout, is_fast


# The course's model, in every edition: what run.py, bench.py and reproduce.py build unless
# told otherwise (the vocabulary is the pretraining corpus's). The grader and the tests
# write these numbers out: they check them.
COURSE_MODEL = dict(n_layer=4, n_head=8, n_embd=256, block_size=128)


class GPTConfig(Config):
    """Model hyperparameters, as in minGPT, but a keyword that is not one of them is an error."""

    vocab_size = None  # these two are set by __init__
    block_size = None
    embd_pdrop = 0.1
    resid_pdrop = 0.1
    attn_pdrop = 0.1
    n_layer = 12
    n_head = 12
    n_embd = 768
    # The course editions' switches (at most one on; none: vanilla), see variants.py.
    synthesizer = False
    rope = False
    perceiver = False
    bottleneck_dim = None  # the Perceiver's m
    # How every module computes (kernels.py): "fast", or "plain", the course's explicit steps
    # in fp32 eager, which tests and bench compare it with. A plain model trains on whole batches.
    implementation = "fast"

    def __init__(self, vocab_size, block_size, **kwargs):
        self.vocab_size = vocab_size
        self.block_size = block_size
        super().__init__(**kwargs)

    @property
    def variant(self):
        """The variant's name, read from the switches; assigning a name sets them."""
        return variants.of_config(self).name

    @variant.setter
    def variant(self, name):
        variants.configure(self, name)


def mlp(config):
    return nn.Sequential(
        nn.Linear(config.n_embd, 4 * config.n_embd),
        nn.GELU(),
        nn.Linear(4 * config.n_embd, config.n_embd),
        Dropout(config.resid_pdrop, is_fast(config)),
    )


class Block(nn.Module):
    """Pre-norm Transformer block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, config):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.attn = variants.of_config(config).attention(config)
        self.mlp = mlp(config)

    def forward(self, x, layer_past=None, packing=None):
        if packing is None:
            x = x + self.attn(self.ln1(x), layer_past)
        else:  # x is packed (N, C); attention runs per padded group
            x = x + packing.pack([self.attn(h) for h in packing.unpack(self.ln1(x))])
        return x + self.mlp(self.ln2(x))


class DownProjectBlock(nn.Module):
    """The Perceiver's way in: m learned slots C read the input by cross-attention.

    y = C + attn(x_kv=x, x_q=ln1(C)), then y + mlp(ln2(y)): the handout's hint, layer norm
    on C and then on the MLP's input; the input itself is read as it comes. The causal
    mask lets slot j see input positions 0..j only, so with m slots the positions from m
    on reach the bottleneck not at all (they reach the output only through the up block's
    query at their own position).
    """

    def __init__(self, config):
        super().__init__()
        self.C = nn.Parameter(torch.empty(1, config.bottleneck_dim, config.n_embd))
        nn.init.xavier_uniform_(self.C)
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.attn = CausalCrossAttention(config)
        self.mlp = mlp(config)

    def forward(self, x_input):
        y = self.C + self.attn(x_input, self.ln1(self.C))
        return y + self.mlp(self.ln2(y))


class UpProjectBlock(nn.Module):
    """The Perceiver's way out: each input position reads the bottleneck by cross-attention.

    x = x_input + attn(x_kv=ln1(y), x_q=x_input), then x + mlp(ln2(x)); position i sees
    slots 0..i.
    """

    def __init__(self, config):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.attn = CausalCrossAttention(config)
        self.mlp = mlp(config)

    def forward(self, y, x_input):
        x = x_input + self.attn(self.ln1(y), x_input)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Character-level GPT language model with a context of block_size tokens.

    The Perceiver (config.perceiver) puts down_block before and up_block after the
    blocks, which then run on the m = bottleneck_dim slots (their masks are m x m).
    """

    def __init__(self, config):
        super().__init__()
        variant = variants.of_config(config)
        problem = variant.check(config)
        if problem:
            raise ValueError(problem)
        self.variant = variant
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        # rope: positions enter through the rotation of queries and keys only
        self.pos_emb = nn.Parameter(torch.zeros(1, config.block_size, config.n_embd)) if variant.pos_emb else None
        self.drop = Dropout(config.embd_pdrop, is_fast(config))
        if config.perceiver:
            self.down_block = DownProjectBlock(config)
            inner = copy.copy(config)
            inner.block_size = config.bottleneck_dim
            self.blocks = nn.Sequential(*[Block(inner) for _ in range(config.n_layer - 2)])
            self.up_block = UpProjectBlock(config)
        else:
            self.blocks = nn.Sequential(*[Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.block_size = config.block_size
        self.config = config
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def get_block_size(self):
        return self.block_size

    def max_positions(self):
        """Longest sequence the model can read (the Synthesizer has block_size - 1 key slots)."""
        return self.variant.max_positions(self.config)

    def embed(self, idx, pos=None):
        """Token embeddings plus, where the variant has them, position embeddings; then dropout.

        The one place positions enter the model (rope adds them in attention instead): `pos`
        gives each token's position, shaped like idx; None means 0..t-1 along its last axis.
        """
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + (self.pos_emb[:, :idx.size(-1), :] if pos is None else self.pos_emb[0, pos])
        return self.drop(x)

    def forward(self, idx, targets=None, cache=None):
        """Logits for every position, and the cross-entropy loss when targets are given.

        `cache` (a decoding.DecodeCache) switches to incremental decoding: the first call
        fills it from a prompt batch, later calls feed one new token per row at the
        positions it holds; each call moves it on.
        """
        b, t = idx.size()
        pos = None if cache is None else cache.pos  # None: positions 0..t-1 (also a prompt filling the cache)
        if pos is None and t > self.block_size:
            raise ValueError(f"sequence of {t} tokens exceeds block_size {self.block_size}")
        if self.config.perceiver and cache is not None:
            raise ValueError("the perceiver decodes by recomputation, without caches")
        x = self.embed(idx, None if pos is None else pos[:, None])
        if self.config.perceiver:
            x = self.up_block(self.blocks(self.down_block(x)), x)
        else:
            for i, block in enumerate(self.blocks):
                x = block(x, None if cache is None else cache.layers[i])
        if cache is not None:
            cache.advance()
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else cross_entropy(logits, targets)
        return logits, loss

    def packed_loss(self, packing):
        """The loss forward() gives for the batch `packing` was made from, without its padding.

        The Perceiver's bottleneck mixes positions in every layer and costs the same for
        short rows as for long ones, so it runs the batch in one piece, trimmed to its
        longest row (which changes nothing, as it is causal), and packs only the logits.
        """
        if self.config.perceiver:
            width = max(t for _, t in packing.shapes)
            groups = [F.pad(x[..., 0], (0, width - x.size(1))) for x in packing.unpack(packing.tokens[:, None])]
            logits = self(torch.cat(groups))[0].split([b for b, _ in packing.shapes])
            return cross_entropy(packing.pack([g[:, :t] for g, (_, t) in zip(logits, packing.shapes)]),
                                 packing.targets)
        x = self.embed(packing.tokens, packing.pos)
        for block in self.blocks:  # rope: each group is unpacked to its rows, so a token turns by its row position
            x = block(x, packing=packing)
        return cross_entropy(self.head(self.ln_f(x)), packing.targets)


def cross_entropy(logits, targets):
    """Mean over the targets that are not PAD (id 0), as the course computes it."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=0)
