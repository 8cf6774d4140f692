"""The wire shapes without a server: requests read (paths of wrong fields, content parts, the prompt and
the question this server asked found again in the messages) and the clarification text round trip."""

from __future__ import annotations

import pytest
from ora_serve.shapes import RequestError, clarification_text, read_chat, read_conversation


def chat(messages, **more):
    import json

    return read_chat(json.dumps({"model": "ora/auto", "messages": messages, **more}).encode())


def test_text_content_parts_are_joined_and_other_parts_refused_by_path():
    request = chat([{"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}])
    assert read_conversation(request, max_prompt_chars=100).prompt == "one\ntwo"
    request = chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])
    with pytest.raises(RequestError, match=r"messages\.0\.content\.0: only text content parts"):
        read_conversation(request, max_prompt_chars=100)


def test_the_last_user_message_is_the_prompt_and_the_rest_is_earlier():
    request = chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "an answer"}, {"role": "user", "content": "second"}])
    found = read_conversation(request, max_prompt_chars=100)
    assert found.prompt == "second" and found.prompt_index == 3 and len(found.earlier) == 3
    assert found.question is None  # the assistant's message was no question of this server's


def test_a_question_this_server_asked_is_found_again_with_its_options_and_turn():
    asked = clarification_text("Which fits best?", ["standard", "simple"], "20261127T000000.000000Z-abc")
    request = chat([{"role": "user", "content": "blue"}, {"role": "assistant", "content": asked},
                    {"role": "user", "content": "1"}])
    found = read_conversation(request, max_prompt_chars=100)
    assert found.question == "Which fits best?" and found.options == ["standard", "simple"]
    assert found.asked_about == "blue" and found.asked_in_turn == "20261127T000000.000000Z-abc"


def test_an_unknown_role_and_a_missing_model_name_their_fields():
    with pytest.raises(RequestError, match=r"^messages\.0\.role:"):
        chat([{"role": "robot", "content": "x"}])
    with pytest.raises(RequestError, match="^model: this field is required"):
        read_chat(b'{"messages": [{"role": "user", "content": "x"}]}')
    with pytest.raises(RequestError, match=r"^stream:"):
        chat([{"role": "user", "content": "x"}], stream="true")  # a string is not a boolean
