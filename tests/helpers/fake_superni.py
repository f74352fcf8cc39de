"""A fake copy of SAPT's ``CL_Benchmark/SuperNI`` tree, written by tests (no download).

Each task file has SuperNI's fields the reader uses (``Definition``, ``Instances`` with
``input`` and ``output``, a string or a list) and one it ignores (``Positive Examples``).
"""

import json


def superni_tree(root, tasks=None, train=6, test=4, outputs=None):
    """``root/SuperNI/<task>/{train,dev,test}.json`` for ``tasks`` (default: SAPT's fifteen).

    Instance ``i`` of a task is ``"<task> item i"`` with output ``"answer i"``; ``outputs`` maps a
    task name to a function ``i -> output`` to override it (e.g. a list of references).
    """
    from moram_avalanche.benchmarks.text.superni import SUPERNI_TASKS

    outputs = outputs or {}
    for name in tasks or SUPERNI_TASKS:
        folder = root / "SuperNI" / name
        folder.mkdir(parents=True)
        make = outputs.get(name, lambda i: [f"answer {i % 3}"])
        for split, n in (("train", train), ("dev", 2), ("test", test)):
            data = {"Definition": [f"  Answer the question of {name}.  "],
                    "Positive Examples": [{"input": "example", "output": "ignored"}],
                    "Instances": [{"id": f"{name}-{i}", "input": f"{name} item {i}", "output": make(i)}
                                  for i in range(n)]}
            (folder / f"{split}.json").write_text(json.dumps(data))
    return root


def pseudo_tree(root, tasks=None, count=3):
    """``root/SuperNI/<task>/{train,dev,test}.json``: a fake copy of SAPT's shipped pseudo-samples
    (``generated_data/lora_gen_superni_t5``): ``count`` inputs per task, empty outputs, a
    generated-looking definition; the three splits the same file, as SAPT ships them."""
    from moram_avalanche.benchmarks.text.superni import SUPERNI_TASKS

    for name in tasks or SUPERNI_TASKS:
        folder = root / "SuperNI" / name
        folder.mkdir(parents=True)
        data = {"Definition": [f"Generate an item of {name}."],
                "Instances": [{"input": f"{name} pseudo item {i}", "output": ""} for i in range(count)]}
        for split in ("train", "dev", "test"):
            (folder / f"{split}.json").write_text(json.dumps(data))
    return root
