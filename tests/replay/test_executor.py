"""The streaming tool executor: the three APIs' completion events start tools mid-stream; safe
tools overlap, unsafe ones run alone and in order; the barrier returns results in call order;
against the reference server the first tool starts well before the end of stream."""

from __future__ import annotations

import asyncio
import json

import pytest

from harnesscheck.replay.executor import ExecutorClient, StreamingToolExecutor, Tool, schedule_model, sleep_tool


def _recorder(log: list, ms: float, safe: bool) -> Tool:
    async def fn(name, args):
        log.append(("start", args["n"]))
        await asyncio.sleep(ms / 1000)
        log.append(("end", args["n"]))
        return f"r{args['n']}"

    return Tool(fn, safe)


def _anthropic_events(n: int) -> list[dict]:
    ev = [{"type": "message_start", "message": {}}]
    for i in range(n):
        ev += [{"type": "content_block_start", "index": i,
                "content_block": {"type": "tool_use", "id": f"t{i}", "name": "T", "input": {}}},
               {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": '{"n":'}},
               {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": f"{i}}}"}},
               {"type": "content_block_stop", "index": i}]
    return ev


async def _drive(api: str, events: list[tuple], tools: dict, *, gap: float = 0.0, after: bool = False):
    ex = StreamingToolExecutor(api, tools, after_stream=after)
    for event, d in events:
        ex.on_event(event, d)
        await asyncio.sleep(gap)
    ex.end_stream()
    await ex.barrier()
    return ex


def test_anthropic_starts_at_block_stop_and_safe_tools_overlap():
    log: list = []
    ex = asyncio.run(_drive("anthropic", [(None, e) for e in _anthropic_events(3)],
                            {"T": _recorder(log, 30, True)}))
    assert [r.ready_source for r in ex.calls] == ["content_block_stop"] * 3
    assert [r.arguments for r in ex.calls] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert log[:3] == [("start", 0), ("start", 1), ("start", 2)]  # all three overlap
    assert [x["content"] for x in ex.results()] == ["r0", "r1", "r2"]
    assert ex.barrier_ns >= max(r.end_ns for r in ex.calls)


def test_unsafe_tools_run_alone_in_call_order():
    log: list = []
    ex = asyncio.run(_drive("anthropic", [(None, e) for e in _anthropic_events(3)],
                            {"T": _recorder(log, 10, False)}))
    assert log == [("start", 0), ("end", 0), ("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    assert all(a.end_ns <= b.start_ns for a, b in zip(ex.calls, ex.calls[1:]))


def test_after_stream_starts_nothing_before_the_end():
    log: list = []
    ex = asyncio.run(_drive("anthropic", [(None, e) for e in _anthropic_events(2)],
                            {"T": _recorder(log, 5, True)}, gap=0.01, after=True))
    assert all(r.start_ns >= ex.stream_end_ns for r in ex.calls)


def test_chat_mappings_dispatch_arguments_next_index_finish():
    def chunk(tc=None, finish=None):
        return (None, {"choices": [{"index": 0, "delta": {"tool_calls": tc} if tc else {}, "finish_reason": finish}]})

    tools = {"T": sleep_tool(1, safe=True)}
    # arguments complete as JSON -> ready at that chunk
    events = [chunk([{"index": 0, "id": "a", "function": {"name": "T", "arguments": '{"n":'}}]),
              chunk([{"index": 0, "function": {"arguments": "0}"}}]),
              chunk([{"index": 1, "id": "b", "function": {"name": "T", "arguments": "not json"}}]),
              chunk(finish="tool_calls")]
    ex = asyncio.run(_drive("chat", events, tools))
    assert [r.ready_source for r in ex.calls] == ["arguments", "finish_reason"]
    assert ex.calls[1].arguments == "not json"
    # dispatch frame first
    events = [chunk([{"index": 0, "id": "a", "function": {"name": "T", "arguments": '{"n'}}]),
              ("tool_call_dispatch", {"tool_call": {"index": 0, "id": "a", "function": {"name": "T",
                                                                                        "arguments": '{"n":1}'}}}),
              chunk(finish="tool_calls")]
    ex = asyncio.run(_drive("chat", events, tools))
    assert ex.calls[0].ready_source == "dispatch" and ex.calls[0].arguments == {"n": 1}
    # no parseable arguments: the next index closes the previous call
    events = [chunk([{"index": 0, "id": "a", "function": {"name": "T", "arguments": "x"}}]),
              chunk([{"index": 1, "id": "b", "function": {"name": "T", "arguments": "{}"}}]),
              chunk(finish="tool_calls")]
    ex = asyncio.run(_drive("chat", events, tools))
    assert [r.ready_source for r in ex.calls] == ["next_index", "arguments"]


def test_responses_arguments_done_and_item_done():
    tools = {"T": sleep_tool(1)}
    events = [("response.output_item.added", {"type": "response.output_item.added", "output_index": 1,
                                              "item": {"type": "function_call", "call_id": "c1", "name": "T"}}),
              (None, {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"n":1}'}),
              (None, {"type": "response.function_call_arguments.done", "output_index": 1, "arguments": '{"n":1}'}),
              (None, {"type": "response.output_item.done", "output_index": 2,
                      "item": {"type": "function_call", "call_id": "c2", "name": "T", "arguments": "{}"}})]
    ex = asyncio.run(_drive("responses", events, tools))
    assert [(r.id, r.ready_source, r.arguments) for r in ex.calls] == [("c1", "arguments.done", {"n": 1}),
                                                                       ("c2", "item.done", {})]


def test_unknown_tool_is_an_error_result_not_a_crash():
    ex = asyncio.run(_drive("anthropic", [(None, e) for e in _anthropic_events(1)], {}))
    assert ex.results()[0]["is_error"] and "no tool" in ex.results()[0]["content"]


def test_schedule_model_sum_and_max():
    # after the stream: unsafe -> end + sum, safe -> end + max
    assert schedule_model([10, 20], 100, [30, 40], [False, False], after_stream=True) == 170
    assert schedule_model([10, 20], 100, [30, 40], [True, True], after_stream=True) == 140
    # streaming: max(stream end, tool finish)
    assert schedule_model([10, 20], 100, [30, 40], [False, False]) == 100
    assert schedule_model([10, 90], 100, [30, 40], [False, False]) == 130
    assert schedule_model([10, 20], 100, [300, 40], [False, False]) == 350  # second waits for the first
    assert schedule_model([10, 20], 100, [300, 40], [True, True]) == 310


@pytest.fixture(scope="module")
def server():
    from harnesscheck.reference_server.launch import ServerProcess

    with ServerProcess(["--ttft-base-ms", "5", "--prefill-us-per-token", "0", "--decode-ms", "3"]) as s:
        yield s


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_against_the_reference_server(server, api):
    from harnesscheck.protocol import apis
    from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS
    from harnesscheck.replay.benchmarks.common import PATHS
    from harnesscheck.replay.client import run_async
    from harnesscheck.scenarios.loader import get

    body = apis.get(api).first(get("interleaved"), DEFAULT_MODEL_IDS[0])

    async def go():
        async with ExecutorClient() as c:
            return await c.run_turn(server.url + PATHS[api], body, api=api, tools={}, default=sleep_tool(50))

    result, ex = run_async(go())
    assert result.ok, result.error
    assert len(ex.calls) == 2
    first_call = ex.calls[0]
    # interleaved (r0 t0 r1 t1): the first tool ran while the model was still generating
    assert first_call.start_ns < ex.stream_end_ns - 50e6, ex.timeline()
    assert first_call.end_ns < ex.stream_end_ns
    # (uvloop timers have a 1 ms grid, so a 50 ms sleep may end a little early)
    assert ex.barrier_ns >= ex.calls[1].end_ns >= ex.calls[1].start_ns + 45e6
    assert [r["id"] for r in ex.results()] == [c["id"] for c in _ids(api, result.answer)]
    json.dumps(ex.timeline())


def _ids(api, answer):
    if api == "anthropic":
        return [b for b in answer[0]["content"] if b["type"] == "tool_use"]
    if api == "chat":
        return answer[0]["tool_calls"]
    return [{"id": it["call_id"]} for it in answer if it.get("type") == "function_call"]


@pytest.mark.parametrize("fixture,api,n", [("anthropic_parallel_tools", "anthropic", 2),
                                           ("chat_tool_dispatch", "chat", None),
                                           ("responses_reasoning_function_call", "responses", None)])
def test_recorded_sse_frames(fixture, api, n):
    from pathlib import Path

    from harnesscheck.protocol.wire.sse import decode_all

    data = (Path(__file__).parents[1] / "conformance" / "fixtures" / f"{fixture}.sse").read_bytes()

    async def go():
        ex = StreamingToolExecutor(api, {}, default=sleep_tool(1))
        for frame in decode_all(data):
            ex.on_frame(frame)
        ex.end_stream()
        await ex.barrier()
        return ex

    ex = asyncio.run(go())
    assert ex.calls and all(r.ready_source != "end_of_stream" and r.end_ns for r in ex.calls), ex.timeline()
    assert n is None or len(ex.calls) == n
    assert all(isinstance(r.arguments, dict) for r in ex.calls)
