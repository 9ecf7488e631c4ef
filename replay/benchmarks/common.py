"""What every `harnesscheck bench` shares: the options every benchmark against an endpoint or its own
embedded reference servers takes (`BenchOptions`) and where its requests go (`target`), arm and ratio
summaries with bootstrap intervals, the results document (schema ``harnesscheck.results`` 1.0), the
printed table, the PNG plot, request headers, the embedded servers and a deterministic filler text of a
given token length."""

from __future__ import annotations

import base64
import contextlib
import json
import random
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from harnesscheck.errors import Interrupted
from harnesscheck.protocol import apis
from harnesscheck.protocol.apis.base import ANTHROPIC_VERSION

PATHS: Mapping[str, str] = apis.Table(lambda api: api.PATH)  # each API's route (protocol/apis), read when looked up
RESAMPLES = 4000
T = TypeVar("T")


@dataclass(kw_only=True)
class BenchOptions:
    """What every benchmark that measures ``endpoint``, or with none its own embedded reference servers,
    takes (keyword-only; a benchmark's options class adds its own fields and may change a default)."""

    endpoint: str | None = None  # None: embedded reference servers
    model: str | None = None  # default: the endpoint's first model (embedded: the server's default id)
    api_key: str | None = None
    # The embedded servers' timing model (a real-compute engine ignores it): a fixed cost before the
    # first token, a cost per uncached prompt token, the interval between output tokens.
    ttft_base_ms: float = 10.0
    prefill_us_per_token: float = 100.0
    decode_ms: float = 5.0
    server_args: list[str] = field(default_factory=list)  # extra arguments for every embedded server
    startup_timeout: float = 60.0  # seconds each embedded server may take to answer (real compute: loading)

    def timing_args(self) -> list[str]:
        """The timing model as reference-server arguments."""
        return timing_args(self.ttft_base_ms, self.prefill_us_per_token, self.decode_ms)

    def timing_model(self, server: dict[str, Any]) -> dict[str, float] | None:
        """The timing model for a results document's settings: only when the benchmark ran on embedded
        servers that follow it (``server["timing"]`` is ``scripted-model``), else None."""
        if self.endpoint or server.get("timing") != "scripted-model":
            return None
        return {"ttft_base_ms": self.ttft_base_ms, "prefill_us_per_token": self.prefill_us_per_token,
                "decode_ms": self.decode_ms}


@dataclass(kw_only=True)
class RoundsOptions(BenchOptions):
    """A benchmark that measures its arms in rounds: every arm once a round, in an order rotated each
    round (no arm always goes first), the first ``warmup`` rounds discarded."""

    sessions: int = 8  # rounds measured: samples per arm
    warmup: int = 1  # rounds run first and discarded

    def rounds(self, arms: Sequence[T]) -> Iterator[tuple[bool, list[T]]]:
        """Each round: whether it is measured, and the arms in its order."""
        for n in range(self.warmup + self.sessions):
            k = n % len(arms)
            yield n >= self.warmup, [*arms[k:], *arms[:k]]


@dataclass
class Target:
    """Where a benchmark's requests go: the endpoint (one URL), or one embedded server per mode."""

    urls: list[str]
    model: str
    embedded: bool
    args: list[list[str]]  # each embedded server's arguments (none for an endpoint)
    api_key: str | None = None

    @property
    def endpoint(self) -> str:
        """The results document's ``run.endpoint``: the URL, or ``embedded``."""
        return "embedded" if self.embedded else self.urls[0]

    def server_info(self) -> dict[str, Any]:
        """The (first) server's description for the results document (``wire.server_info``)."""
        from harnesscheck.protocol.wire.server_info import server_info

        if self.embedded:
            return server_info(self.urls[0], self.model, kind="embedded")
        return server_info(self.urls[0], self.model, kind="external", api_key=self.api_key)

    def document(self, benchmarks: list[dict[str, Any]], *, apis: list[str], server: dict[str, Any],
                 settings: dict[str, Any], started_at: str) -> dict[str, Any]:
        """The run's results document (`results_document`), its endpoint and model this target's."""
        return results_document(benchmarks=benchmarks, endpoint=self.endpoint, model=self.model, apis=apis,
                                server=server, settings=settings, started_at=started_at)


@contextlib.contextmanager
def target(opts: BenchOptions, *modes: Sequence[str]) -> Iterator[Target]:
    """``opts.endpoint`` with ``--model`` or its first model; with no endpoint, one embedded reference
    server per argument list in ``modes`` (one server when none is given), each started with the mode's
    arguments, the timing model and ``opts.server_args``, all stopped at the end."""
    if opts.endpoint:
        url = opts.endpoint.rstrip("/")
        yield Target([url], resolve_model(url, opts.model, opts.api_key), False, [], opts.api_key)
        return
    from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS

    arg_lists = [[*mode, *opts.timing_args(), *opts.server_args] for mode in (modes or ((),))]
    with embedded_servers(*arg_lists, startup_timeout=opts.startup_timeout) as servers:
        yield Target([s.url for s in servers], opts.model or DEFAULT_MODEL_IDS[0], True, arg_lists)


def first_request(api: str, scenario_id: str, model: str) -> dict[str, Any]:
    """The first-turn request body of a scenario in an API (``protocol.apis``' ``first``)."""
    from harnesscheck.scenarios.loader import get

    return apis.get(api).first(get(scenario_id), model)


def _round(x: float) -> float:
    return round(float(x), 3)


def arm(name: str, samples_ms: Sequence[float], *, seed: int = 0) -> dict[str, Any]:
    """``{name, samples, median, p90, ci95}``: ci95 is the bootstrap interval of the median."""
    from harnesscheck.stats.bootstrap import bootstrap_ci

    xs = [float(x) for x in samples_ms]
    out: dict[str, Any] = {"name": name, "samples": [_round(x) for x in xs], "median": None, "p90": None}
    if xs:
        out["median"] = _round(np.median(xs))
        out["p90"] = _round(np.percentile(xs, 90))
        if len(xs) >= 2:
            ci = bootstrap_ci(xs, np.median, resamples=RESAMPLES, seed=seed)
            out["ci95"] = [_round(ci.low), _round(ci.high)]
    return out


def ratio(name: str, numerator: dict[str, Any], denominator: dict[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """median(numerator) / median(denominator) with a bootstrap interval (two independent samples)."""
    from harnesscheck.stats.bootstrap import ratio_ci

    out: dict[str, Any] = {"name": name, "numerator": numerator["name"], "denominator": denominator["name"],
                           "value": None}
    a, b = numerator["samples"], denominator["samples"]
    if a and b and float(np.median(b)) > 0:
        ci = ratio_ci(a, b, statistic=np.median, resamples=RESAMPLES, seed=seed)
        out["value"] = round(ci.estimate, 4)
        out["ci95"] = [round(ci.low, 4), round(ci.high, 4)]
    return out


def ratio_at(name: str, numerator: dict[str, Any], denominator: dict[str, Any], q: float, *,
             seed: int = 0) -> dict[str, Any]:
    """As :func:`ratio`, of the ``q``-th percentiles (``q=50``: the medians; ``q=99``: the p99s)."""
    from harnesscheck.stats.bootstrap import ratio_ci

    out: dict[str, Any] = {"name": name, "numerator": numerator["name"], "denominator": denominator["name"],
                           "value": None}
    a, b = numerator["samples"], denominator["samples"]
    if a and b and float(np.percentile(b, q)) != 0:
        ci = ratio_ci(a, b, statistic=lambda x, axis=None: np.percentile(x, q, axis=axis), resamples=RESAMPLES, seed=seed)
        out["value"] = round(ci.estimate, 4)
        out["ci95"] = [round(ci.low, 4), round(ci.high, 4)]
    return out


def run_stoppable(coro: Coroutine[Any, Any, T]) -> tuple[T, Interrupted | None]:
    """``run_async(coro)`` and None; when a stop (SIGINT/SIGTERM) came after the coroutine had finished
    something (it caught the cancellation and returned that: ``Interrupted.measured``), that and the
    stop, so the benchmark builds its document from what finished and ends with ``stopped(doc, stop)``.
    A stop before anything finished is raised as it came."""
    from harnesscheck.replay.client import run_async

    try:
        return run_async(coro), None
    except Interrupted as stop:
        if not stop.measured:
            raise
        return stop.measured, stop  # type: ignore[return-value]


def stopped(doc: dict[str, Any], stop: Interrupted | None) -> dict[str, Any]:
    """The document, or, after a stop, ``Interrupted`` carrying it marked ``run.interrupted`` (what was
    measured until the stop), for the command to write before it exits 130."""
    if stop is None:
        return doc
    doc["run"]["interrupted"] = True
    raise Interrupted(str(stop), measured=doc)


def results_document(*, benchmarks: list[dict[str, Any]], endpoint: str, model: str, apis: list[str],
                     server: dict[str, Any], settings: dict[str, Any], started_at: str) -> dict[str, Any]:
    """A benchmark's results document: no checks, its benchmarks, a run that finished now."""
    from harnesscheck.reports import schema

    run = schema.run_header(endpoint=endpoint, model=model, apis=apis, server=server, settings=settings,
                            started_at=started_at, finished_at=schema.now_iso())
    return schema.results_document(run, [], benchmarks=benchmarks)


def benchmark(name: str, title: str, *, timing: str, settings: dict[str, Any], arms: list[dict[str, Any]],
              ratios: list[dict[str, Any]], unit: str = "ms", better: str = "lower") -> dict[str, Any]:
    """One entry of a results document's ``benchmarks`` (docs/results-schema.md)."""
    return {"name": name, "title": title, "unit": unit, "timing": timing, "better": better,
            "settings": settings, "arms": arms, "ratios": ratios}


def one_benchmark_document(opts: BenchOptions, target: Target, server: dict[str, Any], *, name: str,
                           title: str, api: str, settings: dict[str, Any], arms: list[dict[str, Any]],
                           ratios: list[dict[str, Any]], started_at: str) -> dict[str, Any]:
    """The document of a run of one benchmark (ms, lower is better) over one API whose settings are the
    run's too, with the timing model where the embedded servers follow it."""
    if timing_model := opts.timing_model(server):
        settings = {**settings, "timing_model": timing_model}
    bench = benchmark(name, title, timing=server["timing"], settings=settings, arms=arms, ratios=ratios)
    return target.document([bench], apis=[api], server=server, settings=settings, started_at=started_at)


def write_outputs(doc: dict[str, Any], out: Path, stem: str) -> list[Path]:
    """Validate and write OUT/<stem>.json plus one PNG per benchmark (OUT/<stem>[-n].png), titled
    with the benchmark's title."""
    from harnesscheck.reports.plots import arms_plot
    from harnesscheck.reports.schema import validate_results

    validate_results(doc)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stem}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    written = [path]
    for n, bench in enumerate(doc["benchmarks"]):
        uri = arms_plot(bench, title=f"{stem}: {bench.get('title') or bench['name']}")
        if not uri:
            continue
        name = bench["name"].removeprefix(stem.removeprefix("bench-") + "-")
        png = out / (f"{stem}.png" if len(doc["benchmarks"]) == 1 else f"{stem}-{name}.png")
        png.write_bytes(base64.b64decode(uri.split(",", 1)[1]))
        written.append(png)
    return written


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.1f}"


def format_table(bench: dict[str, Any]) -> str:
    unit = bench.get("unit", "ms")
    lines = [f"{bench.get('title') or bench['name']}  [{bench.get('timing', 'unknown')}]"]
    width = max([len(a["name"]) for a in bench["arms"]] + [4])
    lines.append(f"  {'arm':<{width}}  {'n':>3}  {'median':>9}  {'p90':>9}  95% CI ({unit})")
    for a in bench["arms"]:
        ci = a.get("ci95")
        cis = f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "-"
        lines.append(f"  {a['name']:<{width}}  {len(a['samples']):>3}  {_fmt(a['median']):>9}  {_fmt(a['p90']):>9}  {cis}")
    for r in bench.get("ratios", []):
        ci = r.get("ci95")
        v = "-" if r["value"] is None else f"{r['value']:.3f}"
        cis = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"
        lines.append(f"  ratio {r['name']}: {v}  95% CI {cis}")
    return "\n".join(lines)


def headers(api_key: str | None) -> dict[str, str]:
    h = {"anthropic-version": ANTHROPIC_VERSION}
    if api_key:
        h["authorization"] = f"Bearer {api_key}"
        h["x-api-key"] = api_key
    return h


def resolve_model(endpoint: str, model: str | None, api_key: str | None) -> str:
    """--model, else the first id of the endpoint's /v1/models."""
    if model:
        return model
    import httpx

    r = httpx.get(endpoint.rstrip("/") + "/v1/models", headers=headers(api_key), timeout=30)
    r.raise_for_status()
    data = r.json().get("data") or []
    if not data:
        raise RuntimeError(f"{endpoint}/v1/models lists no model; pass --model")
    return str(data[0]["id"])


def timing_args(base_ms: float, prefill_us: float, decode_ms: float) -> list[str]:
    return ["--ttft-base-ms", f"{base_ms:g}", "--prefill-us-per-token", f"{prefill_us:g}", "--decode-ms", f"{decode_ms:g}"]


@contextlib.contextmanager
def embedded_servers(*arg_lists: Sequence[str], startup_timeout: float = 60.0) -> Iterator[list[Any]]:
    """Start one reference server per argument list, all at once (a real-compute engine spends seconds
    importing torch and loading weights: in parallel they cost the slowest start, not the sum), stop them
    all at the end, and on any failure to start."""
    from concurrent.futures import ThreadPoolExecutor

    from harnesscheck.reference_server.launch import ServerProcess

    servers = [ServerProcess(list(args), startup_timeout=startup_timeout) for args in arg_lists]
    pool = ThreadPoolExecutor(max_workers=max(1, len(servers)), thread_name_prefix="hc-server-start")
    try:
        for future in [pool.submit(s.start) for s in servers]:
            future.result()
        yield servers
    finally:
        for s in servers:  # stopping one that is still starting ends its start too (its output ends)
            s.stop()
        pool.shutdown(wait=True)
        for s in servers:  # one whose process began only after the first pass
            s.stop()


_WORDS = ("build", "test", "file", "path", "module", "return", "value", "error", "check", "agent", "tool", "session",
          "cache", "prefix", "token", "stream", "server", "client", "model", "result", "always", "never", "before",
          "after", "the", "a", "of", "and", "when", "with")


def filler_text(tokens: int, *, seed: int = 0) -> str:
    """Deterministic prose of about ``tokens`` tokens of the reference tokenizer (numbered rules,
    so no long repeats). Other tokenizers land within a small factor."""
    from harnesscheck.reference_server.tokenizer import load

    tok = load()
    rng = random.Random(seed)
    parts: list[str] = []
    count = 0
    n = 0
    while count < tokens:
        chunk = []
        for _ in range(64):
            n += 1
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 12)))
            chunk.append(f"Rule {n}: {words}.")
        parts.append("\n".join(chunk))
        count = tok.count("\n".join(parts))
    text = "\n".join(parts)
    ids = tok.encode(text)
    return tok.decode(ids[:tokens]) if len(ids) > tokens else text
