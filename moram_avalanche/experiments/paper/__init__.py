"""What every paper table shares, whatever its family: the one ``reproduce`` pipeline.

* :mod:`.numbers`: the paper's numbers, shipped as CSV files beside this module;
* :mod:`.spec`: a table (:class:`~.spec.PaperTable`) and the method of each row;
* :mod:`.protocol`: what a family says of the stream a run reads (:class:`~.protocol.PaperProtocol`);
* :mod:`.settings`: what ``reproduce`` was asked, seeds and budget (:class:`~.settings.ReproductionSettings`);
* :mod:`.runs`: every run a set of tables needs, once, with its options and record;
* :mod:`.plan_text`: the plan (``--dry-run``); :mod:`.needs`: what must be on disk, checked first;
* :mod:`.setup`: one run as the run path takes it;
* :mod:`.results`: a table read back from its runs; :mod:`.report` and :mod:`.figure`: the
  table written beside the paper's numbers.

A family supplies its tables, protocols and settings as data and small hooks (:mod:`..clip`,
:mod:`..text`); nothing here imports a family (an import-linter contract).
"""
