"""Exception types of the participant's learning side.

Every error names the bad argument or file and what was expected; ``code`` is a stable,
machine-readable identifier the daemon reuses in its reports (as :mod:`crypto.errors` does).
"""

from __future__ import annotations

__all__ = [
    "BackboneLoadError",
    "BackboneMismatchError",
    "DatasetError",
    "LearningConfigError",
    "LearningError",
]


class LearningError(Exception):
    """Base class of every error raised by :mod:`participant.learning`."""

    code = "learning_error"


class LearningConfigError(LearningError, ValueError):
    """A configuration value is outside its allowed range or unknown.

    ``parameter`` names the offending argument; the message gives the allowed values.
    """

    code = "invalid_learning_config"

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"Argument '{parameter}' {message}")
        self.parameter = parameter


class BackboneLoadError(LearningError):
    """The frozen CLIP backbone could not be built or its weights could not be loaded.

    The message names the model, the checkpoint file or directory, and what was expected.
    """

    code = "backbone_load_failed"


class BackboneMismatchError(LearningError):
    """The backbone loaded is not the one the federation (or a model file) pins: another
    open_clip model, or other weights (fingerprint). The message names both."""

    code = "backbone_mismatch"


class DatasetError(LearningError, ValueError):
    """A participant's dataset is malformed: empty class, unreadable image, unknown label.

    ``path`` is the file or directory at fault, when there is one.
    """

    code = "dataset_invalid"

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path
