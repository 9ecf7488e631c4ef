"""`harnesscheck bench overlap | fidelity | server` with small sizes: the overlap bench reproduces
the article's model within its intervals; the fidelity bench's ground-truth server logs its own
times and the kit's client is measured against them; the server bench reads the server's CPU
time. Every output validates as a results document and has its plot."""

from __future__ import annotations

from harnesscheck.cli import main
from reports.schema import load_results


def _bench(doc: dict, name: str) -> dict:
    return next(b for b in doc["benchmarks"] if b["name"] == name)


def test_overlap_measured_agrees_with_the_model(tmp_path, capsys):
    # decode 3 ms/token: interleaved (r0 t0 r1 t1) completes call 0 at ~200 ms and ends at ~470 ms,
    # so a 150 ms tool started at call 0 finishes long before the stream ends
    rc = main(["bench", "overlap", "--sessions", "4", "--apis", "anthropic", "--scenarios", "interleaved",
               "--decode-ms", "3", "--tool-ms", "150,150", "--out", str(tmp_path)])
    assert rc == 0
    assert "saving per turn" in capsys.readouterr().out
    doc = load_results(tmp_path / "bench-overlap.json")
    assert (tmp_path / "bench-overlap.png").read_bytes()[:4] == b"\x89PNG"
    bench = _bench(doc, "overlap-interleaved-anthropic")
    assert bench["timing"] == "scripted-model" and doc["run"]["server"]["engine"] == "scripted"
    arms = {a["name"]: a for a in bench["arms"]}
    agreement = bench["settings"]["agreement"]
    for arm in ("after-stream", "streaming"):
        assert agreement[arm]["agree"], (arm, agreement, arms)
        assert abs(agreement[arm]["diff_ms"]) < 0.05 * arms[f"model {arm}"]["median"]
    # after-stream = E + 150 + 150; streaming hides tool 0 inside the generation: E + 150
    end = arms["stream end"]["median"]
    assert arms["after-stream"]["median"] > end + 280
    assert arms["streaming"]["median"] < end + 190
    speedup = next(r for r in bench["ratios"] if r["name"] == "after-stream/streaming")
    assert speedup["ci95"][0] > 1.1
