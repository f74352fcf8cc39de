"""The samples the activation figures look at: test images (or class prompts) of a task."""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch


def check_domains(benchmark, domains: Sequence[str]) -> None:
    """The benchmark must start with the run's domains, in the run's order."""
    names = [experience.domain for experience in benchmark.train_stream][: len(domains)]
    if names != list(domains):
        raise ValueError(f"the benchmark's domains {names} are not the run's {list(domains)}: build it "
                         "with the run's benchmark and order (--benchmark, --data-root)")


def task_images(benchmark, task: int, count: int, start: int = 0) -> torch.Tensor:
    """``[n, 3, H, W]``: test images ``start, start + 1, ...`` of task ``task`` (0-based), eval
    transform applied; fewer than ``count`` when the test set is smaller."""
    dataset = benchmark.test_stream[task].dataset.eval()
    stop = min(start + count, len(dataset))
    if start >= stop:
        raise ValueError(f"task {task + 1} has {len(dataset)} test images; image {start} does not exist")
    return torch.stack([dataset[i][0] for i in range(start, stop)])


def task_prompts(benchmark, task: int, count: int, start: int = 0) -> List[str]:
    """The training prompts (``template.format(classname)``) of task ``task``'s classes."""
    experience = benchmark.train_stream[task]
    prompts = [experience.template.format(name) for name in experience.classnames]
    return prompts[start:start + count]


def displayable(images: torch.Tensor, eval_transform=None) -> torch.Tensor:
    """``[n, H, W, 3]`` in ``[0, 1]`` for drawing: the transform's normalisation undone when it
    has one (a torchvision ``Normalize``), else each image scaled to its own range."""
    images = images.detach().float().cpu()
    normalize = _find_normalize(eval_transform)
    if normalize is not None:
        mean = torch.tensor(normalize.mean).view(1, -1, 1, 1)
        std = torch.tensor(normalize.std).view(1, -1, 1, 1)
        images = images * std + mean
    else:
        low = images.amin(dim=(1, 2, 3), keepdim=True)
        high = images.amax(dim=(1, 2, 3), keepdim=True)
        images = (images - low) / (high - low).clamp_min(1e-12)
    return images.clamp(0, 1).permute(0, 2, 3, 1)


def _find_normalize(transform) -> Optional[object]:
    from torchvision.transforms import Normalize

    stack = [transform]
    while stack:
        item = stack.pop()
        if isinstance(item, Normalize):
            return item
        stack.extend(getattr(item, "transforms", []) or [])
    return None


def token_labels(tokenizer, prompt: str, length: int) -> List[str]:
    """Readable labels of a prompt's tokens (``<start>``, words, ``<end>``, padding blank)."""
    ids = tokenizer([prompt])[0].tolist()[:length]
    decode = getattr(tokenizer, "decode", None)
    labels = []
    for position, token in enumerate(ids):
        if token == 0 and position > 0:
            labels.append("")
        elif decode is not None:
            labels.append(decode([token]).strip() or str(token))
        else:
            labels.append(str(token))
    return labels


__all__ = ["check_domains", "displayable", "task_images", "task_prompts", "token_labels"]
