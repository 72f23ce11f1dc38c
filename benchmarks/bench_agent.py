"""The cluster agent's costs, measured on a real containerd: start, idle, and reaction.

Runs ``gpuready agent`` as the DaemonSet runs it, on a node tree whose containerd (Debian's, as
tests/harness/namespaced.py starts it: the tree's folders at their node paths in a mount
namespace of their own) is restarted through the test harness's restart command, with the
interval of deploy/kubernetes/configmap.yaml. Prints:

1. the start from exec to its first verdict on an unchanged node (the second start; the first
   configures the node), beside its floor: a program importing what the agent cannot run
   without (argparse, pathlib, tomllib, yaml, prometheus_client, http.server, grpc), median of
   ``--runs`` starts taken in turns with the floor: target at most 1.3;
2. its idle CPU over ``--idle-seconds`` (default 600) from ``/proc/PID/stat``: target under 0.1%
   of one core;
3. an owner's rewrite of the config seen and judged (the agent's first line about it) and put
   back (its pass line, the restart included): target judged within one second.

Needs root, containerd, runc, unshare and nsenter, as the agent's tests do. Not a test.

    python3 benchmarks/bench_agent.py [--runs 5] [--idle-seconds 600]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from tests.harness.agent import AgentProcess, live_node, write_settings  # noqa: E402

FLOOR = [sys.executable, "-c", "import argparse, pathlib, tomllib, yaml, prometheus_client, "
         "http.server, grpc"]
CONFIGMAP = REPO / "deploy" / "kubernetes" / "configmap.yaml"


def default_interval() -> float:
    """The interval the shipped ConfigMap sets."""
    for document in yaml.safe_load_all(CONFIGMAP.read_text()):
        for text in (document or {}).get("data", {}).values():
            settings = yaml.safe_load(text)
            if isinstance(settings, dict) and "interval_seconds" in settings:
                return float(settings["interval_seconds"])
    raise SystemExit(f"{CONFIGMAP}: no interval_seconds")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def started(node) -> tuple[AgentProcess, float]:
    """An agent on ``node`` and the seconds from its exec to its first pass line."""
    begin = time.perf_counter()
    agent = AgentProcess(node)
    agent.wait_for("pass:")
    return agent, time.perf_counter() - begin


def floor_seconds() -> float:
    """One run of the floor program."""
    begin = time.perf_counter()
    subprocess.run(FLOOR, check=True)
    return time.perf_counter() - begin


def main() -> None:
    """Measure and print the three rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="starts measured (default: 5)")
    parser.add_argument("--idle-seconds", type=float, default=600.0,
                        help="how long idle CPU is sampled (default: 600)")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=True)
    interval = default_interval()
    with tempfile.TemporaryDirectory(prefix="gpuready-agent-bench-") as work, \
            live_node(Path(work)) as node:
        write_settings(node, restart=node.restarter(), interval_seconds=interval)
        first, _ = started(node)  # configures the node: one restart
        first.terminate()
        pairs = []
        for _ in range(args.runs):
            agent, seconds = started(node)
            agent.terminate()
            pairs.append((seconds, floor_seconds()))
        ratio = statistics.median(s / f for s, f in pairs)
        print(f"Python {sys.version.split()[0]} on {os.cpu_count()} CPUs, interval {interval:g}s")
        print(f"start to first verdict, unchanged node  {ratio:5.2f}x floor (<= 1.3) "
              f"{'met' if ratio <= 1.3 else 'NOT met'}  "
              f"{statistics.median(s for s, _ in pairs) * 1000:6.0f} ms, floor "
              f"{statistics.median(f for _, f in pairs) * 1000:5.0f} ms")

        agent, _ = started(node)
        before = cpu_seconds(agent.process.pid)
        time.sleep(args.idle_seconds)
        share = (cpu_seconds(agent.process.pid) - before) / args.idle_seconds * 100
        print(f"idle CPU over {args.idle_seconds:g}s                 {share:6.3f}% of a core "
              f"(< 0.1%) {'met' if share < 0.1 else 'NOT met'}")

        node.config.write_bytes(node.original)  # an owner rewrites the config
        written = time.perf_counter()
        agent.wait_for(str(node.config))  # its judgement: the plan line naming the file
        judged = time.perf_counter() - written
        agent.wait_for("pass:")
        repaired = time.perf_counter() - written
        print(f"an owner's rewrite judged in            {judged:6.2f} s (<= 1) "
              f"{'met' if judged <= 1 else 'NOT met'}; put back, restart included, in "
              f"{repaired:.2f} s")
        agent.terminate()


if __name__ == "__main__":
    main()
