"""The base of GPTConfig and TrainerConfig: named settings with defaults, and no others.

minGPT's configs turn any keyword into an attribute, so a misspelt one (n_embed=512,
max_epoch=3) is stored, never read, and the run quietly uses the default. Here a config's
settings are its class attributes; setting any other name, as a keyword or afterwards, is a
TypeError that names it and the setting it most resembles.
"""

import difflib


class Config:

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)

    @classmethod
    def settings(cls):
        """The names a config of this class takes: its class attributes other than methods."""
        return sorted(n for n in dir(cls) if not n.startswith("_") and not callable(getattr(cls, n)))

    def __setattr__(self, name, value):
        known = self.settings()
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else "its settings: " + ", ".join(known)
            raise TypeError(f"{type(self).__name__}: unknown setting {name!r} ({hint})")
        super().__setattr__(name, value)
