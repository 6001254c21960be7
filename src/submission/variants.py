"""Every course edition's attention variant, in one table.

A variant name is read in many places (run.py's --variant, run.sh's stages, the model's
position embeddings and length limit, the check that names another variant's params,
the grader's thresholds, bench, quickstart, tests). They all read it from VARIANTS, so
adding a variant means one class, one entry here, one initialize_<name>_model in helper
and one formula test.

The model itself is chosen by the course's own switches on GPTConfig (`synthesizer`,
`rope`, `perceiver`; none of them means vanilla): `configure` sets them, `of_config`
reads them back.
"""

from dataclasses import dataclass, field
from typing import Callable, Optional

from .attention import CausalSelfAttention, SynthesizerAttention


@dataclass(frozen=True)
class Variant:
    name: str  # --variant, the stage prefix and the params/predictions file prefix
    editions: str  # the course editions that use it
    switch: Optional[str]  # the GPTConfig attribute the course sets True for it; None: the default
    attention: type  # the self-attention of its Transformer blocks
    pos_emb: bool  # learned position embeddings (GPT.pos_emb)
    short: int  # positions it reads: block_size - short
    kv_cache: bool  # batched decoding with decoding.DecodeCache; else by recomputation
    marker: Optional[str]  # a state_dict key ending only this variant's params have
    options: dict = field(default_factory=dict)  # initialize_<name>_model keywords (run.py flags) and defaults
    without_pretrain: bool = False  # has the course's no-pretraining stages too
    aliases: tuple = ()  # (misspelt stage name, the stage it means): the course handouts' typos
    dev_threshold: Optional[float] = None  # the grader's dev accuracy threshold (None: reported only)
    test_threshold: Optional[float] = None  # ... on test, where the test file has answers
    expectation: Optional[str] = None  # what the handout says to expect
    requires: Optional[Callable] = None  # config -> its problem for this variant as one line, or None

    def max_positions(self, config):
        return config.block_size - self.short

    def stages(self):
        """The course stages of this variant, in the order they run (aliases left out)."""
        nopre = [f"{self.name}_finetune_without_pretrain", f"{self.name}_eval_dev_without_pretrain",
                 f"{self.name}_eval_test_without_pretrain"] if self.without_pretrain else []
        return nopre + [f"{self.name}_pretrain", f"{self.name}_finetune_with_pretrain",
                        f"{self.name}_eval_dev_with_pretrain", f"{self.name}_eval_test_with_pretrain"]

    def check(self, config):
        """The config's problem for this variant, as one line; None when it is fine."""
        return self.requires(config) if self.requires else None


def even_head_width(config):
    head = config.n_embd // config.n_head
    if head % 2:
        return f"rope rotates pairs of coordinates: the head width n_embd / n_head = {head} must be even"
    return None


def bottleneck_fits(config):
    m = getattr(config, "bottleneck_dim", None)
    if m is None or not 1 <= m <= config.block_size:
        return f"the perceiver's bottleneck_dim must be in [1, block_size = {config.block_size}], not {m}"
    if config.n_layer < 2:
        return f"the perceiver needs n_layer >= 2 (a down and an up block), not {config.n_layer}"
    return None


VARIANTS = {v.name: v for v in (
    Variant("vanilla", "every edition", None, CausalSelfAttention, pos_emb=True, short=0, kv_cache=True,
            marker=None, without_pretrain=True,
            aliases=(("vanilla_finetime_without_pretrain", "vanilla_finetune_without_pretrain"),),
            dev_threshold=0.10),
    Variant("synthesizer", "the Synthesizer editions", "synthesizer", SynthesizerAttention, pos_emb=True,
            short=1, kv_cache=True, marker="attn.w2",
            aliases=(("synthesizer_finetrain_with_pretrain", "synthesizer_finetune_with_pretrain"),),
            dev_threshold=0.05),
    Variant("rope", "2024-25", "rope", CausalSelfAttention, pos_emb=False, short=0,
            kv_cache=True, marker="attn.rope_cache", requires=even_head_width,
            dev_threshold=0.022, test_threshold=0.016,
            expectation="the 2024-25 handout: at least 20% dev"),
    Variant("perceiver", "2023-24", "perceiver", CausalSelfAttention, pos_emb=True,
            short=0, kv_cache=False, marker="down_block.C", options={"bottleneck_dim": 32},
            requires=bottleneck_fits,
            dev_threshold=0.024, test_threshold=0.020),
)}
DEFAULT = next(v for v in VARIANTS.values() if v.switch is None)


def get(name):
    """The registry entry of `name`; a ValueError naming the choices for anything else."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose one of {', '.join(VARIANTS)}")
    return VARIANTS[name]


def of_config(config):
    """The variant a GPTConfig's switches select."""
    on = [v for v in VARIANTS.values() if v.switch and getattr(config, v.switch, False)]
    if len(on) > 1:
        raise ValueError(f"GPTConfig switches on more than one variant: {', '.join(v.name for v in on)}")
    return on[0] if on else DEFAULT


def configure(config, name, **options):
    """Set the config's switches (and options, else their defaults) so that it builds `name`."""
    variant = get(name)
    for v in VARIANTS.values():
        if v.switch:
            setattr(config, v.switch, v is variant)
    for key, default in variant.options.items():
        value = options.pop(key, None)
        setattr(config, key, default if value is None else value)
    if options:
        raise TypeError(f"{name} takes no option {', '.join(options)}")
    return config


def recognise(keys):
    """The variant whose params these state_dict keys are (by their marker keys)."""
    return next((v for v in VARIANTS.values() if v.marker and any(k.endswith(v.marker) for k in keys)), DEFAULT)
