"""Stand-in for get-pip.py: pip from the standard library's ensurepip, then that pip installs
what get-pip.py would have (its arguments are pip install's, less get-pip's own options)."""

import subprocess
import sys

OWN_OPTIONS = ("--no-setuptools", "--no-wheel")

# In a process of its own: ensurepip turns pip's configuration off in the environment it runs in.
subprocess.run([sys.executable, "-m", "ensurepip", "--upgrade"], check=True)
arguments = [arg for arg in sys.argv[1:] if arg not in OWN_OPTIONS]
sys.exit(subprocess.run([sys.executable, "-m", "pip", "install", *arguments]).returncode)
