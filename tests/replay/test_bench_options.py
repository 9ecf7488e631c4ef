"""The benchmarks' options: one base (`replay.benchmarks.common.BenchOptions`) that the five
endpoint-or-embedded benchmarks extend, keyword-only, and built by `harnesscheck bench NAME` with the
classes' own defaults (the CLI's flags and the dataclasses keep their defaults in two places: this
test holds them together). No server is started."""

from __future__ import annotations

import argparse
import dataclasses
import importlib

import pytest

from harnesscheck.cli.commands import bench
from harnesscheck.replay.benchmarks.common import BenchOptions, RoundsOptions

BENCHES = {"preamble": "PreambleOptions", "dispatch": "DispatchOptions", "history": "HistoryOptions",
           "overlap": "OverlapOptions", "mixed": "MixedOptions"}


def _built(name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> BenchOptions:
    """The options `harnesscheck bench NAME ARGV` hands its benchmark (which is not run)."""
    module = importlib.import_module(f"harnesscheck.replay.benchmarks.{name}")
    seen: list[BenchOptions] = []
    monkeypatch.setattr(module, f"run_{name}", lambda opts: seen.append(opts) or {"benchmarks": []})
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    bench._measure(parser.parse_args([name, *argv]), "KEY", lambda text: None)
    (opts,) = seen
    return opts


@pytest.mark.parametrize("name", BENCHES)
def test_the_cli_builds_each_benchmark_s_options_with_the_class_defaults(name, monkeypatch):
    cls = getattr(importlib.import_module(f"harnesscheck.replay.benchmarks.{name}"), BENCHES[name])
    opts = _built(name, [], monkeypatch)
    assert type(opts) is cls and isinstance(opts, BenchOptions)
    assert opts == cls(api_key="KEY")


@pytest.mark.parametrize("name", BENCHES)
def test_the_shared_flags_reach_the_base_fields(name, monkeypatch):
    argv = ["--endpoint", "http://127.0.0.1:9/", "--model", "m", "--ttft-base-ms", "3", "--decode-ms", "0.5",
            "--server-arg=--block-size=32", "--server-arg=--seed=1"]
    opts = _built(name, argv, monkeypatch)
    assert (opts.endpoint, opts.model, opts.api_key) == ("http://127.0.0.1:9/", "m", "KEY")
    assert (opts.ttft_base_ms, opts.decode_ms) == (3.0, 0.5)
    assert opts.server_args == ["--block-size=32", "--seed=1"]


@pytest.mark.parametrize("name", BENCHES)
def test_options_are_keyword_only(name):
    cls = getattr(importlib.import_module(f"harnesscheck.replay.benchmarks.{name}"), BENCHES[name])
    with pytest.raises(TypeError):
        cls("http://127.0.0.1:9")


def test_the_timing_model_is_recorded_only_where_the_embedded_server_follows_it():
    opts = BenchOptions(ttft_base_ms=1.0, prefill_us_per_token=2.0, decode_ms=3.0)
    assert opts.timing_model({"timing": "scripted-model"}) == {"ttft_base_ms": 1.0, "prefill_us_per_token": 2.0,
                                                               "decode_ms": 3.0}
    assert opts.timing_model({"timing": "real-compute"}) is None  # a transformers engine ignores it
    assert dataclasses.replace(opts, endpoint="http://h").timing_model({"timing": "scripted-model"}) is None
    assert opts.timing_args() == ["--ttft-base-ms", "1", "--prefill-us-per-token", "2", "--decode-ms", "3"]


def test_rounds_rotate_the_arms_and_discard_the_warm_up_rounds():
    opts = RoundsOptions(sessions=3, warmup=1)
    assert list(opts.rounds(("a", "b"))) == [(False, ["a", "b"]), (True, ["b", "a"]), (True, ["a", "b"]),
                                             (True, ["b", "a"])]
    assert [order for _, order in RoundsOptions(sessions=2, warmup=0).rounds(["x", "y", "z"])] == [
        ["x", "y", "z"], ["y", "z", "x"]]
