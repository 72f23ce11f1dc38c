"""``gpuready setup --engine docker``: the contract's eight steps where they apply to Docker.

The registration contract is containerd's; on a Docker machine the steps map as follows, and
the ones that do not apply say so instead of writing a file with no meaning:

1. base config: ``/etc/docker/daemon.json`` is kept as it is (or created as ``{}``, dockerd's
   defaults);
2. runtime section: ``runtimes.NAME`` added, judged by the never-break gate as ``configure
   --engine docker`` is (:class:`gpuready.containerd.gate.EngineGuard`): a runtime created under
   the name ``default-runtime`` gives needs ``--confirm-every-pod-uses-it``;
3. runtime options: its ``path`` (and ``runtimeArgs``); ``SystemdCgroup`` does not apply (dockerd
   sets the cgroup driver for every runtime, ``exec-opts: native.cgroupdriver``);
4. default.txt: ``DEFAULT`` is dockerd's default runtime, ``WHY=opt-in`` (containers choose the
   runtime with ``docker run --runtime NAME``);
5. parsed.txt: ``VERSION=N/A (docker)`` (daemon.json has no version), the runtimes;
6. the CDI spec and cdi-keys.txt, as for containerd (Docker reads CDI from 25.0);
7. RuntimeClass: does not apply (Kubernetes does not run pods through Docker); no file;
8. report.txt: the same five keys, ``N/A (docker)`` where a value has no meaning for Docker.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuready.changeset import write_all
from gpuready.containerd.gate import EngineGuard, Intent
from gpuready.engines.docker import config as daemon_json
from gpuready.engines.docker.engine import ENGINE, chain
from gpuready.engines.docker.facts import DAEMON_JSON
from gpuready.errors import InputError, MissingFileError
from gpuready.node import FileKind
from gpuready.plan import Plan
from gpuready.workflow import contract
from gpuready.workflow.contract import Check, NodeFiles, check_file_content
from gpuready.workflow.setup import (
    SetupOptions,
    SetupResult,
    Step,
    generated_outcome,
    kind_outcome,
    planned_outcome,
    stage_new_cdi_spec,
    written_outcome,
)
from gpuready.workflow.staging import Staging
from gpuready.yamlfile import load_mapping

NA = "N/A (docker)"
WHY_DOCKER = "opt-in"
BUILTIN = "runc"


class DockerFiles(NodeFiles):
    """The contract's files on a Docker machine: daemon.json instead of config.toml."""

    def kind_of(self, path: Path) -> FileKind:
        """daemon.json is a Docker config; the rest as for containerd."""
        return FileKind.DOCKER_CONFIG if path == self.config else super().kind_of(path)


def docker_files(options_node, toolkit_dir) -> DockerFiles:
    """The contract's paths on the node, with daemon.json as the config."""
    base = NodeFiles.on(options_node, toolkit_dir)
    return DockerFiles(node=base.node, config=options_node.path(DAEMON_JSON),
                       cdi_spec=base.cdi_spec, toolkit=base.toolkit)


def run_docker_setup(options: SetupOptions) -> SetupResult:
    """Plan every step in memory, then (unless a dry run) write them as one transaction."""
    files = docker_files(options.node, options.toolkit_dir)
    staging = Staging(node=options.node, kind_of=files.kind_of, dry_run=True,
                      preview=options.dry_run)
    result = SetupResult(plans=staging.plans)
    _register(options, files, staging, result)
    runtimes, default = _read_back(staging.read(files.config), files.config)
    name = options.request.name
    plan = staging.write(files.default_txt, default_txt(default), "default runtime")
    outcome = written_outcome(plan, dry_run=options.dry_run)
    result.steps.append(Step(4, "default runtime", plan.path, f"{default} ({outcome})"))
    plan = staging.write(files.parsed_txt, parsed_txt(runtimes), "parsed config")
    outcome = written_outcome(plan, dry_run=options.dry_run)
    result.steps.append(Step(5, "JSON validated", plan.path,
                             f"runtimes {', '.join(runtimes)} ({outcome})"))
    _write_cdi(options, files, staging, result)
    result.steps.append(Step(7, "RuntimeClass", files.runtimeclass,
                             "not written: does not apply (docker): GPU containers opt in with "
                             f"docker run --runtime {name}"))
    plan = staging.write(files.report_txt, report_txt(runtimes, name), "report")
    result.steps.append(Step(8, "verification report", plan.path,
                             written_outcome(plan, dry_run=options.dry_run)))
    result.checks = docker_checks(files, name, staging.read)
    if not options.dry_run:
        write_all(result.plans, node=options.node)
        result.checks = docker_checks(files, name, files.read)
    return result


def _register(options: SetupOptions, files: DockerFiles, staging: Staging,
              result: SetupResult) -> None:
    """Steps 1-3: keep (or create) daemon.json and add the runtime."""
    runtime = daemon_json.DockerRuntime(options.request.name, options.request.binary)

    def compute(current: str | None) -> Plan:
        config = daemon_json.parse_daemon_config(current, files.config)
        plan = chain(config, [lambda cfg: daemon_json.plan_add_runtime(cfg, runtime)])
        # the never-break gate configure --engine docker meets, for a dry run too
        EngineGuard(ENGINE, files.config, options.node.root, Intent(
            adds=runtime.name, confirmed=options.request.default_confirmed)).enforce([plan])
        return plan

    plan = staging.edit(files.config, compute)
    created = "would be created" if options.dry_run else "created"
    staged = "kept" if plan.before is not None else f"{created} as {{}} (dockerd's defaults)"
    result.steps.append(Step(1, "base config", files.config, staged))
    result.steps.append(Step(2, "runtime section", files.config,
                             planned_outcome(plan, dry_run=options.dry_run)))
    result.steps.append(Step(3, "runtime options", files.config,
                             f'path = "{runtime.path}", runtimeArgs = []; SystemdCgroup does not '
                             "apply (docker: dockerd's exec-opts native.cgroupdriver sets it)"))


def _read_back(text: str, path: Path) -> tuple[list[str], str]:
    """The runtimes dockerd will have (runc is built in) and its default runtime."""
    config = daemon_json.parse_daemon_config(text, path)
    runtimes = sorted({BUILTIN, *config.runtimes()})
    default = config.data.get("default-runtime", BUILTIN)
    return runtimes, default if isinstance(default, str) else f"INVALID: {default!r}"


def _write_cdi(options: SetupOptions, files: DockerFiles, staging: Staging,
               result: SetupResult) -> None:
    kept = staging.exists(files.cdi_spec)
    if not kept:
        placeholder = stage_new_cdi_spec(options.node, files.cdi_spec, staging, gpus=options.gpus)
    spec = load_mapping(staging.read(files.cdi_spec), files.cdi_spec)
    kind = spec.get("kind")
    outcome = "kept existing spec" + kind_outcome(kind) if kept else generated_outcome(
        placeholder, preview=options.dry_run, kind=kind)
    result.steps.append(Step(6, "CDI spec", files.cdi_spec,
                             outcome + " (Docker reads CDI specs from 25.0)"))
    staging.write(files.cdi_keys_txt, contract.cdi_keys_txt(spec), "CDI keys")


def default_txt(default: str) -> str:
    """``default.txt`` for Docker: dockerd's default runtime, and why it stays."""
    return f"DEFAULT={default}\nWHY={WHY_DOCKER}\n"


def parsed_txt(runtimes: list[str]) -> str:
    """``parsed.txt`` for Docker: no config version, the runtimes dockerd will have."""
    return f"VERSION={NA}\nRUNTIMES={','.join(runtimes)}\n"


def report_txt(runtimes: list[str], name: str) -> str:
    """``report.txt``: the contract's five keys; only RUNTIME has a meaning for Docker."""
    runtime = name if name in runtimes else f"INVALID: no runtime {name} in runtimes"
    return (f"CONFIG_VERSION={NA}\nRUNTIME={runtime}\nRUNTIME_TYPE={NA}\n"
            f"SYSTEMD_CGROUP={NA}\nHANDLER={NA}\n")


def docker_checks(files: DockerFiles, name: str, read: Callable[[Path], str]) -> list[Check]:
    """The contract's checks that apply to Docker, each file read through ``read``."""
    try:
        runtimes, default = _read_back(read(files.config), files.config)
    except MissingFileError:
        raise  # nothing to check: bad input (exit 2), the message says what writes it
    except InputError as error:
        return [Check("daemon.json parses", False, error.message(),
                      "fix the file at its line and column, or run 'gpuready setup --engine "
                      "docker'")]
    checks = [
        Check("daemon.json parses", True, f"{files.config}"),
        Check(f"runtime {name} registered", name in runtimes,
              f"runtimes: {', '.join(runtimes)}", "run 'gpuready configure --engine docker'"),
        Check("default runtime is runc", default == BUILTIN, f"default-runtime = {default!r}",
              "remove default-runtime: GPU containers opt in with --runtime"),
    ]
    checks += contract.cdi_checks(files, read)
    checks += [
        check_file_content("default.txt matches daemon.json", files.default_txt,
                           default_txt(default), read),
        check_file_content("parsed.txt matches daemon.json", files.parsed_txt,
                           parsed_txt(runtimes), read),
        check_file_content("report.txt matches the files", files.report_txt,
                           report_txt(runtimes, name), read),
    ]
    return checks
