"""A model call's messages and output sit in the step Markdown inside a code fence longer than any
run of backticks they hold (a model's output may carry fences of its own), and a text without a
run of three gets the plain three-backtick fence (the common case, taken without scanning the text)."""

from __future__ import annotations

import re

import pytest
from ora_trace_fs.render import render_step_markdown


def _step(content: str, output: str) -> dict:
    return {"step": "analysis", "index": 4, "input": {}, "output": {}, "health": {"verdict": "OK"},
            "calls": [{"call": 1, "step_call": 1, "messages": [{"role": "system", "content": content}],
                       "output": output, "params": {}}]}


def _fenced_texts(markdown: str) -> dict[str, str]:
    """Each ``#### <heading>`` of the call block: the fence line and the text it encloses."""
    found = {}
    for heading, fence, body in re.findall(r"#### (system|output)\n\n(`{3,})text\n(.*?)\n\2\n", markdown,
                                           flags=re.DOTALL):
        found[heading] = (fence, body)
    return found


@pytest.mark.parametrize(("text", "fence"), [
    ("plain prose, no backticks", "```"),
    ("one ` and two `` backticks", "```"),
    ("", "```"),
    ("a fenced block:\n```python\nx = 1\n```\n", "````"),
    ("a longer run ````` inside", "``````"),
    ("runs of ``` and ```` both", "`````"),
])
def test_each_text_is_fenced_longer_than_its_longest_backtick_run(text, fence):
    markdown = render_step_markdown(_step(text, text))
    found = _fenced_texts(markdown)
    assert found["system"] == (fence, text)
    assert found["output"] == (fence, text)
