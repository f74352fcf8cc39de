"""Data-parallel pieces: one process draws Avalanche's batches; two (gloo, CPU) give the one-process gradient
and MoRAM's activation statistics."""

import torch

from gradient_workers import BATCH, CLASSES, WIDTH, clip_like_loss, free_port, problem, recorded_stats, worker  # noqa: F401
from moram_avalanche.algorithms.data_parallel import ShardedBatches, shard_bounds, world_size


def test_one_process_draws_the_batches_of_avalanches_training_loader(make_stream):
    from avalanche.benchmarks.utils.data_loader import TaskBalancedDataLoader

    data = make_stream("all", train_sizes=(11, 5, 3)).train_stream[0].dataset.train()
    torch.manual_seed(7)
    avalanche = [batch[1].tolist() for _ in range(2) for batch in
                 TaskBalancedDataLoader(data, batch_size=4, shuffle=True, oversample_small_groups=True)]
    torch.manual_seed(7)
    loader = torch.utils.data.DataLoader(data, batch_sampler=ShardedBatches(len(data), 4),
                                         collate_fn=data.collate_fn)
    ours = [batch[1].tolist() for _ in range(2) for batch in loader]
    assert world_size() == 1 and ours == avalanche and len(ours) == 6  # two passes, reshuffled
    assert [len(b) for b in ours] == [4, 4, 3] * 2


def test_shards_partition_every_batch():
    for count in range(12):
        for parts in (1, 2, 3):
            pieces = [list(range(count))[shard_bounds(count, p, parts)] for p in range(parts)]
            assert sum(pieces, []) == list(range(count))
            assert max(map(len, pieces)) - min(map(len, pieces)) <= 1


def test_sharded_weights_pad_the_shorter_evaluation_shares_and_throw_the_padding_away(monkeypatch):
    """With sharded weights every process calls the model as often as the others (padding batches
    of sample 0), each real sample once; a padding batch's output and minibatch are emptied."""
    from types import SimpleNamespace

    import moram_avalanche.algorithms.data_parallel as collectives
    import moram_avalanche.strategies.plugins.data_parallel as plugin

    for count, batch, expected in ((8, 2, [1, 2, 2]), (2, 4, [0, 1, 1]), (9, 3, [1, 1, 1])):
        monkeypatch.setattr(collectives, "world_size", lambda: 3)
        monkeypatch.setattr(plugin, "world_size", lambda: 3)
        real, seen = [], []
        for me in range(3):
            monkeypatch.setattr(collectives, "rank", lambda me=me: me)
            batches, first_padding = plugin.padded_eval_batches(count, batch)
            assert len(batches) == max(expected) and all(b == [0] for b in batches[first_padding:])
            real.append(first_padding)
            seen += [i for b in batches[:first_padding] for i in b]
        assert real == expected and seen == list(range(count))
    parallel = plugin.DataParallel()
    parallel.padding_from, parallel.eval_batches = 1, 0
    strategy = SimpleNamespace(mb_output=torch.ones(2), mbatch=[["a", "b"], ["x", "y"], torch.zeros(2)])
    parallel.after_eval_forward(strategy)  # a real batch: kept
    assert strategy.mb_output.shape == (2,) and strategy.mbatch[0] == ["a", "b"]
    parallel.after_eval_forward(strategy)  # a padding batch: thrown away
    assert strategy.mb_output.shape == (0,) and strategy.mbatch[:2] == [[], []] and strategy.mbatch[2].shape == (0,)


def test_two_processes_give_the_one_process_gradient_and_batches(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    x, weight, text, labels = problem()
    weight.requires_grad_(True)
    clip_like_loss(x, weight, text, labels, BATCH, 1).backward()  # one process, the whole batch
    torch.manual_seed(5)
    whole = [list(b) for _ in range(2) for b in ShardedBatches(11, 4)]
    results = [torch.load(tmp_path / f"{r}.pt", weights_only=True) for r in (0, 1)]
    mass, hits = recorded_stats(x)
    assert hits.sum() == BATCH * 2  # top-2 of 4 atoms per sample
    for result in results:
        assert torch.allclose(result["grad"], weight.grad, atol=1e-6)
        # every process holds the whole batch's activation statistics (so pruning agrees)
        assert torch.allclose(result["mass"], mass, atol=1e-6) and torch.equal(result["hits"], hits)
    assert [a + b for a, b in zip(results[0]["batches"], results[1]["batches"])] == whole
