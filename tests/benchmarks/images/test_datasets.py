"""Every PIL mode the datasets hold becomes the RGB image it shows, or is refused with the file
named; the record of skipped images survives a line torn by a killed process."""

import json

import numpy as np
import pytest
from PIL import Image

from moram_avalanche.benchmarks.images.datasets import (
    BadImageError,
    BadImages,
    ImageFiles,
    UnsupportedImageError,
    read_rgb,
    to_rgb,
)


def saved(tmp_path, image, name, **kwargs):
    path = tmp_path / name
    image.save(path, **kwargs)
    return path


def pixels(image):
    assert image.mode == "RGB"
    return np.asarray(image).astype(int)


def test_sixteen_bit_grey_is_scaled_not_clipped_to_white(tmp_path):
    ramp = (np.arange(256, dtype=np.uint32).reshape(16, 16) * 257).astype(np.uint16)  # 0 .. 65535
    path = saved(tmp_path, Image.fromarray(ramp), "grey16.png")
    assert Image.open(path).mode == "I;16"
    assert np.asarray(Image.open(path).convert("RGB")).mean() > 250  # what convert("RGB") gives
    rgb = pixels(read_rgb(path))
    assert (rgb[..., 0] == np.arange(256).reshape(16, 16)).all()  # v * 255 / 65535, exactly
    assert (rgb[..., 0] == rgb[..., 2]).all()


def test_thirty_two_bit_grey_is_kept_scaled_or_refused():
    eight = Image.fromarray(np.array([[0, 200]], dtype=np.int32), mode="I")
    assert pixels(to_rgb(eight))[0, :, 0].tolist() == [0, 200]
    sixteen = Image.fromarray(np.array([[0, 65535]], dtype=np.int32), mode="I")
    assert pixels(to_rgb(sixteen))[0, :, 0].tolist() == [0, 255]
    with pytest.raises(UnsupportedImageError, match=r"32-bit grey values in \[0, 70000\] do not fit in 16 bits"):
        to_rgb(Image.fromarray(np.array([[0, 70000]], dtype=np.int32), mode="I"))


def test_palette_and_its_transparency(tmp_path):
    palette = Image.new("P", (2, 1))
    palette.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    palette.putpixel((1, 0), 1)
    path = saved(tmp_path, palette, "palette.png")
    assert pixels(read_rgb(path))[0].tolist() == [[255, 0, 0], [0, 0, 255]]
    path = saved(tmp_path, palette, "transparent.png", transparency=0)
    assert pixels(read_rgb(path))[0].tolist() == [[255, 255, 255], [0, 0, 255]]  # index 0 -> white


def test_alpha_is_composited_over_white(tmp_path):
    rgba = Image.new("RGBA", (2, 1), (0, 0, 0, 0))
    rgba.putpixel((1, 0), (200, 100, 0, 255))
    rgb = pixels(read_rgb(saved(tmp_path, rgba, "rgba.png")))
    assert rgb[0].tolist() == [[255, 255, 255], [200, 100, 0]]  # dropping alpha would give black
    half = Image.new("LA", (1, 1), (0, 128))
    assert pixels(to_rgb(half))[0, 0].tolist() == [127, 127, 127]


def test_cmyk_jpeg_and_bilevel(tmp_path):
    cmyk = saved(tmp_path, Image.new("CMYK", (8, 8), (0, 255, 255, 0)), "cmyk.jpg", quality=100)
    red = pixels(read_rgb(cmyk))
    assert (red[..., 0] > 250).all() and (red[..., 1:] < 5).all()
    bilevel = Image.new("1", (1, 2))
    bilevel.putpixel((0, 1), 1)
    assert pixels(to_rgb(bilevel))[:, 0, 0].tolist() == [0, 255]


def test_a_mode_without_a_faithful_conversion_is_skipped_with_the_file_named(tmp_path):
    path = saved(tmp_path, Image.new("F", (4, 4), 0.5), "float.tif")
    good = saved(tmp_path, Image.new("RGB", (4, 4), (1, 2, 3)), "good.png")
    record = BadImages("skip", tmp_path / "bad.jsonl")
    images = ImageFiles([path, good], [0, 0], name="Toy", bad_images=record)
    with pytest.warns(UserWarning, match="float.tif of dataset 'Toy': UnsupportedImageError: PIL mode 'F'"):
        image, label = images[0]
    assert pixels(image)[0, 0].tolist() == [1, 2, 3] and label == 0
    assert record.skipped() == {str(path): "Toy"}
    strict = ImageFiles([path], [0], name="Toy", bad_images=BadImages("raise"))
    with pytest.raises(BadImageError, match="float.tif of dataset 'Toy'.*replace the file"):
        strict[0]


def test_a_torn_last_line_is_ignored_and_the_next_record_starts_a_line(tmp_path):
    log = tmp_path / "run" / "bad_images.jsonl"
    log.parent.mkdir()
    whole = json.dumps({"dataset": "Food", "path": "/a.jpg", "error": "x"})
    log.write_text(whole + "\n" + whole[:20])  # a process killed mid-write
    record = BadImages("skip")
    record.redirect(log)
    assert record.skipped() == {"/a.jpg": "Food"}
    with pytest.warns(UserWarning):
        record.handle("DTD", "/b.jpg", OSError("broken"))
    assert record.skipped() == {"/a.jpg": "Food", "/b.jpg": "DTD"}
    assert log.read_text().splitlines()[1] == whole[:20]  # the torn line kept apart, never merged
