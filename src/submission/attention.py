"""Attention of every course edition: dot-product, Synthesizer, rotary, and cross-attention.

The self-attention variants end in the same computation, softmax(q k^T * scale + causal
mask) v, and differ only in where q and k come from:

    vanilla      q = X Q_i,               k = X K_i,         scale = 1/sqrt(d/h)
    rope         q = R_t X Q_i,           k = R_s X K_i      (R_t: rotation by position t)
    synthesizer  q = [ReLU(X A_i + b1), 1], k_j = [B_i[:, j], b2[j]], scale = 1

so the Synthesizer's scores ReLU(X A_i + b1) B_i + b2 are a dot product too, with "keys"
that depend on the key's position rather than on its token. That is the one thing a
subclass defines (`queries_keys`); everything else, the softmax, dropout and the decoding
cache, is shared. The Perceiver's CausalCrossAttention takes its queries from one
sequence and its keys and values from another.

Each module computes one of two ways, fixed when it is built (GPTConfig.implementation):
"plain", the course's explicit masked softmax in fp32 eager steps with nn.Dropout, or
"fast" (kernels.py), the fused kernel and the cheaper dropout mask. Both are in the same
forward, side by side.

Parameter names and shapes are the course's, so checkpoints load both ways strictly.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .kernels import Dropout, causal_attention, is_fast


class _Attention(nn.Module):
    """What every attention here has: value/output projections, dropout, the causal mask."""

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.value = nn.Linear(config.n_embd, config.n_embd)
        self.fast = is_fast(config)
        self.attn_drop = Dropout(config.attn_pdrop, self.fast)
        self.resid_drop = Dropout(config.resid_pdrop, self.fast)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        # The plain way's causal mask (the fused kernel needs none); part of the course's state_dict.
        self.register_buffer("mask", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head
        self.block_size = config.block_size


class _SelfAttention(_Attention):
    """The self-attention variants: they differ only in how scores are made (queries_keys)."""

    def heads(self, t):
        B, T, C = t.shape
        return t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

    def queries_keys(self, x, pos):
        """Return (q, k, scale): q (B,h,T,e), k broadcastable to (B,h,T,e)."""
        raise NotImplementedError

    def forward(self, x, layer_past=None):
        B, T, C = x.size()
        pos = None if layer_past is None else layer_past.pos  # None: positions 0..T-1
        q, k, scale = self.queries_keys(x, pos)
        k = k.expand(B, self.n_head, T, k.shape[-1])
        v = self.heads(self.value(x))
        keep = None
        if layer_past is not None:  # this layer's slots of a decoding.DecodeCache
            k, v, keep = layer_past.extend(k, v)
        if keep is not None:  # one new token per row, each at its own position
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
        elif self.fast:
            y = causal_attention(q, k, v, scale, self.attn_drop.p if self.training else 0.0)
        else:  # the course's computation, step by step
            att = (q @ k.transpose(-2, -1)) * scale
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            y = self.attn_drop(F.softmax(att, dim=-1)) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


def precompute_rotary_emb(dim, max_positions, dtype=torch.float32):
    """(max_positions, dim/2, 2): (cos t*theta_i, sin t*theta_i), theta_i = 10000^(-2i/dim).

    The handouts' docstrings print the exponent without its minus sign; with it the
    angle grows with the position t, slowest for the last pairs, as in the RoPE paper.
    Computed in float64, returned in `dtype` (float32, as the course's buffer).
    """
    if dim % 2:
        raise ValueError(f"rotary embeddings rotate pairs of coordinates: dim must be even, not {dim}")
    theta = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angle = torch.arange(max_positions, dtype=torch.float64)[:, None] * theta[None, :]
    return torch.stack([angle.cos(), angle.sin()], -1).to(dtype)


def rotate(x, cos_sin):
    """Multiply each pair (x_2i, x_2i+1), as the complex number x_2i + i x_2i+1, by cos + i sin.

    cos_sin (..., dim/2, 2) broadcasts against x viewed as (..., dim/2, 2). Real arithmetic,
    so that it runs in any dtype (complex bf16 does not exist).
    """
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    cs = cos_sin.to(x.dtype)
    a, b, cos, sin = pairs[..., 0], pairs[..., 1], cs[..., 0], cs[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)


def apply_rotary_emb(x, rope_cache):
    """x (B, n_head, T, head_dim) with the pair at position t rotated by rope_cache[t]."""
    T = x.shape[-2]
    if T > rope_cache.shape[0]:
        raise ValueError(f"rotary embeddings precomputed for {rope_cache.shape[0]} positions, got {T}")
    return rotate(x, rope_cache[:T])


class CausalSelfAttention(_SelfAttention):
    """Multi-head masked self-attention with dot-product scores (the course's vanilla).

    With config.rope (the 2024-25 editions) queries and keys, not values, are rotated by
    their position after the heads are split, so a score depends on the two tokens and
    their distance only; the model then has no position embeddings.
    """

    def __init__(self, config):
        super().__init__(config)
        self.key = nn.Linear(config.n_embd, config.n_embd)
        self.query = nn.Linear(config.n_embd, config.n_embd)
        self.rope = bool(getattr(config, "rope", False))
        if self.rope:
            head = config.n_embd // config.n_head
            if head % 2:
                raise ValueError(f"rope rotates pairs of coordinates: the head width n_embd / n_head = {head} "
                                 f"must be even")
            # A buffer, as in the course: it is in the state_dict.
            self.register_buffer("rope_cache", precompute_rotary_emb(head, config.block_size))

    def queries_keys(self, x, pos):
        q, k = self.heads(self.query(x)), self.heads(self.key(x))
        if self.rope:
            if pos is None:  # positions 0..T-1
                q, k = apply_rotary_emb(q, self.rope_cache), apply_rotary_emb(k, self.rope_cache)
            else:  # one new token per row, at the row's own position; its key is cached rotated
                cos_sin = self.rope_cache[pos][:, None, None]  # (B, 1, 1, e/2, 2)
                q, k = rotate(q, cos_sin), rotate(k, cos_sin)
        return q, k, 1.0 / math.sqrt(q.shape[-1])


class SynthesizerAttention(_SelfAttention):
    """Dense Synthesizer: Y_i = softmax(ReLU(X A_i + b1) B_i + b2)(X V_i), causally masked.

    w1 holds A_i and b1 for all heads; w2 is B_i, shared by the heads, one column per key
    position (block_size - 1 of them, the longest sequence the model is trained on).
    """

    def __init__(self, config):
        super().__init__(config)
        self.w1 = nn.Linear(config.n_embd, config.n_embd)
        self.w2 = nn.Parameter(torch.zeros(config.n_embd // config.n_head, config.block_size - 1))
        self.b2 = nn.Parameter(torch.zeros(config.block_size - 1))
        nn.init.uniform_(self.w2, -0.001, 0.001)

    def queries_keys(self, x, pos):
        B, T, _ = x.shape
        a = F.relu(self.heads(self.w1(x)))
        q = torch.cat([a, a.new_ones(B, self.n_head, T, 1)], -1)
        keys = torch.cat([self.w2.t(), self.b2[:, None]], -1).to(q.dtype)  # (block_size-1, e+1)
        if pos is None:
            if T > keys.shape[0]:
                raise ValueError(f"synthesizer attention covers {keys.shape[0]} positions, got {T}")
            k = keys[:T][None, None]
        else:
            k = keys[pos][:, None, None, :]  # (B,1,1,e+1): the key of the slot being written
        return q, k, 1.0


class CausalCrossAttention(_Attention):
    """Multi-head attention of the queries of x_q over the keys and values of x_kv (the Perceiver's).

    The causal mask is the block_size tril cut to (Tq, Tk): query i sees keys 0..i. In the
    down projection the queries are the bottleneck's m slots, so slot j reads input
    positions 0..j only; in the up projection position i reads slots 0..i. The batch is
    broadcast over max(B_kv, B_q) (the learned basis C has batch 1).
    """

    def __init__(self, config):
        super().__init__(config)
        self.key = nn.Linear(config.n_embd, config.n_embd)
        self.query = nn.Linear(config.n_embd, config.n_embd)

    def heads(self, t, B):
        _, T, C = t.shape
        return t.view(t.shape[0], T, self.n_head, C // self.n_head).transpose(1, 2).expand(B, -1, -1, -1)

    def forward(self, x_kv, x_q):
        (Bk, Tk, C), (Bq, Tq, _) = x_kv.shape, x_q.shape
        B = max(Bk, Bq)
        k, v = self.heads(self.key(x_kv), B), self.heads(self.value(x_kv), B)
        q = self.heads(self.query(x_q), B)
        keep = self.mask[:, :, :Tq, :Tk] != 0
        scale = 1.0 / math.sqrt(q.shape[-1])
        if self.fast and not (self.training and self.attn_drop.p > 0.0):
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
        else:  # the course's computation; also the fast way's with dropout, which needs the weights
            att = ((q @ k.transpose(-2, -1)) * scale).masked_fill(~keep, float("-inf"))
            y = self.attn_drop(F.softmax(att, dim=-1)) @ v
        y = y.transpose(1, 2).reshape(B, Tq, C)
        return self.resid_drop(self.proj(y))
