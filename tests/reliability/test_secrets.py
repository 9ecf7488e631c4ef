"""Secrets: a planted API key (and a cookie, and a Bearer token) never reaches any file the kit
writes (results, transcripts, report, capture, trace, replay results) nor the capture proxy's
output, in plain text or base64; the server's --api-key check is constant-time.

One flow, as a user runs it: `harnesscheck check` against a keyed server with a fault (so a check
fails and its transcripts are written), `harnesscheck report`, `harnesscheck capture` with real
requests through it, `harnesscheck replay` of the trace; then every file is searched.
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest

from harnesscheck.reference_server.launch import ServerProcess

FAST = ["--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0"]
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
HC = [sys.executable, "-m", "harnesscheck"]


def forms(secret: str) -> list[bytes]:
    """The secret as it could land in a file: plain, base64 (alone and as user:secret), URL-quoted,
    JSON-escaped, and the long middle part (a truncated copy)."""
    raw = secret.encode()
    out = {raw, base64.b64encode(raw), base64.urlsafe_b64encode(raw), base64.b64encode(b"user:" + raw),
           urllib.parse.quote(secret).encode(), json.dumps(secret)[1:-1].encode(), raw[4:-4]}
    # base64 of the secret at each of the 3 alignments inside a longer blob
    for pad in (b"", b"x", b"xx"):
        b = base64.b64encode(pad + raw)[len(pad) * 4 // 3 + 2: -4]
        if len(b) > 12:
            out.add(b)
    return sorted(out)


def scan(paths: list[Path], planted: dict[str, str]) -> tuple[int, list[str]]:
    leaks, files = [], 0
    for root in paths:
        for f in ([root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())):
            files += 1
            data = f.read_bytes()
            for name, secret in planted.items():
                for form in forms(secret):
                    if form in data:
                        leaks.append(f"{f}: {name} ({form[:12]!r}...)")
    return files, leaks


def test_planted_key_never_written(tmp_path: Path) -> None:
    key = "sk-hc-PLANTED-" + secrets.token_hex(16)
    cookie = "hcsession-" + secrets.token_hex(16)
    bearer = "tok-hc-BEARER-" + secrets.token_hex(16)  # a second credential, sent by hand
    planted = {"api key": key, "cookie": cookie, "bearer": bearer}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("HARNESSCHECK_API_KEY", None)
    # The suite's pytest child with the conformance plugin only (the auto-loaded ones cost ~2 s).
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTEST_PLUGINS="harnesscheck.conformance.plugin")
    out, cap_dir, rep_dir = tmp_path / "check", tmp_path / "capture", tmp_path / "replay"
    cap_dir.mkdir()
    logs: list[bytes] = []

    with ServerProcess([*FAST, "--api-key", key, "--fault", "an-block-index-skip"]) as server:
        # 1. check (a failing check: transcripts are written), 2. report
        run = subprocess.run([*HC, "check", "--endpoint", server.url, "--api-key", key, "--out", str(out),
                              "--apis", "anthropic,chat", "--tries", "1", "-k",
                              "AN-STREAM-001 or AN-STREAM-002 or CH-STREAM-005 or AN-ERR-001"],
                             capture_output=True, env=env, timeout=240)
        logs += [run.stdout, run.stderr]
        assert run.returncode == 1, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
        doc = json.loads((out / "results.json").read_text())
        outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
        assert outcomes["AN-STREAM-002"] == "fail" and outcomes["AN-STREAM-001"] == "pass", outcomes  # authenticated
        assert any((out / "transcripts").rglob("*")), "no transcripts written"
        rep = subprocess.run([*HC, "report", str(out / "results.json"), "--out", str(out / "report.html"), "-q"],
                             capture_output=True, env=env, timeout=120)
        logs += [rep.stdout, rep.stderr]
        assert rep.returncode == 0 and (out / "report.html").stat().st_size > 1000, rep.stderr[-2000:]

        # 3. capture: real requests with the key, a Bearer, a cookie, and the key echoed in a body
        capture, trace = cap_dir / "c.capture.jsonl", cap_dir / "c.trace.json"
        proxy = subprocess.Popen([*HC, "capture", "--upstream", server.url, "--listen", "0", "--out", str(capture),
                                  "--trace", str(trace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            assert proxy.stdout is not None
            first = proxy.stdout.readline().decode()
            logs.append(first.encode())
            url = re.search(r"listening on (http://\S+)", first).group(1)  # type: ignore[union-attr]
            with httpx.Client(base_url=url, timeout=60) as http:
                an = {"model": NEMOTRON, "max_tokens": 64, "stream": True,
                      "messages": [{"role": "user", "content": "use the calculator tool with `1+1`"}],
                      "tools": [{"name": "calculator", "input_schema": {"type": "object", "properties": {
                          "expression": {"type": "string"}}, "required": ["expression"]}}]}
                r = http.post("/v1/messages", json=an, headers={"x-api-key": key, "anthropic-version": "2023-06-01",
                                                                  "cookie": f"session={cookie}"})
                assert r.status_code == 200 and b"message_stop" in r.content, r.text[:300]
                chat = {"model": NEMOTRON, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
                r = http.post("/v1/chat/completions", json=chat, headers={"authorization": f"Bearer {key}"})
                assert r.status_code == 200, r.text[:300]
                # a wrong credential (401) and a key quoted in the prompt itself
                r = http.post("/v1/chat/completions", json=chat, headers={"authorization": f"Bearer {bearer}"})
                assert r.status_code == 401
                r = http.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                              json={**chat, "messages": [{"role": "user", "content": f"my key is {key}"}]})
                assert r.status_code == 200
        finally:
            proxy.send_signal(signal.SIGINT)
            try:
                stdout, stderr = proxy.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proxy.kill()
                stdout, stderr = proxy.communicate()
            logs += [stdout, stderr]
        assert proxy.returncode == 0, stderr[-2000:]
        assert capture.stat().st_size > 0 and trace.exists()

        # 4. replay of the trace, with the key
        rp = subprocess.run([*HC, "replay", str(trace), "--endpoint", server.url, "--api-key", key,
                             "--out", str(rep_dir), "--no-progress", "--time-scale", "0", "--timeout", "60"],
                            capture_output=True, env=env, timeout=180)
        logs += [rp.stdout, rp.stderr]
        assert rp.returncode == 0, (rp.stdout[-2000:], rp.stderr[-2000:])
        results = json.loads((rep_dir / "results.json").read_text())
        statuses = [t.get("status") for t in results.get("turns", [])]
        assert statuses and all(s == 200 for s in statuses), statuses  # the key got through
        logs.append("".join(server.output).encode())  # the server's own log

    (tmp_path / "logs.txt").write_bytes(b"\n".join(logs))
    files, leaks = scan([out, cap_dir, rep_dir, tmp_path / "logs.txt"], planted)
    print(f"\nsecrets: {files} files written by check, report, capture, trace and replay (and their output) "
          f"searched for {len(planted)} planted secrets in {sum(len(forms(s)) for s in planted.values())} forms: "
          f"{len(leaks)} leaks")
    assert files >= 6
    assert not leaks, leaks


@pytest.mark.e2e
@pytest.mark.timeout(1500)
def test_run_verify_clients_with_a_key_leaves_it_in_no_file(tmp_path: Path, e2e_install: Any) -> None:
    """`harnesscheck run --verify-clients --api-key KEY --out vc` (a relative folder, the usual way)
    against a server that demands KEY: every installed client (Claude Code, Codex, OpenClaw over its
    three APIs) runs its text and tool turns and works, and afterwards no file anywhere the run wrote —
    results, transcripts, report, captures, the clients' stdout/stderr and command lines — nor its
    output holds KEY in any form; the clients' homes lived in private temporary folders (TMPDIR here),
    all removed. (The capture and replay half of the same check: test_planted_key_never_written.)"""
    usable = []
    for name in ("claude-code", "codex", "openclaw"):
        try:
            e2e_install(name)
            usable.append(name)
        except pytest.skip.Exception:
            pass
    if not usable:
        pytest.skip("no real client usable")
    key = "sk-hc-PLANTED-" + secrets.token_hex(16)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp)}
    env.pop("HARNESSCHECK_API_KEY", None)
    with ServerProcess([*FAST, "--api-key", key]) as server:
        run = subprocess.run([*HC, "run", "--endpoint", server.url, "--api-key", key, "--out", "vc", "--tries", "1",
                              "-k", "AN-STREAM-001 or RS-STREAM-001 or CH-STREAM-001", "--verify-clients"],
                             cwd=tmp_path, capture_output=True, env=env, timeout=1400)
        (tmp_path / "logs.txt").write_bytes(b"\n".join([run.stdout, run.stderr, "".join(server.output).encode()]))
    text = run.stdout.decode(errors="replace")
    assert run.returncode == 0, (text[-3000:], run.stderr[-3000:])
    doc = json.loads((tmp_path / "vc" / "results.json").read_text())
    ran = {k: c for k, c in doc["client_verification"]["clients"].items() if not c["skipped"]}
    assert {k.partition(":")[0] for k in ran} == set(usable), doc["client_verification"]["clients"]
    assert all(c["measured"] == "works" for c in ran.values()), {k: c["turns"] for k, c in ran.items()}
    assert "DISAGREE" not in text
    assert list(tmp.iterdir()) == []  # every client's private home removed
    files, leaks = scan([tmp_path], {"api key": key})
    print(f"\nsecrets: run --verify-clients ({len(ran)} client runs): {files} files searched for the key in "
          f"{len(forms(key))} forms: {len(leaks)} leaks")
    assert files >= 10 and not leaks, leaks


def test_scan_finds_a_planted_leak(tmp_path: Path) -> None:
    """The search itself works: a key written as plain text, or as base64 in an auth header, is found."""
    key = "sk-hc-PLANTED-" + secrets.token_hex(16)
    (tmp_path / "a.json").write_text(json.dumps({"h": "Basic " + base64.b64encode(f"user:{key}".encode()).decode()}))
    (tmp_path / "b.txt").write_text(f"x{key}y")
    (tmp_path / "c.bin").write_bytes(b"zz" + base64.b64encode(b"pre" + key.encode() + b"post"))
    assert len(scan([tmp_path], {"key": key})[1]) >= 3


# -- the server's key check -------------------------------------------------------------------------

def _request(headers: dict[str, str]) -> Any:
    from starlette.requests import Request

    return Request({"type": "http", "method": "POST", "path": "/v1/messages", "query_string": b"",
                    "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]})


def test_check_auth_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from harnesscheck.reference_server.frontends import common
    from harnesscheck.reference_server.frontends.common import ApiError, check_auth

    source = inspect.getsource(check_auth)
    assert "hmac.compare_digest(" in source
    assert not re.search(r"(given|auth\S*)\s*[!=]=\s*api_key|api_key\s*[!=]=", source), source
    calls: list[tuple[bytes, bytes]] = []
    real = common.hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(common.hmac, "compare_digest", spy)
    key = "K-" + secrets.token_hex(8)
    check_auth(_request({"x-api-key": key}), key)
    check_auth(_request({"authorization": f"Bearer {key}"}), key)
    for headers in ({}, {"x-api-key": key[:-1]}, {"x-api-key": key + "x"}, {"authorization": f"Bearer {key[:3]}"},
                    {"authorization": key}):
        with pytest.raises(ApiError) as err:
            check_auth(_request(headers), key)
        assert err.value.status == 401 and key not in err.value.message
    # Every decision went through compare_digest, prefixes and wrong lengths included.
    assert len(calls) == 7 and all(b == key.encode() for _, b in calls)
    check_auth(_request({}), None)  # no key configured: open
