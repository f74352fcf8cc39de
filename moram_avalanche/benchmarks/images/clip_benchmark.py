"""One Avalanche experience per domain, each carrying what a CLIP strategy needs to classify.

Every experience (train and test) gets these attributes:

* ``domain`` -- the domain's name; ``classnames`` -- its class names, in label order;
* ``template`` -- the training prompt, ``template.format(classname)``;
* ``eval_templates`` -- the prompts averaged at evaluation in the "domain" label space
  (a template ensemble, MTIL protocol); ``(template,)`` when not given;
* ``label_space`` -- "all" (X-TAIL: every class of every domain of the stream, one prompt per
  class with its domain's template) or "domain" (MTIL: the experience's own classes);
* ``label_offset`` -- the experience's first label in the "all" space (sum of the class
  counts of the domains before it), ``domains`` -- every :class:`Domain` of the stream.

Labels live in the declared label space, so that any Avalanche strategy, metric and replay
buffer reads them as they are: in the "all" space a domain's labels are offset by its
``label_offset`` (global class indices, X-TAIL's single classifier over every class); in the
"domain" space they stay local (``0..C_d-1``, MTIL). The raw datasets given to
:func:`clip_benchmark` always hold local labels. The domain index is the task label, so a
sample carries its domain wherever it goes (a replay buffer mixes domains in one batch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Sequence, Tuple

from torch.utils.data import Dataset

#: the label spaces a sample is scored in: "all" (X-TAIL: every class of the stream) or "domain"
#: (MTIL: the experience's own classes)
LABEL_SPACES = ("all", "domain")


@dataclass(frozen=True)
class Domain:
    """A domain of a CLIP continual-learning stream: its name, class names and prompts."""

    name: str
    classnames: Tuple[str, ...]
    template: str
    eval_templates: Tuple[str, ...] = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "classnames", tuple(self.classnames))
        object.__setattr__(self, "eval_templates", tuple(self.eval_templates) or (self.template,))
        if not self.classnames:
            raise ValueError(f"domain {self.name!r} has no class names")
        for template in (self.template, *self.eval_templates):
            if "{}" not in template:
                raise ValueError(
                    f"template {template!r} of domain {self.name!r} has no '{{}}' for the class name"
                )

    def prompts(self, template: str | None = None) -> List[str]:
        template = self.template if template is None else template
        return [template.format(name) for name in self.classnames]


def domain_of(experience) -> Domain:
    """The :class:`Domain` of an experience of a :func:`clip_benchmark` stream."""
    return experience.domains[experience.current_experience]


def label_offsets(domains: Sequence[Domain]) -> List[int]:
    """First label of each domain in the "all" label space."""
    offsets, total = [], 0
    for domain in domains:
        offsets.append(total)
        total += len(domain.classnames)
    return offsets


class OffsetLabels(Dataset):
    """``raw`` with every label shifted by ``offset`` (``targets`` too): a domain's local labels
    as indices of the "all" label space."""

    def __init__(self, raw, offset: int) -> None:
        self.raw = raw
        self.offset = int(offset)
        self.targets = [int(y) + self.offset for y in raw.targets]

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, index):
        image, label, *rest = self.raw[index]
        return (image, int(label) + self.offset, *rest)


def clip_benchmark(domains, train_sets, test_sets, *, label_space: str, train_transform=None,
                   eval_transform=None):
    """An Avalanche benchmark with one experience per domain and CLIP metadata attached.

    Args:
        domains: the :class:`Domain` of each experience, in stream order.
        train_sets, test_sets: one map-style dataset per domain, each with a ``targets``
            sequence of local labels; items are ``(image, label)``.
        label_space: "all" (labels become global: local + the domain's offset) or "domain"
            (labels stay local); see the module docstring.
        train_transform, eval_transform: applied to the images of training / evaluation
            data (Avalanche transform groups; the strategy switches between them).
    """
    from avalanche.benchmarks.scenarios.dataset_scenario import benchmark_from_datasets
    from avalanche.benchmarks.scenarios.task_aware import with_task_labels
    from avalanche.benchmarks.utils.classification_dataset import TaskAwareClassificationDataset
    from avalanche.benchmarks.utils.data_attribute import DataAttribute, TaskLabels
    from avalanche.benchmarks.utils.flat_data import ConstantSequence
    from avalanche.benchmarks.utils.transform_groups import TransformGroups

    from ..fingerprint import digest, fingerprint

    domains = list(domains)
    if label_space not in LABEL_SPACES:
        raise ValueError(f"label_space must be one of {LABEL_SPACES}, got {label_space!r}")
    if not (len(domains) == len(train_sets) == len(test_sets)) or not domains:
        raise ValueError(
            f"need one train and one test set per domain: got {len(domains)} domains, "
            f"{len(train_sets)} train sets, {len(test_sets)} test sets"
        )
    names = [domain.name for domain in domains]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"domain names must be distinct (they key the accuracy matrix, the logs "
                         f"and the checkpoints), got {repeated} more than once in {names}")
    groups = TransformGroups({"train": train_transform, "eval": eval_transform})
    offsets = label_offsets(domains)

    def wrap(raw, task, domain):
        bad = [int(y) for y in raw.targets if not 0 <= int(y) < len(domain.classnames)]
        if bad:
            raise ValueError(
                f"domain {domain.name!r} has {len(domain.classnames)} classes but its data holds "
                f"labels {sorted(set(bad))[:5]}: labels must be local (0..C-1)"
            )
        if label_space == "all":
            raw = OffsetLabels(raw, offsets[task])
        # task-aware (task_set, per-task subsets): what Avalanche's LwF and task-balanced
        # loaders read
        return TaskAwareClassificationDataset(
            [raw], transform_groups=groups,
            data_attributes=[DataAttribute(raw.targets, "targets"),
                             TaskLabels(ConstantSequence(task, len(raw)))])

    benchmark = with_task_labels(benchmark_from_datasets(
        train=[wrap(d, t, dom) for t, (d, dom) in enumerate(zip(train_sets, domains))],
        test=[wrap(d, t, dom) for t, (d, dom) in enumerate(zip(test_sets, domains))],
    ))
    for stream, raws in ((benchmark.train_stream, train_sets), (benchmark.test_stream, test_sets)):
        for experience in stream:
            index = experience.current_experience
            domain = domains[index]
            experience.domain = domain.name
            experience.classnames = domain.classnames
            experience.template = domain.template
            experience.eval_templates = domain.eval_templates
            experience.label_space = label_space
            experience.label_offset = offsets[index]
            experience.domains = tuple(domains)
            own = fingerprint(raws[index])  # what a resumed run compares (None: a dataset of unknown kind)
            experience.fingerprint = None if own is None else digest([domain.name, label_space, own])
    benchmark.domains = tuple(domains)
    benchmark.label_space = label_space
    return benchmark


__all__ = ["LABEL_SPACES", "Domain", "OffsetLabels", "clip_benchmark", "domain_of", "label_offsets"]
