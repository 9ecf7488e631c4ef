"""`harnesscheck swebench`: choose SWE-bench tasks and run an agent on them under two profiles."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

NAME = "swebench"
HELP = "choose SWE-bench tasks (local file/cache only) and run an agent under two profiles, interleaved"
TOY_TEXT = """\
--toy runs the shipped three-task toy set (its repository is built under RUN/repos/) with the kit's
own agent loop (`python -m harnesscheck.agents.toy_agent`, Responses API) unless --command is given, and the toy
tests unless --test-command is given. Default profiles: small=harnesscheck/small and
alias=harnesscheck/small-alias. Profiles without an @ENDPOINT are pointed at an embedded reference
server, started on a free loopback port serving their model ids (its scripted model fixes the toy
bugs) and stopped at the end, also on an error or Ctrl-C; profiles with an endpoint are used as given.
"""
RAY_TEXT = """\
--ray [ADDRESS] runs each (task, profile) as a Ray task (pip install 'harnesscheck[ray]'): on the
cluster at ADDRESS (host:6379, ray://host:10001, auto), or without one on RAY_ADDRESS, a cluster
started on this machine, or a new local Ray instance. Each run asks for --task-cpus and
--task-memory, is cancelled after --task-timeout, and is tried once more when its Ray task fails or
its worker dies, then recorded as failed. Runs already complete in RUN are not run again. Every
worker needs the kit, the agent, git and the repositories at --repos (docs/scale-out.md).
"""
DESCRIPTION = """\
Choose SWE-bench tasks and run an agent on each under two (or more) profiles, interleaved per task
(A,B then B,A ...), each in its own working copy at base_commit, with a time limit. Logs land in
RUN/PROFILE/TASK/ (rollouts, agent stdout/stderr, model.patch, task.json); with two profiles the
comparison table of `harnesscheck compare` is printed and written to RUN/comparison/.

Tasks come from a local JSONL/parquet in SWE-bench's column layout, or by dataset name from the local
Hugging Face cache (never downloaded). A profile is NAME=MODEL or NAME=MODEL@ENDPOINT.

{toy}
Examples:
  harnesscheck swebench select --dataset verified.parquet --sample 50 --seed 1 --out subset.jsonl
  harnesscheck swebench run --tasks subset.jsonl --repos ~/swe-repos --run-dir runs/r1 \\
      --profile gpt-5.5=gpt-5.5@http://127.0.0.1:8000/v1 \\
      --profile fallback=openai/openai/gpt-5.5@http://127.0.0.1:8000/v1
  harnesscheck swebench run --toy --run-dir /tmp/toy-run      # toy agent vs embedded server
  harnesscheck swebench run --toy --ids harnesscheck__toycalc-1 --run-dir /tmp/toy-run \\
      --profile a=my/model@http://127.0.0.1:8000/v1 --profile b=my/model-fp8@http://127.0.0.1:8000/v1

{ray}
Folders (--run-dir, --repos) may be relative: they are made absolute once, before any clone.
A run whose agent never started (its working copy could not be made, e.g. a missing base_commit;
the agent command missing) measured nothing: it is said on stderr and left out of the comparison
(its task unpaired), never counted as 0 tool calls.
Exit status: 0 done; 1 the profiles could not be compared (no task measured under both), or every run
failed before its agent could run (a clone, a missing agent: said on the last line); 2 a bad task file or option, or a profile's
endpoint unusable (checked first as `check` does, each probe up to --timeout, at most 60 s; nothing runs).
""".format(toy=TOY_TEXT, ray=RAY_TEXT)
ORDER = 71


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        "--tasks",
        dest="dataset",
        help="tasks: local .jsonl/.json/.parquet, or a dataset name in the local HF cache",
    )
    p.add_argument("--split", default="test", help="split when loading by dataset name (default test)")
    p.add_argument("--ids", nargs="+", metavar="ID", help="instance ids to take, in order")
    p.add_argument("--ids-file", help="file with one instance id a line")
    p.add_argument("--sample", type=int, help="seeded sample of N tasks stratified by repo")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    p.add_argument("--no-datasets", action="store_true", help="read the file directly, not with `datasets`")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sel = sub.add_parser("select", help="write a task subset (JSONL, the dataset's layout)")
    _add_selection(sel)
    sel.add_argument("--out", required=True, help="JSONL file to write")
    run = sub.add_parser(
        "run",
        help="run the agent on the tasks under each profile and compare",
        epilog=TOY_TEXT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_selection(run)
    run.add_argument("--run-dir", required=True, help="RUN folder: RUN/PROFILE/TASK/ is written")
    run.add_argument("--repos", help="folder of local repositories (owner__name, name or owner/name)")
    run.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="NAME=MODEL[@ENDPOINT]",
        help="a profile (give two to compare)",
    )
    run.add_argument(
        "--command",
        dest="agent_command",  # not `command`: that is the CLI's own (the subcommand's name)
        help="agent command template (default: codex exec --json ... -m {model} {problem_statement}; "
        "with --toy: python -m harnesscheck.agents.toy_agent exec --json -m {model} {problem_statement})",
    )
    run.add_argument(
        "--test-command",
        help="test command template run after the agent, e.g. "
        "'python -m pytest {fail_to_pass}'; sets resolved",
    )
    run.add_argument("--timeout", type=float, default=1800.0, help="seconds per agent run (default 1800)")
    run.add_argument(
        "--no-interleave", action="store_true", help="run profiles in the given order every task"
    )
    run.add_argument("--keep-workdirs", action="store_true", help="keep the working copies")
    run.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run on a Ray cluster (ADDRESS, or RAY_ADDRESS / a local instance when omitted); resumable",
    )
    run.add_argument(
        "--task-cpus", type=float, default=1.0, metavar="N", help="with --ray: CPUs per run (default 1)"
    )
    run.add_argument(
        "--task-memory", type=float, default=2.0, metavar="GB", help="with --ray: memory per run (default 2)"
    )
    run.add_argument(
        "--task-timeout",
        type=float,
        metavar="SECONDS",
        help="with --ray: seconds before a run's Ray task is cancelled and counts as failed (default: "
        "--timeout, twice that with a test command, plus 300)",
    )
    run.add_argument(
        "--toy",
        action="store_true",
        help="use the shipped toy task set, build its repository, use the toy agent loop, and start an "
        "embedded reference server for the profiles without an endpoint",
    )


def _parse_profile(text: str):
    from harnesscheck.agents.driver import Profile

    if "=" not in text:
        raise ValueError(f"profile {text!r} is not NAME=MODEL[@ENDPOINT]")
    name, rest = text.split("=", 1)
    model, _, endpoint = rest.partition("@")
    if not name or not model:
        raise ValueError(f"profile {text!r} is not NAME=MODEL[@ENDPOINT]")
    return Profile(name=name, model=model, endpoint=endpoint or None)


def _select(args: argparse.Namespace, default_source: Path | None, err) -> list:
    from harnesscheck.agents.swebench import load_tasks, select_tasks

    source = args.dataset or default_source
    if source is None:
        raise ValueError("give --dataset/--tasks (or --toy)")
    ts = load_tasks(source, split=args.split, use_datasets=False if args.no_datasets else None)
    for note in ts.notes:
        err.print(f"note: {note}", highlight=False)
    ids = list(args.ids or [])
    if args.ids_file:
        from harnesscheck.protocol.wire.files import read_text

        ids += [line.strip() for line in read_text(args.ids_file).splitlines() if line.strip()]
    return select_tasks(ts.tasks, instance_ids=ids or None, sample=args.sample, seed=args.seed)


#: timing flags of the embedded server of `--toy`: no modelled delays (the toy run counts calls and
#: tokens; its durations say nothing about a real endpoint)
TOY_SERVER_FLAGS = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from harnesscheck.errors import UsageError
    from harnesscheck.agents.driver import DEFAULT_COMMAND, TOY_AGENT_COMMAND, Profile, validate_run
    from harnesscheck.agents.swebench import TOY_TASKS, TaskFileError, build_toy_repo, write_tasks_jsonl

    err = Console(stderr=True)
    out = Console()
    if args.action is None:
        err.print("give an action: select or run (see --help)")
        return 2
    toy = getattr(args, "toy", False)
    try:
        tasks = _select(args, TOY_TASKS if toy else None, err)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:  # one line, whatever the file held
        from harnesscheck.cli.failures import error_line

        err.print(f"error: {error_line(exc)}", markup=False, highlight=False, soft_wrap=True)
        return 2
    if args.action == "select":
        write_tasks_jsonl(tasks, args.out)
        out.print(f"wrote {len(tasks)} tasks to {args.out}", highlight=False)
        return 0

    run_dir = Path(args.run_dir)
    try:
        profiles = [_parse_profile(p) for p in args.profile]
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    command: str | Sequence[str] = args.agent_command or DEFAULT_COMMAND
    test_command: str | list[str] | None = args.test_command
    repos = Path(args.repos) if args.repos else None
    if toy:
        if not profiles:
            profiles = [Profile("small", "harnesscheck/small"), Profile("alias", "harnesscheck/small-alias")]
        if repos is None:
            repos = run_dir / "repos"
        if not args.agent_command:
            command = TOY_AGENT_COMMAND
        if test_command is None:
            test_command = [sys.executable, "-S", "-m", "unittest", "-q", "{fail_to_pass}", "{pass_to_pass}"]
    if repos is None:
        err.print("[red]error:[/red] give --repos (folder of local repositories)")
        return 2
    if not profiles:
        err.print("[red]error:[/red] give at least one --profile NAME=MODEL[@ENDPOINT]")
        return 2
    try:
        validate_run(tasks, profiles, run_dir)
    except TaskFileError as exc:
        raise UsageError(str(exc)) from exc
    if args.ray is not None:
        from harnesscheck.replay.cluster import RayUnavailable, import_ray

        try:
            import_ray()
        except RayUnavailable as exc:
            raise UsageError(str(exc)) from exc
    _check_endpoints(profiles, args.timeout)
    if toy and not args.repos and not (repos / "harnesscheck__toycalc").exists():
        build_toy_repo(repos / "harnesscheck__toycalc")
    try:
        with ExitStack() as stack:  # stops the embedded server on the way out, whatever happened
            if toy and any(p.endpoint is None for p in profiles):
                try:
                    profiles = _with_embedded_server(stack, profiles, err)
                except RuntimeError as exc:  # it did not start
                    err.print(f"error: {exc}", markup=False, highlight=False)
                    return 2
            return _run_and_compare(args, tasks, profiles, run_dir, repos, command, test_command, out, err)
    except KeyboardInterrupt:
        err.print("[red]interrupted[/red]")
        return 130


def _check_endpoints(profiles: list, timeout: float) -> None:
    """Each endpoint a profile names, checked first as `check` does (conformance/preflight.py: it answers
    as an LLM API, takes the key, serves the profiles' models): unusable is one line and exit 2 before
    any task runs. A profile's endpoint is an OpenAI base URL (…/v1); preflight takes the server's."""
    import os

    from harnesscheck.protocol import apis
    from harnesscheck.conformance.preflight import probe_timeout, require_usable, say

    openai = [name for name in apis.NAMES if apis.get(name).SDK == "openai"]  # an OpenAI base URL's APIs

    by_endpoint: dict[str, list[str]] = {}
    for p in profiles:
        if p.endpoint:
            base = p.endpoint.rstrip("/").removesuffix("/v1")
            by_endpoint.setdefault(base, []).append(p.model)
    key = os.environ.get("HARNESSCHECK_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
    for base, models in by_endpoint.items():
        require_usable(base, api_key=key, model=tuple(dict.fromkeys(models)), apis=openai,
                       timeout=probe_timeout(timeout), progress=say)


def _with_embedded_server(stack: ExitStack, profiles: list, err) -> list:
    """Start the reference server (stopped when ``stack`` closes) serving the model ids of the
    profiles without an endpoint, and point those profiles at it."""
    from dataclasses import replace

    from harnesscheck.reference_server.launch import ServerProcess

    models = list(dict.fromkeys(p.model for p in profiles if p.endpoint is None))
    flags = [*TOY_SERVER_FLAGS, *(x for m in models for x in ("--model-id", m))]
    server = ServerProcess(flags)
    stack.callback(server.stop)  # also when start() is interrupted half way
    endpoint = server.start().url + "/v1"
    err.print(f"reference server at {endpoint} serving {', '.join(models)}", highlight=False, soft_wrap=True)
    return [p if p.endpoint else replace(p, endpoint=endpoint) for p in profiles]


def _run_and_compare(args, tasks, profiles, run_dir, repos, command, test_command, out, err) -> int:
    from harnesscheck.agents.driver import run_profiles
    from harnesscheck.agents.rollouts import never_started

    def show(r) -> None:
        state = "timed out" if r.timed_out else r.error or f"exit {r.returncode}"
        res = "" if r.resolved is None else (" resolved" if r.resolved else " unresolved")
        err.print(
            f"{r.task_id} [{r.profile}] {state}{res}, {r.duration_s:.1f}s, {len(r.rollout_files)} rollout(s)",
            highlight=False,
            markup=False,
        )

    common = dict(
        run_dir=run_dir,
        repos=repos,
        command=command,
        timeout_s=args.timeout,
        test_command=test_command,
        interleave=not args.no_interleave,
        keep_workdirs=args.keep_workdirs,
        on_result=show,
    )
    try:
        if args.ray is None:
            runs = run_profiles(tasks, profiles, **common)
        else:
            from harnesscheck.agents.distributed import is_failed

            runs = _run_on_ray(args, tasks, profiles, common, err)
            failed = [r for r in runs if is_failed(r)]
            if failed:
                err.print(
                    f"{len(failed)} run(s) failed on every attempt (see their task.json): "
                    + ", ".join(f"{r.task_id} [{r.profile}]" for r in failed),
                    highlight=False,
                    markup=False,
                )
    except (OSError, ValueError, KeyError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    if runs and all(r.error for r in runs):  # no agent ran: nothing to compare (not 0 calls against 0)
        err.print(f"error: every run failed before its agent could run ({len(runs)} runs), e.g. "
                  f"{runs[0].task_id} [{runs[0].profile}]: {runs[0].error}", highlight=False, markup=False,
                  soft_wrap=True)
        return 1
    never = [r for r in runs or () if never_started({"error": r.error, "returncode": r.returncode,
                                                 "timed_out": r.timed_out})]
    if never:  # nothing measured: unpaired in the comparison, never 0 calls against 0
        err.print(f"{len(never)} run(s) never started, left out of the comparison: "
                  + "; ".join(f"{r.task_id} [{r.profile}]: {r.error}" for r in never[:3])
                  + (" ..." if len(never) > 3 else ""), highlight=False, markup=False, soft_wrap=True)
    if len(profiles) == 2:
        from harnesscheck.agents.counts import compare_sources
        from harnesscheck.stats.compare import write_outputs

        try:
            comp = compare_sources(
                run_dir / profiles[0].name,
                run_dir / profiles[1].name,
                label_a=profiles[0].name,
                label_b=profiles[1].name,
            )
        except (ValueError, OSError) as exc:
            why = f" ({len(never)} run(s) never started)" if never else ""
            err.print(f"no comparison: {exc}{why}", highlight=False, markup=False, soft_wrap=True)
            return 1
        out.print(comp.rich_table())
        for line in comp.summary_lines():
            out.print(line, highlight=False, soft_wrap=True)
        paths = write_outputs(comp, run_dir / "comparison")
        err.print("wrote " + ", ".join(str(p) for p in paths.values()), highlight=False, soft_wrap=True)
    return 0


def _run_on_ray(args, tasks, profiles, common, err) -> list:
    """The runs on Ray (``harnesscheck.agents.distributed``), progress per profile on stderr."""
    from harnesscheck.errors import UsageError
    from harnesscheck.agents.distributed import RayOptions, run_profiles_on_ray
    from harnesscheck.replay.cluster import ray_session

    options = RayOptions(
        address=args.ray or None,
        num_cpus=args.task_cpus,
        memory_mb=int(args.task_memory * 1024),
        task_timeout_s=args.task_timeout,
    )
    with ExitStack() as stack:
        try:
            stack.enter_context(ray_session(options.address))
        except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster at that address
            where = args.ray or "the default address"
            raise UsageError(f"could not connect to Ray at {where}: {exc}") from exc
        return run_profiles_on_ray(tasks, profiles, ray_options=options, console=err, **common)
