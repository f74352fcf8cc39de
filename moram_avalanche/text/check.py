"""Check a language model's folder before its weights load: is it the model it claims to be?

:func:`check_language_model` reads what is cheap to read -- ``config.json``, the headers of the
``*.safetensors`` files, the tokenizer -- and refuses, in one line naming the file and the fix,
every model that transformers would load wrongly without stopping:

* a ``config.json`` that is not JSON (transformers says "cannot find model ... download it"),
  names no architecture transformers knows, or is no seq2seq or causal language model;
* weights missing, a shard missing, a ``*.safetensors`` file truncated (an interrupted copy) or
  not a safetensors file at all;
* weights that do not fit ``config.json``: another architecture's ``config.json`` over the
  weights (transformers prints a MISSING table and initialises every weight at random), or
  sizes that differ (a wrong ``intermediate_size``). The check builds the model on the meta
  device from the safetensors headers alone (``from_pretrained(device_map="meta")``: no tensor
  is read);
* no tokenizer files (transformers falls back to an empty default tokenizer: every word
  ``<unk>``), a SentencePiece-only tokenizer without the ``sentencepiece`` package, a tokenizer
  that does not load, or whose ids run past the model's embedding (an ``IndexError`` in the
  middle of training), or a causal tokenizer with neither a pad nor an EOS token;
* ``dtype="float16"`` (:func:`check_dtype`): the language-model loop does no loss scaling, which
  float16 training needs (its gradients underflow below 6e-8 and its activations overflow above
  65504; with ``master_weights=False`` AdamW's ``eps`` 1e-8 is 0 in float16 too); bfloat16 has
  float32's range at float16's memory and needs none (the loop steps float32 master copies of its
  trainable weights, :mod:`moram_avalanche.algorithms.mixed_precision`).

:func:`~moram_avalanche.text.load.load_language_model` runs this check first, then loads, then
compares transformers' own loading report with the same rule (weights in ``*.bin`` files or
fetched from the Hub are only seen then).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Tuple

from ..utils.errors import UserError

#: ``dtype`` names a language model loads and trains in (float16: :func:`check_dtype`)
DTYPES = ("float32", "bfloat16")
#: the weights files transformers reads, in its order of preference
WEIGHTS_FILES = ("model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json",
                 "pytorch_model.bin")
#: a tokenizer's own files (any one of these groups makes a tokenizer)
TOKENIZER_FILES = (("tokenizer.json",), ("tokenizer.model",), ("spiece.model",), ("sentencepiece.bpe.model",),
                   ("vocab.json", "merges.txt"), ("vocab.txt",), ("tiktoken.model",))
#: the tokenizer files read by the ``sentencepiece`` package
SENTENCEPIECE_FILES = ("tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
#: the fix of every tokenizer problem
TOKENIZER_FIX = ("copy the tokenizer files that came with these weights into the folder "
                 "(tokenizer.save_pretrained(FOLDER) writes them)")


class ModelNotFound(UserError, OSError):
    """A model's files are neither in the given folder nor in the Hugging Face cache."""


class ModelRefused(UserError, ValueError):
    """A model folder whose files are there but are not the model they claim to be."""


@dataclass
class CheckedModel:
    """What :func:`check_language_model` read: where the files are, the config, the model's
    class, the tokenizer (loaded, not yet prepared for batching)."""

    name: str
    folder: Optional[Path]  # None: a Hub name not in the local cache (checked after it loads)
    config: object = field(repr=False)
    seq2seq: bool = False
    tokenizer: object = field(default=None, repr=False)

    @property
    def auto_class(self):
        from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

        return AutoModelForSeq2SeqLM if self.seq2seq else AutoModelForCausalLM

    @property
    def source(self) -> str:
        """What ``from_pretrained`` is given: the folder when there is one, else the name."""
        return str(self.folder) if self.folder is not None else self.name


def check_dtype(dtype, option: str = "--dtype") -> str:
    """``dtype`` if the language-model loop trains in it; float16 is refused with the reason
    and the fix (module docstring), anything else with the choices."""
    if dtype == "float16":
        raise ValueError(
            f"{option} float16 is refused: the language-model loop does no loss scaling, which float16 needs (its "
            "gradients underflow below 6e-8, its activations overflow above 65504; with master_weights=False AdamW's "
            "eps, 1e-8, is 0 in float16 too: NaN at any learning rate); use "
            f"{option} bfloat16 (float16's memory with float32's range: no loss scaling needed; GPUs since Ampere, "
            f"and the CPU) or {option} float32")
    if dtype not in DTYPES:
        raise ValueError(f"{option} must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return dtype


def offline(local_files_only: Optional[bool] = None) -> bool:
    """Never touch the network: ``local_files_only`` when given, else whether ``HF_HUB_OFFLINE`` is set."""
    if local_files_only is not None:
        return bool(local_files_only)
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def looks_local(name_or_path: str) -> bool:
    """Whether ``name_or_path`` is meant as a folder (absolute, relative with ./ or ~, or existing)."""
    path = Path(name_or_path).expanduser()
    return path.is_absolute() or name_or_path.startswith((".", "~")) or path.exists()


def fetch_fix(name: str) -> str:
    """How to get model ``name``'s files onto this machine."""
    return (f"download it once where there is a network (e.g. `huggingface-cli download {name}` or "
            f"`AutoModel.from_pretrained({name!r})`, which fills the Hugging Face cache, "
            f"HF_HOME={os.environ.get('HF_HOME', '~/.cache/huggingface')}), or pass the local folder "
            "that holds config.json, the weights (*.safetensors) and the tokenizer files; with "
            "HF_HUB_OFFLINE=1 nothing is fetched from the Hub")


def load_config(name_or_path: str, *, local_files_only: Optional[bool] = None):
    """The model's ``AutoConfig``: a local folder's is read by :func:`read_config` (a broken
    ``config.json`` is a :class:`ModelRefused` naming it); :class:`ModelNotFound` with the fix
    when there is no folder, no ``config.json`` in it, or a Hub name that cannot be found."""
    from transformers import AutoConfig

    path = Path(name_or_path).expanduser()
    if looks_local(name_or_path):
        if not (path / "config.json").is_file():
            raise ModelNotFound(f"no model folder at {path}: expected {path / 'config.json'} (and the "
                                f"weights and tokenizer files beside it); "
                                + ("the folder exists but holds no config.json" if path.is_dir()
                                   else "the folder does not exist"))
        return read_config(path, name_or_path)
    try:
        with quiet_transformers():
            return AutoConfig.from_pretrained(name_or_path, local_files_only=offline(local_files_only))
    except OSError as error:
        raise ModelNotFound(f"cannot find model {name_or_path!r} locally or in the Hugging Face "
                            f"cache ({error.__class__.__name__}); {fetch_fix(name_or_path)}") from None


def cached_folder(name: str) -> Optional[Path]:
    """The local snapshot folder of Hub model ``name`` when its config is in the Hugging Face cache."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(name, "config.json")
    except ValueError:  # not a valid repository id
        return None
    return Path(found).parent if isinstance(found, str) else None


def one_line(error: BaseException, limit: int = 200) -> str:
    """``error``'s message on one line (at most ``limit`` characters), or its type's name."""
    text = " ".join(str(error).split())
    return (text[:limit] + "...") if len(text) > limit else (text or type(error).__name__)


@contextlib.contextmanager
def quiet_transformers():
    """transformers' warnings (its MISSING / UNEXPECTED loading table) silenced while open: the
    check reports what they say, in one line."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


# ----------------------------------------------------------------------------- config
def read_config(folder: Path, name: str):
    """The folder's ``AutoConfig``; a :class:`ModelRefused` naming ``config.json`` when it is not
    JSON, names no known architecture, or holds values transformers refuses."""
    from transformers import AutoConfig, __version__

    path = folder / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ModelRefused(f"{path} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}): "
                           "restore the config.json saved with these weights") from None
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as error:
        raise ModelRefused(f"cannot read {path} ({error}): restore the config.json saved with these weights") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("model_type"), str):
        raise ModelRefused(f"{path} names no model_type (found {type(raw).__name__} without it): restore the "
                           "config.json saved with these weights")
    try:
        with quiet_transformers():
            return AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except Exception as error:  # noqa: BLE001 -- config classes raise many kinds (a field of the wrong type: huggingface_hub's)
        first = one_line(error)
        if f"`{raw['model_type']}`" in first or "does not recognize" in first:
            raise ModelRefused(f"{path} says model_type {raw['model_type']!r}, which transformers {__version__} "
                               "does not know: correct model_type, or upgrade transformers "
                               "(pip install -U transformers)") from None
        raise ModelRefused(f"{path} does not load ({first}): restore the config.json saved with "
                           f"these weights ({name})") from None


def model_class(config, path: Path):
    """``(seq2seq, auto class)`` of ``config``; a :class:`ModelRefused` for a model that is neither
    a seq2seq nor a causal language model (a BERT encoder, a vision model)."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    if type(config) not in auto._model_mapping:
        raise ModelRefused(f"{path} describes a {config.model_type!r} model, which is no "
                           f"{'seq2seq' if seq2seq else 'causal'} language model transformers can generate "
                           "with: pass a T5-, LLaMA-, Gemma-, Mistral- or Qwen-like model")
    return seq2seq, auto


def seq2seq_type(name_or_path: str, *, local_files_only: Optional[bool] = None) -> Optional[str]:
    """The ``model_type`` of ``name_or_path`` when its ``config.json`` says it is a seq2seq
    (encoder-decoder) model, such as ``"t5"``; None for a decoder-only one, or when the config cannot
    be read (:func:`check_language_model` names why). Only the config is read (:func:`load_config`)."""
    try:
        config = load_config(name_or_path, local_files_only=local_files_only)
    except (OSError, ValueError):
        return None
    return str(config.model_type) if getattr(config, "is_encoder_decoder", False) else None


# ----------------------------------------------------------------------------- weights
def weights_files(folder: Path) -> Tuple[Path, ...]:
    """The folder's weights files (shards listed by an index included); a :class:`ModelNotFound`
    when there are none, a :class:`ModelRefused` when an index lists shards that are not there."""
    for name in WEIGHTS_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if not name.endswith(".index.json"):
            return (path,)
        try:
            shards = sorted(set(json.loads(path.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
            raise ModelRefused(f"{path} is not a weights index ({type(error).__name__}: {error}): restore it from "
                               "the model's files") from None
        missing = [shard for shard in shards if not (folder / shard).is_file()]
        if missing:
            raise ModelRefused(f"{path} lists {len(missing)} weights file(s) that are not in {folder}: "
                               f"{', '.join(missing[:3])}: copy or download them")
        return tuple(folder / shard for shard in shards)
    loose = sorted(folder.glob("*.safetensors"))
    broken = [path.name for path in loose if not path.is_file()]  # dangling links
    if loose and not broken:
        return tuple(loose)
    if broken or any((folder / name).is_symlink() for name in WEIGHTS_FILES):
        names = broken or [name for name in WEIGHTS_FILES if (folder / name).is_symlink()]
        raise ModelNotFound(f"the weights {', '.join(names)} in {folder} are links to files that are not there (a Hugging "
                            "Face cache whose blobs were removed?): download or copy the weights again")
    raise ModelNotFound(f"no weights in {folder}: expected {' or '.join(WEIGHTS_FILES[1::2])} (or shards with "
                       f"their index); copy the weights saved with {folder / 'config.json'} into the folder")


def check_safetensors(path: Path) -> None:
    """A :class:`ModelRefused` when ``path`` is no complete safetensors file: its header must be
    JSON and the tensors it lists must end where the file ends (a truncated copy does not)."""
    size = path.stat().st_size
    fix = "copy or download it again"
    with open(path, "rb") as file:
        head = file.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if length < 2 or 8 + length > size:
            raise ModelRefused(f"{path} is not a safetensors file or is truncated ({size} bytes, header of "
                               f"{length} bytes announced): {fix}")
        try:
            header = json.loads(file.read(length).decode("utf-8"))
            end = max((int(entry["data_offsets"][1]) for key, entry in header.items() if key != "__metadata__"),
                      default=0)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError, AttributeError,
                RecursionError) as error:
            raise ModelRefused(f"{path} has an unreadable safetensors header ({type(error).__name__}): {fix}") from None
    if 8 + length + end != size:
        raise ModelRefused(f"{path} is truncated or padded: its header lists {8 + length + end} bytes, the file holds "
                           f"{size}: {fix}")


def loading_problem(info: dict, config, weights: str) -> Optional[str]:
    """What transformers' loading report (``output_loading_info``) says is wrong, in one
    sentence, or None: weights of the model missing from the files (transformers would draw
    them at random) or of another size. Unexpected weights alone are left to transformers
    (checkpoints carry buffers some versions no longer keep)."""
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(info.get("mismatched_keys") or (), key=lambda entry: entry[0])
    unexpected = sorted(info.get("unexpected_keys") or ())
    what = f"config.json describes a {config.model_type!r} model ({type(config).__name__})"
    fix = ("config.json and the weights belong to different models: put the config.json saved with these weights "
           "beside them")
    if missing:
        other = f"; the weights hold {len(unexpected)} others (e.g. {unexpected[0]})" if unexpected else ""
        return (f"{what}, but {len(missing)} of its weights are not in {weights} (e.g. {missing[0]}){other}, and "
                f"transformers would initialise them at random: {fix}")
    if mismatched:
        key, found, expected = mismatched[0][:3]
        return (f"{what}, but {len(mismatched)} weights in {weights} have other sizes (e.g. {key}: {tuple(found)} "
                f"in the file, {tuple(expected)} by config.json): {fix}")
    return None


def safetensors_shapes(files) -> dict:
    """``{name: shape}`` of every tensor listed in the headers of ``files`` (no tensor is read)."""
    shapes = {}
    for path in files:
        with open(path, "rb") as file:
            length = struct.unpack("<Q", file.read(8))[0]
            header = json.loads(file.read(length).decode("utf-8"))
        shapes.update({key: tuple(entry["shape"]) for key, entry in header.items() if key != "__metadata__"})
    return shapes


def meta_model(auto, config):
    """The model of ``config`` on the meta device (no memory, no weights read)."""
    import torch

    try:
        with quiet_transformers(), torch.device("meta"):
            return auto.from_config(config)
    except Exception as error:  # noqa: BLE001 -- whatever a model's __init__ raises on values it cannot build
        first = one_line(error)
        raise ModelRefused(f"config.json describes a {config.model_type!r} model that cannot be built ({type(error).__name__}: "
                           f"{first}): restore the config.json saved with these weights") from None


def fits_exactly(model, shapes: dict) -> bool:
    """Whether the checkpoint's ``shapes`` hold every weight ``model`` loads (tied copies and the
    ones transformers ignores aside), each of the model's shape, under the model's names or
    without / with its base model prefix: the common case, decided from the headers alone."""
    import re

    tied = set(getattr(model, "all_tied_weights_keys", {}) or {})
    ignored = [re.compile(p) for p in (getattr(model, "_keys_to_ignore_on_load_missing", None) or ())]
    prefix = getattr(model, "base_model_prefix", "") or ""
    for name, tensor in model.state_dict().items():
        if name in tied or any(p.search(name) for p in ignored):
            continue
        spellings = [name]
        if prefix:
            spellings += [name.removeprefix(prefix + "."), f"{prefix}.{name}"]
        shape = next((shapes[k] for k in spellings if k in shapes), None)
        if shape != tuple(tensor.shape):
            return False
    return True


def check_weights(folder: Path, auto, config) -> int:
    """Refuse weights that are missing, damaged or do not fit ``config`` (module docstring);
    returns the rows of the model's input embedding.

    The safetensors headers are compared with the model built on the meta device; only when they
    do not match name for name (renamed or converted checkpoints, other architectures) does
    transformers' own loading report decide (``from_pretrained(device_map="meta")``, which
    reads the files through)."""
    files = weights_files(folder)
    for path in files:
        if path.suffix == ".safetensors":
            check_safetensors(path)
    if any(path.suffix != ".safetensors" for path in files) or getattr(config, "quantization_config", None):
        return int(getattr(config, "vocab_size", 0) or 0)  # *.bin or quantised: checked once loaded
    model = meta_model(auto, config)
    if not fits_exactly(model, safetensors_shapes(files)):
        where = str(files[0]) if len(files) == 1 else f"the {len(files)} weights files of {folder}"
        try:
            with quiet_transformers():
                model, info = auto.from_pretrained(str(folder), device_map="meta", output_loading_info=True,
                                                   ignore_mismatched_sizes=True, local_files_only=True)
        except (OSError, ValueError, RuntimeError) as error:
            first = one_line(error)
            raise ModelRefused(f"the weights in {folder} do not load ({first}): copy or download them again") from None
        problem = loading_problem(info, config, where)
        if problem:
            raise ModelRefused(problem)
    return int(model.get_input_embeddings().num_embeddings)


# ----------------------------------------------------------------------------- tokenizer
def check_tokenizer_files(folder: Path) -> None:
    """A :class:`ModelNotFound` when ``folder`` holds no tokenizer files, a :class:`ModelRefused`
    when it holds only a SentencePiece model and the ``sentencepiece`` package is not installed."""
    present = [group for group in TOKENIZER_FILES if all((folder / name).is_file() for name in group)]
    if not present:
        raise ModelNotFound(
            f"no tokenizer files in {folder} (expected tokenizer.json, or a SentencePiece tokenizer.model / "
            "spiece.model, or vocab.json with merges.txt): transformers would build an empty default tokenizer "
            f"that reads every word as <unk>; {TOKENIZER_FIX.replace('FOLDER', str(folder))}")
    if not (folder / "tokenizer.json").is_file() and all(group[0] in SENTENCEPIECE_FILES for group in present):
        import importlib.util

        if importlib.util.find_spec("sentencepiece") is None:
            raise ModelRefused(
                f"the tokenizer in {folder} is a SentencePiece model ({present[0][0]}, no tokenizer.json) and the "
                "sentencepiece package is not installed: pip install sentencepiece (or save the tokenizer once "
                "as tokenizer.json: AutoTokenizer.from_pretrained(...).save_pretrained(FOLDER) where it loads)")


def load_tokenizer(source: str, folder: Optional[Path], *, local_files_only: bool):
    """``AutoTokenizer.from_pretrained(source)``; what it raises becomes a :class:`ModelRefused`
    naming the folder and transformers' first line."""
    from transformers import AutoTokenizer

    where = folder if folder is not None else source
    try:
        with quiet_transformers():
            return AutoTokenizer.from_pretrained(source, local_files_only=local_files_only)
    except Exception as error:  # noqa: BLE001 -- tokenizers raises its own Exception for a broken tokenizer.json
        if isinstance(error, OSError) and folder is None:
            raise  # a Hub name whose files are not there: ModelNotFound's business
        first = one_line(error)
        raise ModelRefused(f"the tokenizer in {where} does not load ({type(error).__name__}: {first}): "
                           f"{TOKENIZER_FIX.replace('FOLDER', str(where))}") from None


def check_tokenizer_fits(tokenizer, rows: int, where, seq2seq: bool) -> None:
    """A :class:`ModelRefused` when token ids of ``tokenizer`` reach past the ``rows`` of the
    model's input embedding, or a causal tokenizer has neither a pad nor an EOS token."""
    if rows:
        largest = max([*tokenizer.get_vocab().values(), len(tokenizer) - 1])
        if largest >= rows:
            raise ModelRefused(
                f"the tokenizer in {where} has ids up to {largest}, the model's embedding {rows} rows (config.json "
                f"vocab_size): ids from {rows} on would fail mid-training (IndexError); use the tokenizer saved with "
                "these weights, or resize the embedding once (model.resize_token_embeddings(len(tokenizer)), "
                "then save_pretrained)")
    if not seq2seq and tokenizer.pad_token is None and tokenizer.eos_token is None:
        raise ModelRefused(f"the tokenizer in {where} has neither a pad nor an EOS token, so a causal model's "
                           "batches cannot be padded: set tokenizer.pad_token (or eos_token) and save it again")


# ----------------------------------------------------------------------------- the check
def complete(folder: Path) -> bool:
    """Whether ``folder`` holds weights and tokenizer files (a Hub snapshot may hold the config alone)."""
    weights = any((folder / name).is_file() for name in WEIGHTS_FILES) or any(folder.glob("*.safetensors"))
    return weights and any(all((folder / name).is_file() for name in group) for group in TOKENIZER_FILES)


def check_language_model(name_or_path: str, *, dtype: str = "float32",
                         local_files_only: Optional[bool] = None) -> CheckedModel:
    """Check everything about a language model that does not need its weights in memory
    (module docstring); returns what was read. Raises :class:`ModelRefused` (a ``ValueError``)
    for a model that is not what it claims to be, :class:`~moram_avalanche.text.load.ModelNotFound`
    (an ``OSError``) for one that is not there, a ``ValueError`` for ``dtype``. Nothing is
    written; a Hub name not in the local cache is checked as far as its config (with the
    network: the rest once :func:`~moram_avalanche.text.load.load_language_model` fetched it).
    """
    check_dtype(dtype, "dtype")
    if looks_local(name_or_path):
        folder = Path(name_or_path).expanduser()
    else:
        folder = cached_folder(name_or_path)
        if folder is not None and not offline(local_files_only) and not complete(folder):
            folder = None  # partly cached, online: from_pretrained fetches the rest (checked once loaded)
        if folder is None:  # offline: ModelNotFound; online: transformers fetches the config
            config = load_config(name_or_path, local_files_only=local_files_only)
            seq2seq, _ = model_class(config, Path(name_or_path) / "config.json")
            return CheckedModel(name_or_path, None, config, seq2seq)
    config = load_config(str(folder), local_files_only=True)
    seq2seq, auto = model_class(config, folder / "config.json")
    rows = check_weights(folder, auto, config)
    check_tokenizer_files(folder)
    tokenizer = load_tokenizer(str(folder), folder, local_files_only=True)
    check_tokenizer_fits(tokenizer, rows, folder, seq2seq)
    return CheckedModel(name_or_path, folder, config, seq2seq, tokenizer)


__all__ = ["CheckedModel", "DTYPES", "ModelNotFound", "ModelRefused", "SENTENCEPIECE_FILES", "TOKENIZER_FILES",
           "WEIGHTS_FILES", "check_dtype", "check_language_model", "check_safetensors", "check_tokenizer_files",
           "check_tokenizer_fits", "check_weights", "fetch_fix", "fits_exactly", "load_config", "loading_problem",
           "looks_local", "meta_model", "offline", "read_config", "safetensors_shapes", "seq2seq_type", "weights_files"]
