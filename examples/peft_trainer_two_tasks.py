"""MoRAM as a peft method: two tasks through transformers' ``Trainer``, then save and reload the adapter.

What it shows: ``get_peft_model(model, MoRAMConfig(...))`` puts a MoRAM atom bank on the model's
query and key projections (``MORAM_TARGET_MODULES``; the paper's language-model setting: r = 8
atoms per task and layer, top-k 4, tau 0.1, delta 0.2); the first task trains with a plain
``Trainer``; ``start_task`` freezes every atom, adds r new ones per layer and lets the Trainer
build a fresh optimizer over them for the next task (``MoRAMTaskCallback`` stops a ``train()``
whose optimizer misses a trainable atom). After each task it evaluates the loss on every task
(``loss_matrix.json``); at the end it saves the adapter (the atoms only, never the base
weights), reloads it onto a fresh base with ``PeftModel.from_pretrained`` and checks the two
models give the same logits (``probe.pt`` keeps the probe's inputs and logits).

The two tasks are two toy classification tasks of the package's synthetic text stream in
O-LoRA's prompt format; yours are any lists of ``(prompt, answer)`` strings.

Run it with real weights (``google-t5/t5-base`` from the Hugging Face Hub; the paper's AdamW at
a constant 1e-3, batch 64, one epoch per task):

    python examples/peft_trainer_two_tasks.py --model google-t5/t5-base --device cuda

``--tiny`` runs offline on the CPU in seconds: a tiny random T5 and a word-level tokenizer,
built from a config and saved as a model folder, loaded as a Hub name is.
"""

import argparse
import json
from pathlib import Path

import torch
from peft import PeftModel, get_peft_model
from transformers import DataCollatorForSeq2Seq, Trainer, TrainingArguments

from moram_avalanche import MoRAMConfig, MoRAMTaskCallback, load_language_model, seed_everything, start_task
from moram_avalanche.benchmarks.text.synthetic import synthetic_text_tasks


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="google-t5/t5-base", help="a seq2seq model: Hub name or folder")
    parser.add_argument("--tasks", default="colour,mood", help="two tasks of the synthetic text stream")
    parser.add_argument("--train-per-label", type=int, default=500, help="training prompts per label")
    parser.add_argument("--lr", type=float, default=1e-3, help="AdamW, constant (paper: 1e-3)")
    parser.add_argument("--batch-size", type=int, default=64, help="paper: 64")
    parser.add_argument("--epochs", type=float, default=1.0, help="per task (paper: 1)")
    parser.add_argument("--max-steps", type=int, default=-1, help="per task; -1: --epochs decide")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/peft-moram", help="checkpoints, the adapter and the results")
    parser.add_argument("--tiny", action="store_true",
                        help="offline CPU smoke run: a tiny random T5, 8 prompts per label, 6 steps per task")
    args = parser.parse_args(argv)
    if args.tiny:
        args.train_per_label, args.max_steps, args.batch_size, args.lr, args.device = 8, 6, 8, 1e-2, "cpu"
    return args


def tokenized(pairs, tokenizer):
    """``(prompt, answer)`` pairs as the Trainer's examples: input ids and label ids."""
    return [{"input_ids": tokenizer(prompt, truncation=True, max_length=512)["input_ids"],
             "labels": tokenizer(answer, truncation=True, max_length=50)["input_ids"]} for prompt, answer in pairs]


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    seed_everything(args.seed)
    tasks = synthetic_text_tasks(args.tasks.split(","), train_per_label=args.train_per_label, test_per_label=8)
    if args.tiny:  # a tiny random T5 saved as a folder, loaded below as a Hub name is
        from tiny_t5 import save_tiny_t5

        args.model = save_tiny_t5(out / "tiny-t5", tasks)
    base, tokenizer = load_language_model(args.model)
    model = get_peft_model(base, MoRAMConfig(task_type="SEQ_2_SEQ_LM"))  # task 1's atoms: outputs unchanged
    model.print_trainable_parameters()

    train = [tokenized(task.train, tokenizer) for task in tasks]
    test = {task.name: tokenized(task.test, tokenizer) for task in tasks}
    training = dict(per_device_train_batch_size=args.batch_size, learning_rate=args.lr, lr_scheduler_type="constant",
                    num_train_epochs=args.epochs, max_steps=args.max_steps, save_strategy="no", report_to=[],
                    use_cpu=args.device == "cpu", seed=args.seed, disable_tqdm=args.tiny, logging_strategy="no")
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(out / "task-1"), **training),
                      train_dataset=train[0], data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
                      callbacks=[MoRAMTaskCallback()])
    losses = {}
    for t, task in enumerate(tasks):
        if t > 0:
            start_task(trainer, train[t], output_dir=str(out / f"task-{t + 1}"))  # freeze, grow, new optimizer
        trainer.train()
        losses[task.name] = {name: trainer.evaluate(data)["eval_loss"] for name, data in test.items()}
    (out / "loss_matrix.json").write_text(json.dumps(losses, indent=1) + "\n")

    model.save_pretrained(str(out / "adapter"))  # every task's atoms, one bank per layer
    fresh, _ = load_language_model(args.model)
    reloaded = PeftModel.from_pretrained(fresh, str(out / "adapter")).to(model.device)
    probe = DataCollatorForSeq2Seq(tokenizer, model=model, return_tensors="pt")(test[tasks[0].name][:4])
    probe = {key: value.to(model.device) for key, value in probe.items()}
    model.eval()
    with torch.no_grad():
        trained, again = model(**probe).logits, reloaded(**probe).logits
    torch.save({"inputs": {key: value.cpu() for key, value in probe.items()}, "logits": trained.cpu()}, out / "probe.pt")
    print(f"loss after each task: {json.dumps(losses)}\n"
          f"reloaded adapter: largest logit difference {float((trained - again).abs().max()):.3g}")


if __name__ == "__main__":
    main()
