"""The assignment's code: what the course's grader imports as `submission`."""

from .attention import ATTENTION, CausalSelfAttention, SynthesizerAttention
from .dataset import CharCorruptionDataset, NameDataset
from .helper import finetune, initialize_synthesizer_model, initialize_vanilla_model, pretrain, train
from .model import GPT, GPTConfig
from .trainer import Trainer, TrainerConfig
from .utils import evaluate_places, sample
