"""MoE-Adapters (Yu et al., CVPR 2024) with DDAS as an Avalanche strategy on the shared CLIP loop."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Dict, Optional

import torch
import torch.nn.functional as F

from ...algorithms.ddas import (
    DDAS,
    FEW_SHOT_THRESHOLD,
    FULL_SHOT_THRESHOLD,
    ROUTINGS,
    alexnet_features,
    alexnet_weights_path,
)
from ...algorithms.schedules import MOE_FEWSHOT_MTIL_LR, MOE_FULLSHOT_MTIL_LR, DomainLR
from ...benchmarks.images.reference_sets import check_image_dataset, image_folder
from ...clip.block_taps import block_mixture, inject_moe_adapters
from ...clip.head import TextHead
from ...clip.towers import ENCODERS, blocks
from ...layers.base import find_layers
from ...layers.moe_adapter import MoEAdapterMixture, num_routers, routing
from ...utils.checks import check_nonnegative_int, check_number, check_positive_int
from ...utils.names import check_names
from ..needs import StrategyNeeds
from .loop import CLIPStrategy
from .plugins.moe_adapters import MoEAdaptersPlugin

SELECTORS = ("ddas", "oracle", "latest")

#: The release's two MTIL recipes [MoE-Adapters4CL mtil/scripts/train/train_{few,full}_shot_
#: router11_experts22_1000iters.sh; src/models/few_shot_AutoEncoder.py, AutoEncoder.py]:
#: iterations per experience, the per-domain lr list, the DDAS threshold and the autoencoders'
#: Adam lr. :class:`MoEAdapters` takes each from ``recipe=`` unless given explicitly.
RECIPES = {
    "few-shot": {"iterations": 500, "lr": MOE_FEWSHOT_MTIL_LR, "threshold": FEW_SHOT_THRESHOLD,
                 "ae_lr": 3e-3},
    "full-shot": {"iterations": 1000, "lr": MOE_FULLSHOT_MTIL_LR, "threshold": FULL_SHOT_THRESHOLD,
                  "ae_lr": 1e-2},
}


def _moe_files(options: dict) -> dict:
    """DDAS's AlexNet weights, unless another feature extractor is given."""
    if options.get("selector", "ddas") != "ddas" or options.get("feature_extractor") is not None:
        return {}
    return {"ImageNet AlexNet weights (DDAS features)": str(options.get("ddas_weights") or alexnet_weights_path())}


#: the release's test batch size (``--batch-size-eval``, src/args.py): what ``ddas_routing=
#: "batch"`` routes together
RELEASE_EVAL_BATCH = 128
#: above this many training images per class on average, the few-shot recipe warns (its
#: release setting has 5 per class)
FEW_SHOT_WARN_PER_CLASS = 50


class MoEAdapters(CLIPStrategy):
    """MoE-Adapters (Yu et al., CVPR 2024) for CLIP, as the official MTIL code trains it.

    22 bottleneck-64 experts beside the MLP of every block of both encoders, one noisy top-2
    router per experience (:mod:`moram_avalanche.layers.moe_adapter`,
    :mod:`moram_avalanche.clip.block_taps`); only the current
    router and the not-yet-frozen experts train; after each experience the 2 most-used
    experts per block are frozen for good. At test, DDAS (:mod:`moram_avalanche.algorithms.ddas`) picks
    each image's router -- or plain zero-shot CLIP -- and the image is scored against text
    embeddings computed under that same router, in the label space of the benchmark.

    Defaults (baselines reference, sections 2.1-2.3; [MoE-Adapters4CL mtil/scripts, src/args.py]):
    both encoders, 22 experts, bottleneck 64, top-2, dropout 0.1, scale 0.1; label smoothing
    0.2; AdamW wd 0, betas (0.9, 0.999); warm-up 100; cosine; batch 64; image->text loss
    only; 2 experts frozen per block per experience; DDAS autoencoders of 100 units, 300
    iterations (reference: 1000), Adam wd 1e-4, batch 64. The rest comes from ``recipe``
    (:data:`RECIPES`), each value only where the argument is not given explicitly:

    ========================  ============================  ===============================
    argument                  ``"few-shot"`` (default)      ``"full-shot"``
    ========================  ============================  ===============================
    ``iterations``            500                           1000
    ``lr``                    ``MOE_FEWSHOT_MTIL_LR``       ``MOE_FULLSHOT_MTIL_LR``
    ``threshold`` (DDAS)      0.0585                        0.0655
    ``ae_lr``                 0.003                         0.01
    ========================  ============================  ===============================

    The release's few-shot setting is 5 images per class; training the few-shot recipe on an
    experience with more than 50 per class on average (e.g. ``--benchmark mtil``, whose
    ``--shots`` default is the full sets) warns once, naming ``recipe="full-shot"``.

    Args (keyword-only, besides CLIPStrategy's):
        recipe: "few-shot" (default) or "full-shot", see above.
        reference_images: the images of the DDAS reference autoencoder (TinyImageNet in the
            release): a dataset of CLIP-normalised image tensors (or tuples starting with
            one), or an image folder (with ``reference_transform``, the model's eval
            transform). Required with ``selector="ddas"``; ``"none"`` opts out, leaving only
            the threshold to send images to plain CLIP. The release trains this autoencoder
            on a 5-per-class subset of TinyImageNet's train split (1000 images) under the
            train transform; here on every image given, as given (``--ref-images FOLDER``:
            the whole folder, eval transform) -- pass a subset to match the release.
        feature_extractor: DDAS's frozen image features (default: ImageNet AlexNet, see
            :func:`~moram_avalanche.algorithms.ddas.alexnet_features`; any module works).
        ddas_weights: a local file of torchvision's ImageNet AlexNet weights
            (``alexnet-owt-7be5be79.pth``) for the default extractor; default: torch hub's cache,
            downloaded when online. On the command line: ``run --set ddas_weights=PATH``.
        selector: "ddas" (default); "oracle" (the router trained on the test domain, plain
            CLIP for unseen domains) or "latest" (the newest router for every image), for
            ablations. ddas_routing: "sample" (default) or "batch" (the release; see
            :mod:`moram_avalanche.algorithms.ddas`). With "batch" (and ``selector="ddas"``) the
            evaluation batches hold 128 images, the release's ``--batch-size-eval``, unless
            ``eval_mb_size`` is given: in this mode the batch *is* the unit DDAS routes.
            threshold: from ``recipe`` (0.0585 few-shot, 0.0655 full-shot); the release tuned
            both on batch-mean errors of 128 images, not per image (see
            :mod:`moram_avalanche.algorithms.ddas`).
        ae_iterations, ae_reference_iterations, ae_lr, ae_hidden, ae_batch_size,
        ae_weight_decay, ae_decay_every: DDAS training (300, 1000, from ``recipe``, 100, 64,
            1e-4, None).
        ae_workers: DataLoader workers for the autoencoders' training images; None (default):
            the ``num_workers`` of the run (``strategy.train(..., num_workers=N)``, as
            :func:`~moram_avalanche.experiments.runner.run_stream` passes ``--num-workers``), else 0.
        encoders, experts, bottleneck, topk, dropout, adapter_scale: the adapters. A model
            that already holds MoE adapters (e.g. resumed into) must have been built with the
            same values, else a ValueError.
        freeze_per_task: experts frozen per block after each experience (2).
        iterations, lr: from ``recipe``.
    """

    #: the evaluation forward routes each image (DDAS reads the pixels): no feature replay
    replays_image_features = False
    #: not data-parallel: DDAS's autoencoders train on each process and the experts frozen after
    #: each experience follow each process's own selection counts
    needs = StrategyNeeds(references=("images",), data_parallel=False, files=_moe_files)
    check_values = staticmethod(lambda options: check_moe_adapters_options(options))

    def __init__(
        self,
        *,
        model,
        tokenizer,
        reference_images=None,
        reference_transform=None,
        feature_extractor: Optional[torch.nn.Module] = None,
        ddas_weights: Optional[str] = None,
        recipe: str = "few-shot",
        selector: str = "ddas",
        ddas_routing: str = "sample",
        threshold: Optional[float] = None,
        ae_iterations: int = 300,
        ae_reference_iterations: int = 1000,
        ae_lr: Optional[float] = None,
        ae_hidden: int = 100,
        ae_batch_size: int = 64,
        ae_weight_decay: float = 1e-4,
        ae_decay_every: Optional[int] = None,
        ae_workers: Optional[int] = None,
        encoders=ENCODERS,
        experts: int = 22,
        bottleneck: int = 64,
        topk: int = 2,
        dropout: float = 0.1,
        adapter_scale: float = 0.1,
        freeze_per_task: int = 2,
        iterations: Optional[int] = None,
        lr: float | DomainLR | None = None,
        warmup: int = 100,
        label_smoothing: float = 0.2,
        betas=(0.9, 0.999),
        text_to_image_loss: bool = False,
        train_mb_size: int = 64,
        eval_mb_size: Optional[int] = None,
        plugins=None,
        **kwargs,
    ):
        given = {"iterations": iterations, "lr": lr, "threshold": threshold, "ae_lr": ae_lr}
        settings = {k: RECIPES[recipe][k] if v is None else v for k, v in given.items()}
        self.recipe = recipe
        #: the arguments taken from the recipe (not given explicitly)
        self.recipe_defaults = tuple(k for k, v in given.items() if v is None)
        self._warned_shots = False
        adapter_options = dict(experts=experts, bottleneck=bottleneck, topk=topk, dropout=dropout,
                               scale=adapter_scale)
        if find_layers(model, MoEAdapterMixture):
            _check_existing_mixtures(model, encoders, adapter_options)
        else:
            inject_moe_adapters(model, encoders, **adapter_options)
        if eval_mb_size is None and selector == "ddas" and ddas_routing == "batch":
            eval_mb_size = RELEASE_EVAL_BATCH
        self.selector = selector
        self.ddas = None
        images = None
        if selector == "ddas":
            images = _reference_images(reference_images, reference_transform)
            if feature_extractor is None:
                feature_extractor = alexnet_features(ddas_weights)
            self.ddas = DDAS(feature_extractor,
                             hidden=ae_hidden, threshold=settings["threshold"], routing=ddas_routing,
                             iterations=ae_iterations, reference_iterations=ae_reference_iterations,
                             lr=settings["ae_lr"], weight_decay=ae_weight_decay,
                             batch_size=ae_batch_size, decay_every=ae_decay_every)
        self.moe_plugin = MoEAdaptersPlugin(self.ddas, images, freeze_per_task, ae_workers)
        #: the router being trained (None outside training)
        self.active_router: Optional[int] = None
        #: the route of each image of the last evaluation minibatch (-1: plain CLIP)
        self.last_routes: Optional[torch.Tensor] = None
        self._route_heads: Dict[int, TextHead] = {}
        super().__init__(model=model, tokenizer=tokenizer, iterations=settings["iterations"],
                         lr=settings["lr"], warmup=warmup, label_smoothing=label_smoothing,
                         betas=betas, text_to_image_loss=text_to_image_loss,
                         train_mb_size=train_mb_size, eval_mb_size=eval_mb_size,
                         plugins=[self.moe_plugin, *(plugins or [])], **kwargs)

    # ------------------------------------------------------------------ forward
    def forward(self):
        if self.is_training:
            with routing(self.model, self.active_router):
                return super().forward()
        routes = self.eval_routes(self.mb_x)
        self.last_routes = routes
        with routing(self.model, routes):
            image = F.normalize(self.model.encode_image(self.mb_x), dim=-1)
        scale = self.model.logit_scale.exp()
        logits = None
        for route in routes.unique().tolist():
            rows = (routes == route).nonzero().flatten()
            part = scale * image[rows] @ self._classifier(route).t().to(image.dtype)
            if logits is None:
                logits = part.new_zeros(image.shape[0], part.shape[1])
            logits[rows] = part
        return logits

    def eval_routes(self, images: torch.Tensor) -> torch.Tensor:
        """The router of each image ``[B]`` (-1: plain CLIP), as :attr:`selector` decides."""
        batch = images.shape[0]
        if self.selector == "ddas":
            return self.ddas.select(images).to(images.device)
        if self.selector == "latest":
            route = num_routers(self.model) - 1
        else:
            names = [d.name for d in self.seen_domains]
            domain = self.experience.domain
            route = names.index(domain) if domain in names else -1
        return torch.full((batch,), route, dtype=torch.long, device=images.device)

    def _classifier(self, route: int) -> torch.Tensor:
        """The experience's classifier embedded under ``route``, cached per route per evaluation."""
        if route not in self._route_heads:
            self._route_heads[route] = TextHead(self.model, self.tokenizer,
                                                batch_size=self.text_head.batch_size)
        with routing(self.model, route):
            return self.eval_classifier(self.experience, head=self._route_heads[route])

    def _before_eval(self, **kwargs):
        self._route_heads = {}
        if self.ddas is not None:
            self.ddas.to(self.device)
        super()._before_eval(**kwargs)

    def _after_training_exp(self, **kwargs):
        self._route_heads = {}
        super()._after_training_exp(**kwargs)

    def _before_training_exp(self, **kwargs):
        super()._before_training_exp(**kwargs)
        self._warn_many_shots()

    def _warn_many_shots(self) -> None:
        """Once: the few-shot recipe's defaults in use on an experience with many images per class."""
        if self._warned_shots or self.recipe != "few-shot" or not self.recipe_defaults:
            return
        per_class = len(self.experience.dataset) / max(len(self.experience.classnames), 1)
        if per_class > FEW_SHOT_WARN_PER_CLASS:
            self._warned_shots = True
            warnings.warn(
                f"MoEAdapters trains {self.experience.domain!r} ({per_class:.0f} images per class "
                f"on average) with the release's few-shot recipe (5 per class) for "
                f"{', '.join(self.recipe_defaults)}; for full training sets the release uses its "
                "full-shot recipe: pass recipe=\"full-shot\" (on the command line "
                "--set recipe=full-shot)", stacklevel=2)


def untrained_alexnet_features() -> torch.nn.Module:
    """DDAS's default extractor (:func:`~moram_avalanche.algorithms.ddas.alexnet_features`) with
    random weights: the same compute without the ImageNet download, for timing (``cost``)."""
    from torchvision.models import alexnet

    return alexnet().features[:-2].eval().requires_grad_(False)


def _check_existing_mixtures(model, encoders, options: dict) -> None:
    """Refuse a model whose MoE adapters were built with other arguments than ``options``."""
    mixtures = find_layers(model, MoEAdapterMixture)
    first = next(iter(mixtures.values()))
    expert = first.experts[0]
    built = {"experts": first.num_experts, "bottleneck": expert.down.out_features,
             "topk": first.topk, "dropout": expert.dropout.p, "scale": expert.scale}
    argument = {"scale": "adapter_scale"}
    differ = [f"{argument.get(key, key)}={options[key]!r} (the model's: {built[key]!r})"
              for key in built if not math.isclose(float(options[key]), float(built[key]))]
    present = [encoder for encoder in ENCODERS
               if any(block_mixture(block.module) for block in blocks(model, encoder, required=False))]
    wanted = [e for e in ENCODERS if e in check_names(encoders, ENCODERS, "encoder")]
    if present != wanted:
        differ.append(f"encoders={tuple(wanted)} (the model's: {tuple(present)})")
    if differ:
        raise ValueError("the model already holds MoE adapters built with other arguments than "
                         f"this strategy's: {'; '.join(differ)} Pass "
                         "the arguments the model was built with, or give a fresh model")


REFERENCE_HOW = (
    "DDAS's reference autoencoder sends images that look like no task to plain CLIP; the "
    "release trains it on TinyImageNet. Pass reference_images=<a dataset of CLIP-normalised "
    "image tensors> or an image folder with reference_transform=<the model's eval "
    "transform> (moram_avalanche.benchmarks.images.reference_sets.synthetic_reference gives a "
    "small offline set), or reference_images='none' to rely on the threshold alone")


def check_moe_adapters_options(options) -> None:
    """The value checks of :class:`MoEAdapters`' own options given in ``options`` (nothing built)."""
    if "recipe" in options and options["recipe"] not in RECIPES:
        raise ValueError(f"recipe must be one of {tuple(RECIPES)} (the release's few-shot "
                         f"5-per-class or full-shot MTIL setting), got {options['recipe']!r}")
    choices = {"selector": SELECTORS, "ddas_routing": ROUTINGS}
    for name, allowed in choices.items():
        if name in options and options[name] not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {options[name]!r}")
    if options.get("selector", "ddas") == "ddas":
        if options.get("reference_images") is None:
            raise ValueError(f"MoEAdapters with selector='ddas' needs reference_images: {REFERENCE_HOW}")
        if options.get("feature_extractor") is not None and options.get("ddas_weights") is not None:
            raise ValueError("ddas_weights is the file of the default AlexNet extractor; "
                             "pass either feature_extractor or ddas_weights, not both")
        weights = options.get("ddas_weights")
        if weights is not None and not Path(weights).expanduser().is_file():
            raise ValueError(f"AlexNet weights file {weights} does not exist (ddas_weights): give the "
                             "path of alexnet-owt-7be5be79.pth, torchvision's ImageNet AlexNet")
    for name in ("ae_iterations", "ae_reference_iterations", "ae_hidden", "ae_batch_size", "experts",
                 "bottleneck", "topk"):
        if name in options:
            check_positive_int(name, options[name])
    for name in ("ae_decay_every", "ae_workers"):
        if options.get(name) is not None:
            (check_positive_int if name == "ae_decay_every" else check_nonnegative_int)(name, options[name])
    if "freeze_per_task" in options:
        check_nonnegative_int("freeze_per_task", options["freeze_per_task"])
    if options.get("threshold") is not None:
        check_number("threshold", options["threshold"], low=0, hint="the release's DDAS threshold: 0.0585")
    if options.get("ae_lr") is not None:
        check_number("ae_lr", options["ae_lr"], low=0, low_open=True)
    if "dropout" in options:
        check_number("dropout", options["dropout"], low=0, high=1, high_open=True)
    if "adapter_scale" in options:
        check_number("adapter_scale", options["adapter_scale"])
    if "encoders" in options:
        check_names(options["encoders"], ENCODERS, "encoder")


def _reference_images(images, transform):
    how = REFERENCE_HOW
    if images is None:
        raise ValueError(f"MoEAdapters with selector='ddas' needs reference_images: {how}")
    if isinstance(images, str) and images == "none":
        return None
    if isinstance(images, (str, Path)):
        if transform is None:
            raise ValueError(f"reference_images={str(images)!r} is a folder: give reference_transform "
                             f"too. {how}")
        images = image_folder(images, transform)
    check_image_dataset(images, "reference_images")
    return images


__all__ = ["RECIPES", "RELEASE_EVAL_BATCH", "SELECTORS", "MoEAdapters", "check_moe_adapters_options",
           "untrained_alexnet_features"]
