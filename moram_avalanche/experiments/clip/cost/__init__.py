"""What each method costs as tasks accumulate (``moram-avalanche cost``): parameters per weight
matrix and per task, peak training memory, training and inference ms/image.

* :mod:`.formula` -- trainable parameters of an adapter layer as a formula and a count;
* :mod:`.probe` -- :class:`CostProbe`, the plugin that counts one experience's parameters and
  memory (its time: the package's one timer, :class:`~moram_avalanche.strategies.plugins.timing.RunTime`);
* :mod:`.measure` -- :func:`measure_cost`, every strategy through 1 / 5 / 10 tasks;
* :mod:`.tables` -- the report, beside the paper's tables.
"""

from .formula import Formula, trainable_formula
from .measure import DEFAULT_STRATEGIES, CostOptions, measure_cost
from .probe import CostProbe
from .tables import cost_report

__all__ = ["CostOptions", "CostProbe", "DEFAULT_STRATEGIES", "Formula", "cost_report", "measure_cost",
           "trainable_formula"]
