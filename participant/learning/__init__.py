"""The participant's learning side: frozen CLIP backbone, CoOp prompt learner, strategies.

Typical use by the daemon::

    configure_threads(None)                                  # one torch thread on the CPU
    backbone = load_backbone("tiny-offline", checkpoint, device="auto")
    data = load_dataset(path, transform=backbone.preprocess)
    train, test = split_dataset(data, test_fraction=0.2, seed=seed, participant_id=pid)
    cache = FeatureCache(state_dir / "features")
    train_f, test_f = cache.get(backbone, train), cache.get(backbone, test)
    strategy = get_strategy("secfpp", backbone=backbone, classnames=data.classnames, **settings)
    reduction = get_reduction("jl", n_ctx=16, ctx_dim=backbone.text.width, seed=public_seed)
    # each round
    strategy.begin_round(global_prompt)                      # None before the first publication
    out = strategy.train_round(train_f.features, train_f.labels, epochs=local_epochs)
    x_i = reduction.reduce(out.prompt)                       # SecPC input (if strategy.clustered)
    g_i = out.global_update                                  # aggregation input (if uploads_update)
    held_out = strategy.evaluate(test_f.features, test_f.labels)
"""

from secfpp.participant.learning.backbone import Backbone, TextTower, load_backbone
from secfpp.participant.learning.data import (
    ImageDataset,
    Sample,
    load_dataset,
    read_class_list,
    read_csv_dataset,
    read_image_folder,
    split_dataset,
)
from secfpp.participant.learning.errors import (
    BackboneLoadError,
    DatasetError,
    LearningConfigError,
    LearningError,
)
from secfpp.participant.learning.evaluation import accuracy
from secfpp.participant.learning.features import FeatureCache, FeatureSet, compute_features
from secfpp.participant.learning.prompt_learner import PromptLearner
from secfpp.participant.learning.reduction import (
    JLReduction,
    Reduction,
    TokenPCAReduction,
    data_signal,
    get_reduction,
    signal_of_data,
)
from secfpp.participant.learning.runtime import autocast, configure_threads, resolve_device
from secfpp.participant.learning.strategies import (
    STRATEGIES,
    DpFplConfig,
    DpFplStrategy,
    FedDpaConfig,
    FedDpaStrategy,
    GdpParameters,
    LdpParameters,
    LocalStrategy,
    PromptFlStrategy,
    RoundMetrics,
    RoundOutput,
    SecFppStrategy,
    Strategy,
    StrategyConfig,
    get_strategy,
)

__all__ = [
    "STRATEGIES",
    "Backbone",
    "BackboneLoadError",
    "DatasetError",
    "DpFplConfig",
    "DpFplStrategy",
    "FeatureCache",
    "FeatureSet",
    "FedDpaConfig",
    "FedDpaStrategy",
    "GdpParameters",
    "ImageDataset",
    "JLReduction",
    "LdpParameters",
    "LearningConfigError",
    "LearningError",
    "LocalStrategy",
    "PromptFlStrategy",
    "PromptLearner",
    "Reduction",
    "RoundMetrics",
    "RoundOutput",
    "Sample",
    "SecFppStrategy",
    "Strategy",
    "StrategyConfig",
    "TextTower",
    "TokenPCAReduction",
    "accuracy",
    "autocast",
    "compute_features",
    "configure_threads",
    "data_signal",
    "get_reduction",
    "get_strategy",
    "load_backbone",
    "load_dataset",
    "read_class_list",
    "read_csv_dataset",
    "read_image_folder",
    "resolve_device",
    "signal_of_data",
    "split_dataset",
]
