"""The paper's figures from any MoRAM run (``moram-avalanche analyze LOG_DIR``).

* :mod:`.records` -- what a run keeps for its analysis (final banks, per-task records);
* :mod:`.banks` -- the model as it was after any task, from the final banks;
* :mod:`.activations` -- per-token mixture weights of a layer's atoms (Figs. 3, 5-8);
* :mod:`.mass` -- atoms carrying 99% of the cumulative activation mass (Figs. 9-11);
* :mod:`.pruning` -- atoms kept and storage saved per task and layer;
* :mod:`.scenarios`, :mod:`.samples`, :mod:`.source` -- which data, and the run's model and data;
* :mod:`.figures` -- the pictures; :mod:`.report` -- :func:`analyze`, which writes them all.
"""

from .activations import layer_activations, mixture_weights
from .banks import bank_after, install_banks
from .mass import atoms_for_mass, final_bank_mass, mass_counts
from .pruning import pruning_rows
from .records import RunRecord, load_run
from .report import AnalysisOptions, analyze
from .scenarios import Scenario, default_scenarios

__all__ = ["AnalysisOptions", "RunRecord", "Scenario", "analyze", "atoms_for_mass",
           "bank_after", "default_scenarios", "final_bank_mass", "install_banks", "layer_activations",
           "load_run", "mass_counts", "mixture_weights", "pruning_rows"]
