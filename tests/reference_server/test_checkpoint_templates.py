"""The checkpoint loader and the template-reasoning detection, without torch (tokenizers + jinja2).

The templates below are small ones written here, each with the traits a reader can see in it; the
checkpoint is the repo's small tokenizer laid out as a model directory (`make_model.write_checkpoint_files`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from harnesscheck.reference_server.checkpoint import CheckpointError, TemplateSource, load_checkpoint
from harnesscheck.reference_server.config import ServerConfig
from harnesscheck.reference_server.conversation import Conversation, Message, ToolResult
from harnesscheck.reference_server.events import Part, ToolCall
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.frontends import anthropic
from harnesscheck.reference_server.launch import ServerProcess
from harnesscheck.reference_server.make_model import write_checkpoint_files
from harnesscheck.reference_server.pipeline.template import ChatTemplate
from harnesscheck.reference_server.service import build_service

SPECIALS = ("<|im_start|>", "<|im_end|>", "<think>", "</think>")

# Reads reasoning_content (Qwen3-like: only for turns after the last user message), renders
# tool_calls, honours enable_thinking in the generation prompt; truncate_history_thinking unread.
READS_RC = """{%- for m in messages -%}
<|im_start|>{{ m.role }}
{% if m.role == 'assistant' and m.reasoning_content and loop.index0 > (messages | length) - 3 -%}
<think>
{{ m.reasoning_content }}
</think>
{% endif -%}
{{ m.content }}
{%- for c in m.tool_calls or [] -%}
<tool_call>{{ c.function.name }} {{ c.function.arguments | tojson }}</tool_call>
{%- endfor -%}
<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif -%}
{%- endif -%}"""

# Reads content only; no kwargs.
CONTENT_ONLY = """{%- for m in messages -%}
<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}"""

# Reads reasoning_content of every past turn unless truncate_history_thinking (default true), and
# opens <think> in the generation prompt unless enable_thinking is false.
HONOURS_BOTH = """{%- set truncate = truncate_history_thinking if truncate_history_thinking is defined else true -%}
{%- for m in messages -%}
<|im_start|>{{ m.role }}
{% if m.reasoning_content and not truncate %}<think>{{ m.reasoning_content }}</think>{% endif -%}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% if enable_thinking is not defined or enable_thinking %}<think>
{% endif -%}
{%- endif -%}"""

# A DeepSeek-V3.1-like switch named `thinking`; refuses tool messages (the other probes decide).
THINKING_KWARG = """{%- for m in messages -%}
{%- if m.role == 'tool' %}{{ raise_exception('no tool role') }}{% endif -%}
<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if thinking %}<think>{% else %}</think>{% endif %}{% endif -%}"""


def traits(text: str):
    return ChatTemplate(TemplateSource(text=text, origin="test"), special_tokens=SPECIALS).traits


def test_detects_a_template_that_reads_reasoning_content() -> None:
    t = traits(READS_RC)
    assert t.reads_reasoning_content and t.reads_reasoning and not t.reads_segments
    assert t.renders_tool_calls
    assert t.honoured_kwargs == ("enable_thinking",)
    assert not t.opens_reasoning and t.turn_end == "<|im_end|>"
    assert t.reasoning_history.startswith("template-native")


def test_detects_a_content_only_template() -> None:
    t = traits(CONTENT_ONLY)
    assert not t.reads_reasoning_content and not t.reads_reasoning and not t.renders_tool_calls
    assert t.honoured_kwargs == () and t.turn_end == "<|im_end|>"
    assert t.reasoning_history.startswith("content-only")


def test_detects_enable_thinking_and_truncate_history_thinking() -> None:
    t = traits(HONOURS_BOTH)
    assert t.reads_reasoning_content  # only with truncate_history_thinking=false: still read
    assert t.honoured_kwargs == ("enable_thinking", "truncate_history_thinking")
    assert t.opens_reasoning  # the generation prompt ends inside <think>


def test_detects_the_thinking_kwarg_past_a_refused_probe() -> None:
    t = traits(THINKING_KWARG)
    assert t.honoured_kwargs == ("thinking",) and not t.reads_reasoning_content


def test_builtin_templates_keep_their_known_behaviour() -> None:
    from harnesscheck.reference_server.pipeline.families import builtin_chat_template

    chatml, r1 = builtin_chat_template("chatml.jinja").traits, builtin_chat_template("deepseek_r1.jinja").traits
    assert chatml.reads_segments and chatml.honoured_kwargs == ("enable_thinking", "truncate_history_thinking")
    assert not r1.reads_reasoning and r1.opens_reasoning and r1.turn_end == "<|end_of_sentence|>"


# --- history rebuild follows the detection ------------------------------------------------------


def _checkpoint(tmp_path: Path, template: str | None, family: str = "nemotron") -> Path:
    write_checkpoint_files(tmp_path, family=family, chat_template=False)
    if template is not None:
        (tmp_path / "chat_template.jinja").write_text(template, encoding="utf-8")
    return tmp_path


def _agent_history(model: str) -> Conversation:
    """user, assistant (plain: reasoning + text), user, assistant (reasoning + tool call), tool result."""
    call = ToolCall(index=0, id="call_1", name="calculator", arguments='{"expression": "15 * 23"}')
    return Conversation(model=model, messages=[
        Message(role="user", text="hi"),
        Message(role="assistant", parts=[Part(kind="reasoning", text="plain-thought"),
                                         Part(kind="text", text="hello")]),
        Message(role="user", text="compute"),
        Message(role="assistant", parts=[Part(kind="reasoning", text="agent-thought"),
                                         Part(kind="tool_call", call=call)]),
        Message(role="tool", results=[ToolResult(call_id="call_1", content="345")]),
    ])


@pytest.mark.parametrize("family", ["nemotron", "deepseek_r1"])
def test_reasoning_goes_to_a_template_that_reads_it(tmp_path: Path, family: str) -> None:
    path = str(_checkpoint(tmp_path, HONOURS_BOTH))
    service = build_service(ServerConfig(model_ids=(f"m={family}",), model_path=path))
    prompt = service.prompt(_agent_history("m"))
    # The template got reasoning_content and, with truncate_history_thinking=false, kept both turns'
    # reasoning as it writes it (<think>..</think> with no newlines): the family's drop policy did not apply.
    assert "<think>plain-thought</think>hello<|im_end|>" in prompt.text
    assert "<think>agent-thought</think>" in prompt.text
    assert prompt.template_kwargs == {"enable_thinking": True, "truncate_history_thinking": False}


@pytest.mark.parametrize(("family", "plain_kept"), [("nemotron", True), ("deepseek_r1", False)])
def test_content_only_template_gets_inline_think_and_the_family_policy(tmp_path: Path, family: str,
                                                                       plain_kept: bool) -> None:
    path = str(_checkpoint(tmp_path, CONTENT_ONLY))
    service = build_service(ServerConfig(model_ids=(f"m={family}",), model_path=path))
    prompt = service.prompt(_agent_history("m"))
    assert "<think>\nagent-thought\n</think>" in prompt.text  # inlined by the server, agent turn kept
    assert ("plain-thought" in prompt.text) is plain_kept  # DeepSeek-R1 policy: plain-turn reasoning dropped
    assert "<tool_call>" in prompt.text and "calculator" in prompt.text  # written by the tool parser
    assert prompt.template_kwargs == {}  # the template honours none


def test_native_tool_calls_get_object_arguments(tmp_path: Path) -> None:
    service = build_service(ServerConfig(model_ids=("m=nemotron",), model_path=str(_checkpoint(tmp_path, READS_RC))))
    text = service.prompt(_agent_history("m")).text
    assert '<tool_call>calculator {"expression": "15 * 23"}</tool_call>' in text
    assert "<think>\nagent-thought\n</think>" in text  # the template's own rendering of reasoning_content


@pytest.mark.parametrize(("body_extra", "parser", "expected"), [
    ({}, "", {"enable_thinking": True, "truncate_history_thinking": False}),
    ({"thinking": {"type": "disabled"}}, "", {"enable_thinking": False, "truncate_history_thinking": True}),
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "", {"enable_thinking": True,
                                                                    "truncate_history_thinking": False}),
    ({}, None, {"enable_thinking": False, "truncate_history_thinking": True}),  # no reasoning parser
])
def test_anthropic_thinking_switch(tmp_path: Path, body_extra: dict, parser: str | None, expected: dict) -> None:
    """Article 1, fix 3: reasoning parser configured and thinking not turned off -> enable_thinking=true,
    truncate_history_thinking=false, passed to a template that honours them."""
    service = build_service(ServerConfig(model_ids=("m=nemotron",), reasoning_parser=parser,
                                         model_path=str(_checkpoint(tmp_path, HONOURS_BOTH))))
    body = {"model": "m", "max_tokens": 2048, "messages": [{"role": "user", "content": "hi"}], **body_extra}
    prompt = service.prompt(anthropic.to_conversation(body, Faults()))
    assert prompt.template_kwargs == expected
    assert prompt.text.endswith("<think>\n") is expected["enable_thinking"]


# --- the loader -------------------------------------------------------------------------------------


def test_loader_reads_the_checkpoints_own_tokens_and_end_ids(tmp_path: Path) -> None:
    write_checkpoint_files(tmp_path, family="qwen3")
    added = {t["content"]: t["id"] for t in json.loads((tmp_path / "tokenizer.json").read_text())["added_tokens"]}
    end = json.loads((tmp_path / "generation_config.json").read_text())["eos_token_id"]
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.special_tokens["<|im_end|>"] == added["<|im_end|>"] and ckpt.eos_token == "<|im_end|>"
    assert list(ckpt.end_ids) == end == [added["<|im_end|>"], added["<|endoftext|>"]]
    assert ckpt.template.origin == "tokenizer_config.json chat_template"
    assert ckpt.template.text == json.loads((tmp_path / "tokenizer_config.json").read_text())["chat_template"]
    assert ckpt.tokenizer.encode("<|im_start|>user") == [added["<|im_start|>"], *ckpt.tokenizer.encode("user")]


def test_loader_errors_name_what_is_missing(tmp_path: Path) -> None:
    write_checkpoint_files(tmp_path, chat_template=False)
    with pytest.raises(CheckpointError, match=r"ships no chat template .*chat_template\.jinja.*--chat-template FILE"):
        load_checkpoint(tmp_path)
    assert load_checkpoint(tmp_path, chat_template="gemma").template.origin == "built-in gemma.jinja"
    mine = tmp_path / "mine.jinja"
    mine.write_text(CONTENT_ONLY)
    assert load_checkpoint(tmp_path, chat_template=str(mine)).template.origin == f"--chat-template {mine}"
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path, chat_template=str(tmp_path / "absent.jinja"))
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="no tokenizer.json"):
        load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="not a .gguf"):
        load_checkpoint(mine)


# --- over HTTP: serve --model-path DIR --chat-template FILE (scripted engine: no torch) -------------


def test_serve_reports_the_detection_and_tokenizes_with_the_checkpoint(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path / "ckpt", None, family="qwen3")
    template = tmp_path / "reads_rc.jinja"
    template.write_text(READS_RC)
    with ServerProcess(["--model-path", str(ckpt), "--chat-template", str(template), "--model-id", "m=qwen3",
                        "--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0"]) as server:
        log = "".join(server.output)
        assert "model m: chat template --chat-template" in log and "reads reasoning_content: True" in log
        meta = httpx.get(server.url + "/v1/models").json()["data"][0]["metadata"]["chat_template"]
        assert meta["reads_reasoning_content"] and meta["honoured_kwargs"] == ["enable_thinking"]
        assert meta["reasoning_history"].startswith("template-native") and meta["checkpoint"]["path"] == str(ckpt)
        text = "<|im_start|>user\nhello there<|im_end|>"
        added = {t["content"]: t["id"] for t in json.loads((ckpt / "tokenizer.json").read_text())["added_tokens"]}
        ids = httpx.post(server.url + "/v1/tokenize", json={"prompt": text}).json()["tokens"]
        assert ids[0] == added["<|im_start|>"] and ids[-1] == added["<|im_end|>"]
        reply = httpx.post(server.url + "/v1/messages", json={
            "model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": "hello"}]}).json()
        assert reply["type"] == "message" and reply["stop_reason"] in ("end_turn", "tool_use")


def test_serve_without_a_template_fails_at_start_naming_the_option(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path, None)
    run = subprocess.run([sys.executable, "-m", "harnesscheck", "serve", "--port", "0", "--model-path", str(ckpt)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "ships no chat template" in run.stderr and "--chat-template FILE" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_builtin_chatml_renders_the_openai_form_other_servers_hand_it() -> None:
    """`make-model` ships chatml.jinja in its model folders; served by vLLM (docs/peers/vllm-0.32.md) the
    template gets OpenAI chat messages, not segments: the reasoning of the turns after the last user
    message (under reasoning_content or reasoning), the text, and each tool call as hermes reads it."""
    from harnesscheck.reference_server.pipeline.families import builtin_chat_template

    call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    messages = [{"role": "user", "content": "earlier"},
                {"role": "assistant", "content": "old answer", "reasoning_content": "old thought"},
                {"role": "user", "content": "read a"},
                {"role": "assistant", "content": "", "reasoning_content": "r0", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "A"},
                {"role": "assistant", "content": "", "reasoning": "r1",
                 "tool_calls": [{**call, "function": {"name": "bash", "arguments": {"cmd": "ls"}}}]}]
    out = builtin_chat_template("chatml.jinja").render(messages, add_generation_prompt=True)
    assert "old thought" not in out and "old answer" in out  # a past turn's reasoning, as Qwen3 drops it
    assert out.index("<think>\nr0\n</think>") < out.index('{"name": "read_file", "arguments": {"path": "a"}}') \
        < out.index("<tool_response>\nA\n</tool_response>") < out.index("<think>\nr1\n</think>") \
        < out.index('{"name": "bash", "arguments": {"cmd": "ls"}}')


def _generated(parts: list[Part]) -> str:
    """What the kit's model writes for ``parts`` under the qwen3 family (chatml.jinja's): the scripted
    output, through the server's one renderer."""
    from harnesscheck.reference_server.parsers import get_reasoning_parser, get_tool_parser
    from harnesscheck.reference_server.parsers.stream import render_parts

    return render_parts(parts, get_reasoning_parser("qwen3")(), get_tool_parser("hermes")(id_factory=str))


def _read_back(generated: str, *, raw: bool) -> dict[str, Any]:
    """The assistant message another server hands the template for ``generated``: its reasoning parser's
    reasoning, the text around the calls, the calls. ``raw``: the newlines the parsers leave, as Dynamo 1.6.1
    returned them (reasoning '\\n...\\n', content '\\n\\n' before a call); else stripped, content None."""
    reasoning, _, rest = generated.removeprefix("<think>").partition("</think>")
    text, calls = rest.split("<tool_call>")[0], []
    for block in rest.split("<tool_call>\n")[1:]:
        call = json.loads(block.split("\n</tool_call>")[0])
        calls.append({"id": f"call_{len(calls)}", "type": "function",
                      "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}})
    message: dict[str, Any] = {"role": "assistant", "reasoning_content": reasoning if raw else reasoning.strip("\n"),
                               "content": text if raw else (text.lstrip("\n") or None)}
    return message | ({"tool_calls": calls} if calls else {})


@pytest.mark.parametrize("raw", [True, False], ids=["dynamo", "stripped"])
@pytest.mark.parametrize("parts", [
    [Part("reasoning", "r0 step one.\nstep two."), Part("tool_call", call=ToolCall(0, "c0", "read_file", '{"path": "a"}'))],
    [Part("reasoning", "r0"), Part("text", "I will read it."), Part("tool_call", call=ToolCall(0, "c0", "read_file",
                                                                                              '{"path": "a"}'))],
    [Part("reasoning", "r0"), Part("tool_call", call=ToolCall(0, "c0", "read_file", '{"path": "a"}')),
     Part("tool_call", call=ToolCall(1, "c1", "bash", '{"cmd": "ls -l"}'))],
    [Part("reasoning", "r0"), Part("text", "done.")],
], ids=["reasoning-call", "reasoning-text-call", "two-calls", "reasoning-text"])
@pytest.mark.parametrize("folder", [False, True], ids=["built-in", "model-folder"])
def test_the_builtin_chatml_renders_a_generated_turn_back_as_generated(parts: list[Part], raw: bool,
                                                                      folder: bool) -> None:
    """The prefix property on another server (Dynamo, vLLM) serving make-model's folder: turn 2's prompt starts
    with turn 1's prompt, then exactly what the model generated and its end token. chatml.jinja rendered the
    reasoning Dynamo returns ('\\n...\\n') and the '\\n\\n' text as sent, and a newline before each call, so
    turn 2 departed after '<think>\\n' and the prefix cache missed (AN/CH/RS-HIST-002 on Dynamo 1.6.1).
    ``folder``: the same text as a model folder's template, in the Hugging Face environment (trim_blocks)."""
    from harnesscheck.reference_server.pipeline.families import builtin_chat_template

    template = builtin_chat_template("chatml.jinja")
    if folder:
        template = ChatTemplate(TemplateSource(template.source.text, "tokenizer_config.json"))
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("read_file", "bash")]
    first = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "read a"}]
    prompt = template.render(first, tools=tools, add_generation_prompt=True)
    generated = _generated(parts)
    answer = _read_back(generated, raw=raw)
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "A"} for c in answer.get("tool_calls", [])]
    follow = first + [answer] + (results or [{"role": "user", "content": "thanks"}])
    # a turn with no call is followed by a user turn, before which Qwen3's templates drop past reasoning
    keep = {} if results else {"truncate_history_thinking": False}
    again = template.render(follow, tools=tools, add_generation_prompt=True, **keep)
    assert again.startswith(prompt + generated + "<|im_end|>\n"), (prompt + generated, again[len(prompt):])
