"""The fast path's kernels: dropout with a cheaper mask, and causal attention with dropout.

A model computes either way, chosen when it is built (GPTConfig.implementation):
"fast" (the default) uses these; "plain" computes as the course does, in explicit steps
(nn.Dropout, softmax of the masked scores). Tests hold the two to the same numbers, and
`./run.sh bench` measures one against the other.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

IMPLEMENTATIONS = ("fast", "plain")


def is_fast(config):
    """Whether modules built from `config` compute the fast way (a config without the field: yes)."""
    name = getattr(config, "implementation", "fast")
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {name!r}: choose one of {', '.join(IMPLEMENTATIONS)}")
    return name == "fast"


def dropout_keep_mask(shape, p, device):
    """Bernoulli(1 - p) keep-mask, four draws per 64-bit random number.

    torch's own dropout asks the generator for one float per element, which on a CPU costs
    more than the attention it regularises. Slicing each 64-bit draw into four 16-bit
    lanes gives the same distribution up to rounding p to a multiple of 1/65536.
    """
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-2**63, 2**63 - 1)
    lanes = words.view(torch.int16)[:n].view(shape)
    return lanes >= -32768 + round(p * 65536)


class _Dropout(torch.autograd.Function):
    # In fp32 the mask becomes a tensor of 0 and 1/(1-p): one multiplication each way, cheaper
    # on a CPU than scaling by a boolean mask. In lower precision 1/(1-p) would be rounded
    # (to 1.109 for p = 0.1 in bf16), so there the boolean mask and exact scale stay.
    @staticmethod
    def forward(ctx, x, p):
        keep = dropout_keep_mask(x.shape, p, x.device)
        ctx.scale = 1.0 / (1.0 - p)
        if x.dtype == torch.float32:
            keep = keep.to(x.dtype).mul_(ctx.scale)
        ctx.save_for_backward(keep)
        return _Dropout.apply_mask(x, keep, ctx.scale)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return _Dropout.apply_mask(grad, keep, ctx.scale), None

    @staticmethod
    def apply_mask(t, keep, scale):
        if keep.dtype == torch.bool:
            return torch.ops.aten.native_dropout_backward(t, keep, scale)
        return t * keep


def dropout(x, p, training):
    """F.dropout(x, p, training) with the fast keep-mask."""
    if not training or p == 0.0:
        return x
    if p >= 1.0:
        return torch.zeros_like(x)
    return _Dropout.apply(x, p)


class Dropout(nn.Dropout):
    """nn.Dropout, with the fast mask unless fast=False: same rate, same place, same (absent) state_dict."""

    def __init__(self, p, fast=True):
        super().__init__(p)
        self.fast = fast

    def forward(self, x):
        if self.fast:
            return dropout(x, self.p, self.training)
        return F.dropout(x, self.p, self.training)  # the course's nn.Dropout


def causal_bias(T, device, dtype):
    return torch.full((T, T), float("-inf"), device=device, dtype=dtype).triu_(1)


def causal_attention(q, k, v, scale, dropout_p):
    """softmax(q k^T * scale + causal mask) v with dropout on the weights, the fast way.

    Without dropout the fused kernel does it all. With dropout (training) the weights must
    exist as a tensor: scale and mask go into one batched matmul, and the dropout mask is
    drawn the fast way.
    """
    if dropout_p == 0.0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    B, H, T, E = q.shape
    att = torch.baddbmm(causal_bias(T, q.device, q.dtype).expand(B * H, T, T),
                        q.reshape(B * H, T, E), k.reshape(B * H, T, E).transpose(1, 2), alpha=scale)
    att = dropout(F.softmax(att, dim=-1), dropout_p, True)
    return torch.bmm(att, v.reshape(B * H, T, v.shape[-1])).view(B, H, T, v.shape[-1])
