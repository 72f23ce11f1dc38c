"""Who owns containerd on a node: a distribution, a configuration tool, an operator, or nobody.

The facts about each owner live in one table (:mod:`gpuready.owners.table`) with their upstream
sources; :mod:`~gpuready.owners.detect` reads a node's files to pick the owner, and
:mod:`~gpuready.owners.configure` plans the edit where that owner reads. The table is keyed by
engine as well, so other container engines can add their rows without changing the readers.
"""
