"""Spies on the library's seams, for tests that check what reaches them without running them."""

__all__ = ["RunStopped", "spy_on_generate", "spy_on_run_stream"]


class RunStopped(Exception):
    """Raised by :func:`spy_on_run_stream`'s stand-in once it recorded what it was given."""


def spy_on_generate(lm):
    """Record the keyword arguments of every ``lm.model.generate`` call (the list returned), then generate."""
    calls = []
    generate = lm.model.generate

    def spy(**kwargs):
        calls.append(kwargs)
        return generate(**kwargs)

    lm.model.generate = spy
    return calls


def spy_on_run_stream(monkeypatch, record):
    """Replace the run loop: ``record(strategy, kwargs)`` returns what to keep of the strategy about
    to run and of ``run_stream``'s keyword arguments, then :class:`RunStopped` is raised; returns the
    dict that fills."""
    import moram_avalanche.experiments.runner as runner

    seen = {}

    def fake_run_stream(strategy, benchmark, out_dir, **kwargs):
        seen.update(record(strategy, kwargs))
        raise RunStopped

    monkeypatch.setattr(runner, "run_stream", fake_run_stream)
    return seen
