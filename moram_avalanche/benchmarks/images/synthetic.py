"""An offline multi-domain image stream, drawn procedurally (no downloads), for demos and tests.

Five domains, each with its own class names and prompt template, all 32 x 32 RGB images:

========  =====================================================  ==============================
domain    classes                                                template
========  =====================================================  ==============================
shapes    circle, square, triangle, cross, ring, diamond          ``a drawing of a {}.``
digits    zero ... nine (scikit-learn's bundled 8 x 8 digits)      ``a photo of the number: "{}".``
colours   red, green, blue, yellow, magenta, cyan                 ``a blob of {} colour.``
glyphs    the letters E, F, H, L, T, X, Z (drawn as strokes)      ``the letter {}.``
textures  striped, banded, checkered, dotted, noisy, plain        ``a {} texture.``
========  =====================================================  ==============================

Every image is a function of (domain, split, index, seed): the same arguments always give the
same pixels. :func:`caption_pairs` draws the separate "pre-training" world (coloured shapes on
textured backgrounds, with captions) that gives a tiny CLIP some zero-shot ability on the
shapes, colours and textures domains but none on digits and glyphs.
"""

from __future__ import annotations

import zlib
from typing import Dict, List, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw

from .clip_benchmark import Domain, clip_benchmark

SIZE = 32
COLOURS: Dict[str, Tuple[int, int, int]] = {
    "red": (220, 30, 30), "green": (30, 180, 40), "blue": (40, 60, 220),
    "yellow": (230, 210, 30), "magenta": (210, 40, 200), "cyan": (40, 200, 210),
}
SHAPES = ("circle", "square", "triangle", "cross", "ring", "diamond")
TEXTURES = ("striped", "banded", "checkered", "dotted", "noisy", "plain")
LETTERS = ("E", "F", "H", "L", "T", "X", "Z")
DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

DOMAINS: Dict[str, Domain] = {
    "shapes": Domain("shapes", SHAPES, "a drawing of a {}."),
    "digits": Domain("digits", DIGIT_NAMES, 'a photo of the number: "{}".'),
    "colours": Domain("colours", tuple(COLOURS), "a blob of {} colour."),
    "glyphs": Domain("glyphs", LETTERS, "the letter {}."),
    "textures": Domain("textures", TEXTURES, "a {} texture."),
}
DEFAULT_ORDER = ("shapes", "digits", "colours", "glyphs", "textures")

# letter strokes on a 0..1 square: list of line segments ((x0, y0), (x1, y1))
_STROKES = {
    "E": [((0, 0), (0, 1)), ((0, 0), (1, 0)), ((0, .5), (.8, .5)), ((0, 1), (1, 1))],
    "F": [((0, 0), (0, 1)), ((0, 0), (1, 0)), ((0, .5), (.8, .5))],
    "H": [((0, 0), (0, 1)), ((1, 0), (1, 1)), ((0, .5), (1, .5))],
    "L": [((0, 0), (0, 1)), ((0, 1), (1, 1))],
    "T": [((0, 0), (1, 0)), ((.5, 0), (.5, 1))],
    "X": [((0, 0), (1, 1)), ((1, 0), (0, 1))],
    "Z": [((0, 0), (1, 0)), ((1, 0), (0, 1)), ((0, 1), (1, 1))],
}


def _rng(*key) -> np.random.RandomState:
    return np.random.RandomState(zlib.crc32(repr(key).encode()) & 0x7FFFFFFF)


def _texture(name: str, rng, fg, bg) -> np.ndarray:
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    period = rng.randint(4, 8)
    phase = rng.randint(0, period)
    if name == "striped":
        mask = ((xx + phase) // (period // 2)) % 2 == 0
    elif name == "banded":
        mask = ((yy + phase) // (period // 2)) % 2 == 0
    elif name == "checkered":
        mask = (((xx + phase) // period) + ((yy + phase) // period)) % 2 == 0
    elif name == "dotted":
        mask = ((xx + phase) % period < 2) & ((yy + phase) % period < 2)
    elif name == "noisy":
        mask = rng.rand(SIZE, SIZE) < 0.5
    else:  # plain
        mask = np.zeros((SIZE, SIZE), dtype=bool)
    image = np.where(mask[..., None], np.array(fg), np.array(bg))
    return image.astype(np.uint8)


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, rng, colour) -> None:
    r = rng.uniform(7, 12)
    cx, cy = rng.uniform(r + 1, SIZE - r - 1, size=2)
    box = (cx - r, cy - r, cx + r, cy + r)
    if shape == "circle":
        draw.ellipse(box, fill=colour)
    elif shape == "ring":
        draw.ellipse(box, outline=colour, width=3)
    elif shape == "square":
        draw.rectangle(box, fill=colour)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=colour)
    elif shape == "diamond":
        draw.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=colour)
    else:  # cross
        w = r / 3
        draw.rectangle((cx - w, cy - r, cx + w, cy + r), fill=colour)
        draw.rectangle((cx - r, cy - w, cx + r, cy + w), fill=colour)


def _jitter(rng, colour, amount=25):
    return tuple(int(np.clip(c + rng.randint(-amount, amount + 1), 0, 255)) for c in colour)


def _background(rng) -> Tuple[int, int, int]:
    grey = rng.randint(90, 170)
    return (grey, grey, grey)


def draw_image(domain: str, label: int, rng) -> Image.Image:
    """One image of class ``label`` of a synthetic domain."""
    if domain == "shapes":
        image = Image.new("RGB", (SIZE, SIZE), _background(rng))
        colour = _jitter(rng, list(COLOURS.values())[rng.randint(len(COLOURS))])
        _draw_shape(ImageDraw.Draw(image), SHAPES[label], rng, colour)
        return image
    if domain == "colours":
        image = Image.new("RGB", (SIZE, SIZE), _background(rng))
        shape = SHAPES[rng.randint(len(SHAPES))]
        _draw_shape(ImageDraw.Draw(image), shape, rng, _jitter(rng, list(COLOURS.values())[label]))
        return image
    if domain == "textures":
        fg = _jitter(rng, list(COLOURS.values())[rng.randint(len(COLOURS))], 40)
        return Image.fromarray(_texture(TEXTURES[label], rng, fg, _background(rng)))
    if domain == "glyphs":
        image = Image.new("RGB", (SIZE, SIZE), _background(rng))
        draw = ImageDraw.Draw(image)
        size, x0, y0 = rng.uniform(14, 22), rng.uniform(3, 8), rng.uniform(3, 8)
        for (ax, ay), (bx, by) in _STROKES[LETTERS[label]]:
            draw.line((x0 + ax * size, y0 + ay * size, x0 + bx * size, y0 + by * size),
                      fill=(20, 20, 20), width=3)
        return image
    if domain == "digits":
        raise ValueError("digits images come from scikit-learn's dataset, not from draw_image")
    raise ValueError(f"unknown synthetic domain {domain!r}; known: {sorted(DOMAINS)}")


class SyntheticDomain:
    """A map-style dataset of ``size`` images of one synthetic domain (PIL images, local labels).

    Images are drawn once at construction (a few hundred 32 x 32 images: milliseconds) and
    passed through ``transform`` on access (Avalanche applies its transform groups on top).
    """

    def __init__(self, domain: str, split: str, size: int, seed: int = 0) -> None:
        if domain not in DOMAINS:
            raise ValueError(f"unknown synthetic domain {domain!r}; known: {sorted(DOMAINS)}")
        num_classes = len(DOMAINS[domain].classnames)
        if size < num_classes:
            raise ValueError(f"{domain}: size {size} is smaller than its {num_classes} classes")
        self.domain = domain
        self.targets: List[int] = [i % num_classes for i in range(size)]
        if domain == "digits":
            self.images = _digit_images(split, self.targets, seed)
        else:
            self.images = [draw_image(domain, label, _rng(domain, split, seed, i))
                           for i, label in enumerate(self.targets)]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        return self.images[index], self.targets[index]

    def fingerprint(self) -> str:
        """The generated images' pixels and labels (:mod:`~..fingerprint`)."""
        from ..fingerprint import digest

        return digest([self.domain, self.targets, *(image.tobytes() for image in self.images)])


def _digit_images(split: str, labels: Sequence[int], seed: int) -> List[Image.Image]:
    """scikit-learn's bundled 8x8 digits (1,797 images; even indices train, odd test), scaled to 32 x 32."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    parity = 0 if split == "train" else 1
    by_class = {c: [i for i in np.flatnonzero(digits.target == c) if i % 2 == parity] for c in range(10)}
    rng = _rng("digits", split, seed)
    images = []
    for label in labels:
        index = by_class[label][rng.randint(len(by_class[label]))]
        pixels = (255 - digits.images[index] * 255 / 16).astype(np.uint8)
        images.append(Image.fromarray(pixels).resize((SIZE, SIZE), Image.BILINEAR).convert("RGB"))
    return images


def synthetic(order: Sequence[str] = DEFAULT_ORDER, *, train_size: int = 60, test_size: int = 60,
              seed: int = 0, label_space: str = "all", train_transform=None, eval_transform=None):
    """The synthetic stream as an Avalanche benchmark (see :func:`~moram_avalanche.benchmarks.images.clip_benchmark.clip_benchmark`).

    ``train_size`` / ``test_size`` images per domain (balanced over classes); ``label_space``
    "all" (X-TAIL style, the default) or "domain" (MTIL style).
    """
    unknown = [d for d in order if d not in DOMAINS]
    if unknown or len(set(order)) != len(order) or not order:
        raise ValueError(f"order must list distinct domains of {sorted(DOMAINS)}, got {list(order)}")
    return clip_benchmark(
        [DOMAINS[d] for d in order],
        [SyntheticDomain(d, "train", train_size, seed) for d in order],
        [SyntheticDomain(d, "test", test_size, seed) for d in order],
        label_space=label_space, train_transform=train_transform, eval_transform=eval_transform,
    )


#: the stream options of the disk-backed streams (``--order``, ``--shots``, ``--data-seed``, ...;
#: :func:`~moram_avalanche.benchmarks.images.streams.xtail`, :func:`~moram_avalanche.benchmarks.images.streams.mtil`)
STREAM_OPTIONS = ("order", "shots", "seed", "prompts", "on_bad_image", "test_shots")
#: the ones the synthetic stream takes too (``--order shapes,digits``, ``--data-seed``)
SYNTHETIC_OPTIONS = ("order", "seed")


def synthetic_from_options(data_root=None, **options):
    """``--benchmark synthetic``: :func:`synthetic` from the stream options a run gives (no data
    root; one ``--order`` domain as a one-domain stream); a disk-backed stream's option it does not
    take (``--shots``, ...) is refused."""
    unsupported = sorted(k for k in options if k in STREAM_OPTIONS and k not in SYNTHETIC_OPTIONS)
    if unsupported:
        raise ValueError(f"the synthetic benchmark takes no {unsupported} options")
    if isinstance(options.get("order"), str):  # one domain
        options["order"] = (options["order"],)
    return synthetic(**options)


def caption_pairs(count: int, seed: int = 0) -> Tuple[List[Image.Image], List[str]]:
    """The pre-training world: a coloured shape on a textured background, with a caption.

    Captions name the colour, the shape and the background texture
    ("a red circle on a striped background."), never digits or letters.
    """
    images, captions = [], []
    colours = list(COLOURS)
    for i in range(count):
        rng = _rng("pretrain", seed, i)
        colour, shape = colours[rng.randint(len(colours))], SHAPES[rng.randint(len(SHAPES))]
        texture = TEXTURES[rng.randint(len(TEXTURES))]
        fg = _jitter(rng, (200, 200, 200), 50)
        image = Image.fromarray(_texture(texture, rng, fg, _background(rng)))
        _draw_shape(ImageDraw.Draw(image), shape, rng, _jitter(rng, COLOURS[colour]))
        images.append(image)
        captions.append(f"a {colour} {shape} on a {texture} background.")
    return images, captions
