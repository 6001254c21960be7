"""The assignment's code: what the course's grader imports as `submission`."""

from .attention import (CausalCrossAttention, CausalSelfAttention, SynthesizerAttention,
                        apply_rotary_emb, precompute_rotary_emb)
from .dataset import CharCorruptionDataset, NameDataset
from .helper import (finetune, initialize_perceiver_model, initialize_rope_model, initialize_synthesizer_model,
                     initialize_vanilla_model, pretrain, train)
from .model import GPT, DownProjectBlock, GPTConfig, UpProjectBlock
from .variants import VARIANTS
from .trainer import Trainer, TrainerConfig
from .utils import evaluate_places, sample
