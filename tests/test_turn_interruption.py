"""A turn cancelled from outside (issue 23): every call it awaits is cancelled with it, its trace closes
``halted`` with the interruption (reason, step) and is read back from disk, never left ``running``;
``TurnInterrupted`` carries the closed result. ``Ora.stream`` interrupts its turn with its consumer;
``ora run`` on Ctrl-C exits 130 with the trace closed. A turn id given up front is the trace's."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import ora_scripted
import ora_trace_fs
import pytest

import ora_modes
from ora_core.api import Ora, TurnInterrupted, UsageError, hookimpl
from ora_core.testing import make_host, scripted_config

PROMPT = "Compare PostgreSQL and MySQL for a small web app."


class CancelRecorder:
    """A backend type ``slow`` whose calls sleep, recording those that were cancelled."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    @hookimpl
    def ora_register_backends(self, register):
        recorder = self

        class Backend:
            provider = "slow"
            model = "slow-1"
            family = "slow"

            async def complete(self, messages, params):
                from ora_core.api import Completion

                recorder.started += 1
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    recorder.cancelled += 1
                    raise
                return Completion(text="never", provider="slow", model="slow-1", family="slow")

        class Factory:
            name = "slow"

            def create(self, settings):
                return Backend()

        register(Factory())


def make_ora(tmp_path: Path, recorder: CancelRecorder | None = None) -> Ora:
    overrides: dict = {"pipeline": {"phase_a": "skip"},
                       "retrieval": {"streams": {"concept": False, "conversation": False, "relationship": False}},
                       "verification": {"verifier": "model", "final_verifier": "model"}}
    if recorder is not None:
        overrides["backends"] = {"local": {"type": "slow", "model": "slow-1", "family": "slow"}}
    resolved = scripted_config(tmp_path / "traces", default="An answer.\nCONFIDENCE: 0.9", **overrides)
    plugins = [ora_scripted, ora_modes, ora_trace_fs] + ([recorder] if recorder is not None else [])
    return Ora(host=make_host(*plugins), config=resolved)


def turn_json(result) -> dict:
    return json.loads((Path(result.trace_path) / "turn.json").read_text(encoding="utf-8"))


def test_cancelling_arun_cancels_the_model_call_and_closes_the_trace_as_interrupted(tmp_path):
    recorder = CancelRecorder()
    ora = make_ora(tmp_path, recorder)
    turn_id = ora.new_turn_id()

    async def main():
        task = asyncio.ensure_future(ora.arun(PROMPT, mode="standard", turn_id=turn_id))
        while recorder.started == 0:
            await asyncio.sleep(0.01)
        task.cancel("client-disconnected")
        with pytest.raises(TurnInterrupted) as caught:
            await task
        return caught.value

    interrupted = asyncio.run(main())
    assert recorder.cancelled == recorder.started == 1  # the call in flight was cancelled, none left running
    result = interrupted.result
    assert interrupted.reason == "client-disconnected" and result.turn_id == turn_id
    assert result.status == "halted" and result.interruption.reason == "client-disconnected"
    assert result.interruption.step == "gear2-analyst"
    assert "turn-interrupted-client-disconnected" in result.contingencies
    doc = turn_json(result)  # read back from disk: closed, never "running"
    assert doc["status"] == "halted" and doc["finished_at"]
    assert doc["interruption"]["reason"] == "client-disconnected" and doc["interruption"]["step"] == "gear2-analyst"
    assert doc["diagnostic"]["error_class"] == "TurnInterrupted"
    analyst = json.loads((Path(result.trace_path) / next(s for s in doc["steps"] if "analyst" in s)).read_text())
    assert analyst["health"]["verdict"] == "BROKEN"  # the step the cancellation reached says so in its file
    assert analyst["output"]["error"] == {"error_class": "Interrupted", "reason": "client-disconnected",
                                          "message": "the turn was cancelled (client-disconnected) in this step"}
    assert Path(result.trace_path).name == turn_id


def test_cancelling_without_a_message_names_the_reason_cancelled(tmp_path):
    recorder = CancelRecorder()
    ora = make_ora(tmp_path, recorder)

    async def main():
        task = asyncio.ensure_future(ora.arun(PROMPT, mode="standard"))
        while recorder.started == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        return caught.value

    error = asyncio.run(main())
    assert isinstance(error, TurnInterrupted) and error.result.interruption.reason == "cancelled"
    assert turn_json(error.result)["status"] == "halted"


def test_a_cancelled_stream_consumer_interrupts_its_turn_with_the_same_reason(tmp_path):
    recorder = CancelRecorder()
    ora = make_ora(tmp_path, recorder)
    seen = []

    async def consume():
        async for event in ora.stream(PROMPT, mode="standard"):
            seen.append(event)

    async def main():
        task = asyncio.ensure_future(consume())
        while recorder.started == 0:
            await asyncio.sleep(0.01)
        task.cancel("shutdown")
        with pytest.raises(TurnInterrupted) as caught:
            await task
        return caught.value

    error = asyncio.run(main())
    assert recorder.cancelled == 1 and error.reason == "shutdown"
    assert turn_json(error.result)["interruption"]["reason"] == "shutdown"
    assert seen and seen[0].turn_id == error.result.turn_id


def test_closing_the_stream_early_interrupts_the_turn_as_consumer_closed(tmp_path):
    recorder = CancelRecorder()
    ora = make_ora(tmp_path, recorder)

    async def main():
        events = ora.stream(PROMPT, mode="standard")
        first = await events.__anext__()
        while recorder.started == 0:
            await asyncio.sleep(0.01)
        await events.aclose()  # the trace is closed when aclose returns
        return first.turn_id

    turn_id = asyncio.run(main())
    doc = json.loads(next((tmp_path / "traces").glob(f"*/{turn_id}/turn.json")).read_text())
    assert doc["status"] == "halted" and doc["interruption"]["reason"] == "consumer-closed"
    assert recorder.cancelled == 1


def test_a_turn_id_that_cannot_name_a_trace_is_a_usage_error(tmp_path):
    ora = make_ora(tmp_path)
    for bad in ("../x", "", "a/b", ".hidden", "x" * 121):
        with pytest.raises(UsageError, match="cannot name a trace"):
            ora.run(PROMPT, mode="simple", turn_id=bad)
    assert not (tmp_path / "traces").exists()


def test_turn_ids_are_unique_and_a_given_one_is_the_traces(tmp_path):
    ids = {Ora.new_turn_id() for _ in range(2000)}
    assert len(ids) == 2000
    ora = make_ora(tmp_path)
    result = ora.run("Hello there", mode="simple", turn_id="my-turn-1")
    assert result.turn_id == "my-turn-1" and Path(result.trace_path).name == "my-turn-1"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
def test_ora_run_on_ctrl_c_interrupts_the_turn_exits_130_and_closes_its_trace(tmp_path):
    config = tmp_path / "ora.toml"
    config.write_text(
        f'[trace]\nroot = "{tmp_path / "traces"}"\n'
        '[backends.local]\ntype = "scripted"\nmodel = "scripted-1"\nfamily = "scripted"\n'
        '[backends.local.options]\ndefault = "An answer.\\nCONFIDENCE: 0.9"\nlatency_s = 20\n'
        '[pipeline]\nphase_a = "skip"\n'
        f'[retrieval]\npath = "{tmp_path / "chroma"}"\n'
        '[retrieval.streams]\nconcept = false\nconversation = false\nrelationship = false\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env.update(ORA_CONFIG=str(config), HF_HUB_OFFLINE="1", XDG_DATA_HOME=str(tmp_path / "xdg"))
    ora = str(Path(sys.executable).with_name("ora"))
    proc = subprocess.Popen([ora, "run", "--mode", "standard", PROMPT], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "traces").glob("*/*/turn.json")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(1.0)  # inside the analyst's 20 s model call
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: user-interrupt in step gear2-analyst" in out
    doc = json.loads(next((tmp_path / "traces").glob("*/*/turn.json")).read_text())
    assert doc["status"] == "halted" and doc["interruption"]["reason"] == "user-interrupt"
    assert f"trace: {Path(next((tmp_path / 'traces').glob('*/*/turn.json'))).parent}" in out


class SlowFinish:
    """An ``ora_turn_finished`` observer that takes a while: the turn's close is still running."""

    @hookimpl
    def ora_turn_finished(self, turn, result):
        time.sleep(0.5)


def test_a_second_cancellation_while_the_trace_closes_is_said_in_the_result_and_the_close_goes_on(tmp_path):
    recorder = CancelRecorder()
    resolved = scripted_config(tmp_path / "traces", default="An answer.\nCONFIDENCE: 0.9",
                               pipeline={"phase_a": "skip"},
                               retrieval={"streams": {"concept": False, "conversation": False, "relationship": False}},
                               verification={"verifier": "model", "final_verifier": "model"},
                               backends={"local": {"type": "slow", "model": "slow-1", "family": "slow"}})
    ora = Ora(host=make_host(ora_scripted, ora_modes, ora_trace_fs, recorder, SlowFinish()), config=resolved)
    turn_id = ora.new_turn_id()

    async def main():
        task = asyncio.ensure_future(ora.arun(PROMPT, mode="standard", turn_id=turn_id))
        while recorder.started == 0:
            await asyncio.sleep(0.01)
        task.cancel("client-disconnected")
        await asyncio.sleep(0.1)  # inside the close (the slow observer)
        task.cancel("shutdown")
        with pytest.raises(TurnInterrupted) as caught:
            await task
        for _ in range(100):  # the close finishes on its own task
            found = list((tmp_path / "traces").glob(f"*/{turn_id}/turn.json"))
            if found and json.loads(found[0].read_text(encoding="utf-8"))["status"] != "running":
                return caught.value, json.loads(found[0].read_text(encoding="utf-8"))
            await asyncio.sleep(0.1)
        raise AssertionError("the trace was not closed after the second cancellation")

    interrupted, doc = asyncio.run(main())
    assert interrupted.reason == "client-disconnected"
    assert "cancelled again (shutdown)" in interrupted.result.diagnostic["second_cancellation"]
    assert doc["status"] == "halted" and doc["interruption"]["reason"] == "client-disconnected"
