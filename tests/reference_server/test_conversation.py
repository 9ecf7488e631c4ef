"""The user's question in a turn, found among the context messages harnesses add around it."""

from __future__ import annotations

from harnesscheck.reference_server.conversation import Conversation, Message, is_harness_context


def conv(*texts: str) -> Conversation:
    return Conversation(model="m", messages=[Message(role="user", text=t) for t in texts])


def test_codex_environment_context_before_the_prompt() -> None:
    c = conv("<environment_context>\n  <cwd>/tmp</cwd>\n</environment_context>", "Use the exec_command tool")
    assert c.turn_user_text() == "Use the exec_command tool"


def test_openclaw_internal_context_after_the_prompt() -> None:
    c = conv("Say ok", "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nruntime notes\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")
    assert c.turn_user_text() == "Say ok"


def test_claude_code_reminders_beside_the_prompt_are_not_context() -> None:
    prompt = "<system-reminder>\nskills\n</system-reminder>\nRun the Bash tool"
    assert not is_harness_context(prompt)
    assert is_harness_context("<system-reminder>\nonly a reminder\n</system-reminder>")
    assert conv("<system-reminder>x</system-reminder>", prompt).turn_user_text() == prompt


def test_only_context_falls_back_to_the_newest_user_text() -> None:
    assert conv("<environment_context>a</environment_context>").turn_user_text().startswith("<environment_context>")
