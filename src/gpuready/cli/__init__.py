"""The command line: parses arguments, runs one command, prints, and exits.

Each command lives in its own ``cmd_*.py`` module that defines ``register(subparsers)``; those
modules import only ``argparse`` at load time, so ``gpuready --help`` stays fast, and import the
work they wire up inside their ``run`` functions.
"""
