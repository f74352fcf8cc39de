"""MoE-Adapters (Yu et al., CVPR 2024) with DDAS as an Avalanche strategy on the shared CLIP loop."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin

from ..clip.head import TextHead
from ..clip.inject import ENCODERS
from ..clip.moe_adapters import add_router, inject_moe_adapters, moe_mixtures, num_routers, routing
from ..ddas import DDAS, FEW_SHOT_THRESHOLD, alexnet_features
from .base import CLIPStrategy
from .distill_plugin import check_image_dataset
from .schedule import MOE_FEWSHOT_MTIL_LR, DomainLR

SELECTORS = ("ddas", "oracle", "latest")


class MoEAdaptersPlugin(SupervisedPlugin):
    """The experience-boundary work of MoE-Adapters (baselines reference, section 2.2-2.3).

    * ``before_training_exp``: (once) the DDAS reference autoencoder on the reference images;
      a new router in every block, the only router that trains; experts frozen so far keep
      ``requires_grad=False``; selection counts restart; the optimizer is rebuilt.
    * ``after_training_exp``: the ``freeze_per_task`` most-selected experts of every block
      join its frozen set (cumulative); DDAS trains the experience's autoencoder on the
      experience's training images (as the release: its few-shot set, train transform).

    Attributes:
        history: per experience, ``{"domain": name, "blocks": {block name: {"counts": [selections
            per expert], "frozen": [expert indices frozen after it]}}}`` (plain Python).
    """

    def __init__(self, ddas: Optional[DDAS], reference_images=None, freeze_per_task: int = 2) -> None:
        super().__init__()
        self.ddas, self.reference_images = ddas, reference_images
        self.freeze_per_task = freeze_per_task
        self.history: List[dict] = []

    def before_training_exp(self, strategy, **kwargs):
        if self.ddas is not None:
            self.ddas.to(strategy.device)
            if self.reference_images is not None and self.ddas.reference is None:
                self.ddas.fit_reference(self.reference_images)
        router = add_router(strategy.model)
        for mixture in moe_mixtures(strategy.model).values():
            mixture.reset_counts()
            mixture.set_trainable(router)
        strategy.active_router = router
        strategy.make_optimizer()

    def after_training_exp(self, strategy, **kwargs):
        blocks = {}
        for name, mixture in moe_mixtures(strategy.model).items():
            counts = mixture.counts.tolist()
            blocks[name] = {"counts": counts,
                            "frozen": mixture.freeze_most_used(self.freeze_per_task).tolist()}
            mixture.set_trainable(None)
        self.history.append({"domain": strategy.experience.domain, "blocks": blocks})
        strategy.active_router = None
        if self.ddas is not None:
            self.ddas.fit_task(strategy.experience.dataset)

    def state_dict(self) -> dict:
        return {"ddas": None if self.ddas is None else self.ddas.state_dict(),
                "history": self.history}

    def load_state_dict(self, state: dict) -> None:
        if (state["ddas"] is None) != (self.ddas is None):
            raise ValueError("the checkpoint and this strategy disagree on using DDAS (selector)")
        if self.ddas is not None:
            self.ddas.load_state_dict(state["ddas"])
        self.history = list(state["history"])


class MoEAdapters(CLIPStrategy):
    """MoE-Adapters (Yu et al., CVPR 2024) for CLIP, as the official MTIL code trains it.

    22 bottleneck-64 experts beside the MLP of every block of both encoders, one noisy top-2
    router per experience (:mod:`moram_avalanche.clip.moe_adapters`); only the current
    router and the not-yet-frozen experts train; after each experience the 2 most-used
    experts per block are frozen for good. At test, DDAS (:mod:`moram_avalanche.ddas`) picks
    each image's router -- or plain zero-shot CLIP -- and the image is scored against text
    embeddings computed under that same router, in the label space of the benchmark.

    Defaults (baselines reference, sections 2.1-2.3; [MoE-Adapters4CL mtil/scripts, src/args.py]):
    both encoders, 22 experts, bottleneck 64, top-2, dropout 0.1, scale 0.1; label smoothing
    0.2; AdamW wd 0, betas (0.9, 0.999); warm-up 100; cosine; batch 64; 500 iterations
    (few-shot MTIL); lr :data:`~moram_avalanche.strategies.schedule.MOE_FEWSHOT_MTIL_LR`
    (per domain); image->text loss only; 2 experts frozen per block per experience; DDAS
    threshold 0.0585, autoencoders of 100 units, 300 iterations (reference: 1000), Adam lr
    0.003 and wd 1e-4, batch 64.

    Args (keyword-only, besides CLIPStrategy's):
        reference_images: the images of the DDAS reference autoencoder (TinyImageNet in the
            release): a dataset of CLIP-normalised image tensors (or tuples starting with
            one), or an image folder (with ``reference_transform``, the model's eval
            transform). Required with ``selector="ddas"``; ``"none"`` opts out, leaving only
            the threshold to send images to plain CLIP.
        feature_extractor: DDAS's frozen image features (default: ImageNet AlexNet, see
            :func:`~moram_avalanche.ddas.alexnet_features`; any module works).
        ddas_weights: a local file of torchvision's ImageNet AlexNet weights
            (``alexnet-owt-7be5be79.pth``) for the default extractor; default: torch hub's cache,
            downloaded when online. On the command line: ``run --set ddas_weights=PATH``.
        selector: "ddas" (default); "oracle" (the router trained on the test domain, plain
            CLIP for unseen domains) or "latest" (the newest router for every image), for
            ablations. ddas_routing: "sample" (default) or "batch" (the release; see
            :mod:`moram_avalanche.ddas`). threshold: 0.0585 (few-shot; 0.0655 full-shot).
        ae_iterations, ae_reference_iterations, ae_lr, ae_hidden, ae_batch_size,
        ae_weight_decay, ae_decay_every: DDAS training (300, 1000, 0.003, 100, 64, 1e-4, None).
        ae_workers: DataLoader workers for the autoencoders' training images (0).
        encoders, experts, bottleneck, topk, dropout, adapter_scale: the adapters.
        freeze_per_task: experts frozen per block after each experience (2).
    """

    def __init__(
        self,
        *,
        model,
        tokenizer,
        reference_images=None,
        reference_transform=None,
        feature_extractor: Optional[torch.nn.Module] = None,
        ddas_weights: Optional[str] = None,
        selector: str = "ddas",
        ddas_routing: str = "sample",
        threshold: float = FEW_SHOT_THRESHOLD,
        ae_iterations: int = 300,
        ae_reference_iterations: int = 1000,
        ae_lr: float = 3e-3,
        ae_hidden: int = 100,
        ae_batch_size: int = 64,
        ae_weight_decay: float = 1e-4,
        ae_decay_every: Optional[int] = None,
        ae_workers: int = 0,
        encoders=ENCODERS,
        experts: int = 22,
        bottleneck: int = 64,
        topk: int = 2,
        dropout: float = 0.1,
        adapter_scale: float = 0.1,
        freeze_per_task: int = 2,
        iterations: int = 500,
        lr: float | DomainLR = MOE_FEWSHOT_MTIL_LR,
        warmup: int = 100,
        label_smoothing: float = 0.2,
        betas=(0.9, 0.999),
        text_to_image_loss: bool = False,
        train_mb_size: int = 64,
        plugins=None,
        **kwargs,
    ):
        if selector not in SELECTORS:
            raise ValueError(f"selector must be one of {SELECTORS}, got {selector!r}")
        if not moe_mixtures(model):
            inject_moe_adapters(model, encoders, experts=experts, bottleneck=bottleneck, topk=topk,
                                dropout=dropout, scale=adapter_scale)
        self.selector = selector
        self.ddas = None
        images = None
        if selector == "ddas":
            images = _reference_images(reference_images, reference_transform)
            if feature_extractor is not None and ddas_weights is not None:
                raise ValueError("ddas_weights is the file of the default AlexNet extractor; "
                                 "pass either feature_extractor or ddas_weights, not both")
            if feature_extractor is None:
                feature_extractor = alexnet_features(ddas_weights)
            self.ddas = DDAS(feature_extractor,
                             hidden=ae_hidden, threshold=threshold, routing=ddas_routing,
                             iterations=ae_iterations, reference_iterations=ae_reference_iterations,
                             lr=ae_lr, weight_decay=ae_weight_decay, batch_size=ae_batch_size,
                             decay_every=ae_decay_every, num_workers=ae_workers)
        self.moe_plugin = MoEAdaptersPlugin(self.ddas, images, freeze_per_task)
        #: the router being trained (None outside training)
        self.active_router: Optional[int] = None
        #: the route of each image of the last evaluation minibatch (-1: plain CLIP)
        self.last_routes: Optional[torch.Tensor] = None
        self._route_heads: Dict[int, TextHead] = {}
        super().__init__(model=model, tokenizer=tokenizer, iterations=iterations, lr=lr,
                         warmup=warmup, label_smoothing=label_smoothing, betas=betas,
                         text_to_image_loss=text_to_image_loss, train_mb_size=train_mb_size,
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
            return self._eval_classifier(self.experience, head=self._route_heads[route])

    def _before_eval(self, **kwargs):
        self._route_heads = {}
        if self.ddas is not None:
            self.ddas.to(self.device)
        super()._before_eval(**kwargs)

    def _after_training_exp(self, **kwargs):
        self._route_heads = {}
        super()._after_training_exp(**kwargs)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_model_state(self) -> dict:
        """The adapters only (experts, routers, frozen sets, counts): CLIP itself never changes."""
        prefixes = tuple(f"{name}." for name in moe_mixtures(self.model))
        return {k: v for k, v in self.model.state_dict().items() if k.startswith(prefixes)}

    def load_checkpoint_model_state(self, state: dict) -> None:
        mixtures = moe_mixtures(self.model)
        first = next(iter(mixtures))
        routers = sum(1 for k in state if k.startswith(f"{first}.gates."))
        if num_routers(self.model) > routers:
            raise ValueError(f"this model has {num_routers(self.model)} routers, the checkpoint "
                             f"{routers}: resume into a fresh model")
        while num_routers(self.model) < routers:
            add_router(self.model)
        result = self.model.load_state_dict(state, strict=False)
        prefixes = tuple(f"{name}." for name in mixtures)
        missing = [k for k in result.missing_keys if k.startswith(prefixes)]
        if result.unexpected_keys or missing:
            raise ValueError("checkpoint adapters do not fit this model: unexpected "
                             f"{result.unexpected_keys[:5]}, missing {missing[:5]}")
        for mixture in mixtures.values():
            mixture.set_trainable(None)


def _reference_images(images, transform):
    how = ("DDAS's reference autoencoder sends images that look like no task to plain CLIP; the "
           "release trains it on TinyImageNet. Pass reference_images=<a dataset of CLIP-normalised "
           "image tensors> or an image folder with reference_transform=<the model's eval "
           "transform> (moram_avalanche.benchmarks.reference_sets.synthetic_reference gives a "
           "small offline set), or reference_images='none' to rely on the threshold alone")
    if images is None:
        raise ValueError(f"MoEAdapters with selector='ddas' needs reference_images: {how}")
    if isinstance(images, str) and images == "none":
        return None
    if isinstance(images, (str, Path)):
        if transform is None:
            raise ValueError(f"reference_images={str(images)!r} is a folder: give reference_transform "
                             f"too. {how}")
        from ..benchmarks.reference_sets import image_folder

        images = image_folder(images, transform)
    check_image_dataset(images, "reference_images")
    return images
