"""Rules about gpuready's own work on the node: a ``--restart`` transaction left unfinished."""

from __future__ import annotations

from collections.abc import Iterator

from gpuready.errors import InputError
from gpuready.problems import Problem, Severity
from gpuready.rules.base import Rule, Scope
from gpuready.rules.context import NodeContext, plain_problem


class TransactionPending(Rule):
    """A `--restart` transaction was killed before its verdict; its journal is still there.

    ## What it does
    Looks for the journal gpuready keeps beside the main config
    (`config.toml.gpuready.txn.json`) from the first file a `--restart` transaction writes to
    its verdict, and reports it, with the phase it reached. Reading commands never finish it.

    ## Why is this bad?
    The run was killed between writing and proving: the files may hold a change containerd has
    not been restarted on (it runs the old config, and the next restart, whenever it comes,
    loads a change nobody verified), or a roll-back may be half done.

    ## Example
    ```text
    /etc/containerd/config.toml
    /etc/containerd/config.toml.gpuready.txn.json   (left by a killed --restart)
    ```

    ## Use instead
    ```text
    /etc/containerd/config.toml
    ```

    ## Fix
    Run a writing command on the node (`gpuready configure --restart`, `unconfigure`,
    `migrate`, `setup`): it finishes the transaction first (restart and verify, or roll back)
    and says which.
    """

    name = "transaction-pending"
    severity = Severity.ERROR
    scope = Scope.NODE

    def check(self, ctx: NodeContext) -> Iterator[Problem]:
        from gpuready.workflow import journal

        if not ctx.files:
            return
        node = ctx.options.node
        config = ctx.files[0].path
        if not journal.pending(node, config):
            return
        try:
            found = journal.load(node, config)
        except InputError as error:
            state = f"a journal gpuready refuses to act on: {error.message()}"
        else:
            state = f"killed in its {found.phase} phase" if found else "just finished"
        yield plain_problem(
            self,
            f"a --restart transaction on {config} was never finished ({state}): containerd "
            "may not run what the files say",
            file=ctx.display(journal.journal_path(config)),
            fix="run a writing command on this node (gpuready configure --restart, "
            "unconfigure, migrate, setup): it finishes the transaction first",
        )


# The rules this module defines, in the order the catalogue lists them.
RULES = (
    TransactionPending(),
)
