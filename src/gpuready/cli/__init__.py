"""The command line: parses arguments, runs one command, prints, and exits.

Each command lives in its own ``cmd_*.py`` module that defines ``register(subparsers)``, listed
with its one-line summary in :mod:`gpuready.cli.commands`. A run imports the module of the
command it runs and no other (``--help`` lists them all from the table and imports none); a
command module imports only ``argparse`` at load time and the work it wires up inside its
``run`` function.
"""
