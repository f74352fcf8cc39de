"""Prompt templates of the X-TAIL and MTIL protocols, and the presets that pick among them.

Three presets (``prompts=`` of :func:`~moram_avalanche.benchmarks.xtail` and
:func:`~moram_avalanche.benchmarks.mtil`):

* ``"moram"`` -- one template per domain, the MoRAM release's X-TAIL strings, for training and
  evaluation [MoRAM XTAIL/scenario_datasets/*.py ``template``; main.py uses ``template[0]``].
  Two differ from CoOp's: EuroSAT adds "the", Food adds "a". CIFAR-100 (not in X-TAIL) gets the
  first string of its MTIL list, as the release's cifar.py does.
* ``"rail"`` -- the single ``"a photo of a {}."`` for every domain, what RAIL's evaluation
  actually uses [RAIL primal_RAIL.py]; duplicate class names across domains (lotus, sunflower)
  then tie in the "all" label space.
* ``"zscl"`` -- MTIL: train on the first template of the domain's list, evaluate with the
  ensemble of all of them (mean of normalised embeddings) [ZSCL mtil/src/datasets/collections.py,
  cifar10.py; models/evaluation.py zeroshot_classifier].
"""

from __future__ import annotations

from typing import Tuple

PROMPT_PRESETS = ("moram", "rail", "zscl")
RAIL_TEMPLATE = "a photo of a {}."

#: MoRAM release, X-TAIL: the one template of each domain.
MORAM_TEMPLATES = {
    "Aircraft": "a photo of a {}, a type of aircraft.",
    "Caltech101": "a photo of a {}.",
    "CIFAR100": "a photo of a {}.",
    "DTD": "{} texture.",
    "EuroSAT": "a centered satellite photo of the {}.",
    "Flowers": "a photo of a {}, a type of flower.",
    "Food": "a photo of a {}, a type of food.",
    "MNIST": 'a photo of the number: "{}".',
    "OxfordPet": "a photo of a {}, a type of pet.",
    "StanfordCars": "a photo of a {}.",
    "SUN397": "a photo of a {}.",
}

#: ZSCL / MoE-Adapters, MTIL: each domain's template list (the first one trains).
ZSCL_TEMPLATES = {
    "Aircraft": (
        "a photo of a {}, a type of aircraft.", "a photo of the {}, a type of aircraft.",
    ),
    "Caltech101": (
        "a photo of a {}.", "a painting of a {}.", "a plastic {}.", "a sculpture of a {}.",
        "a sketch of a {}.", "a tattoo of a {}.", "a toy {}.", "a rendition of a {}.",
        "a embroidered {}.", "a cartoon {}.", "a {} in a video game.", "a plushie {}.",
        "a origami {}.", "art of a {}.", "graffiti of a {}.", "a drawing of a {}.",
        "a doodle of a {}.", "a photo of the {}.", "a painting of the {}.", "the plastic {}.",
        "a sculpture of the {}.", "a sketch of the {}.", "a tattoo of the {}.", "the toy {}.",
        "a rendition of the {}.", "the embroidered {}.", "the cartoon {}.",
        "the {} in a video game.", "the plushie {}.", "the origami {}.", "art of the {}.",
        "graffiti of the {}.", "a drawing of the {}.", "a doodle of the {}.",
    ),
    "CIFAR100": (
        "a photo of a {}.", "a blurry photo of a {}.", "a black and white photo of a {}.",
        "a low contrast photo of a {}.", "a high contrast photo of a {}.", "a bad photo of a {}.",
        "a good photo of a {}.", "a photo of a small {}.", "a photo of a big {}.",
        "a photo of the {}.", "a blurry photo of the {}.", "a black and white photo of the {}.",
        "a low contrast photo of the {}.", "a high contrast photo of the {}.",
        "a bad photo of the {}.", "a good photo of the {}.", "a photo of the small {}.",
        "a photo of the big {}.",
    ),
    "DTD": (
        "a photo of a {} texture.", "a photo of a {} pattern.", "a photo of a {} thing.",
        "a photo of a {} object.", "a photo of the {} texture.", "a photo of the {} pattern.",
        "a photo of the {} thing.", "a photo of the {} object.",
    ),
    "EuroSAT": (
        "a centered satellite photo of {}.", "a centered satellite photo of a {}.",
        "a centered satellite photo of the {}.",
    ),
    "Flowers": (
        "a photo of a {}, a type of flower.",
    ),
    "Food": (
        "a photo of a {}, a type of food.",
    ),
    "MNIST": (
        'a photo of the number: "{}".',
    ),
    "OxfordPet": (
        "a photo of a {}, a type of pet.",
    ),
    "StanfordCars": (
        "a photo of a {}, a type of car.", "a photo of a {}.", "a photo of the {}.",
        "a photo of my {}.", "i love my {}!", "a photo of my dirty {}.", "a photo of my clean {}.",
        "a photo of my new {}.", "a photo of my old {}.",
    ),
    "SUN397": (
        "a photo of a {}.", "a photo of the {}.",
    ),
}


def domain_prompts(domain: str, preset: str) -> Tuple[str, Tuple[str, ...]]:
    """``(training template, evaluation templates)`` of ``domain`` under ``preset``."""
    if preset == "moram":
        return MORAM_TEMPLATES[domain], (MORAM_TEMPLATES[domain],)
    if preset == "rail":
        return RAIL_TEMPLATE, (RAIL_TEMPLATE,)
    if preset == "zscl":
        templates = ZSCL_TEMPLATES[domain]
        return templates[0], templates
    raise ValueError(f"prompts must be one of {PROMPT_PRESETS}, got {preset!r}")
