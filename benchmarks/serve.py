"""``ora serve`` against the same turns run in process, side by side in one run.

A scripted backend whose every model call takes 100 ms (``latency_s = 0.1``); each turn a gear-2 turn
(analyst, model verifier: two calls, ``ok``), Phase A skipped, no retrieval stream, the forensic trace on.

(a) 50 concurrent non-streaming turns through ``ora serve`` (1 worker, a process of its own, reached over
    HTTP by an ``aiohttp`` client) vs the same 50 through ``Ora.arun`` in this process, interleaved for
    ``--rounds`` rounds: requests per second of each (target: served >= 0.9x in process, the median of the
    rounds' ratios: each round's two sides run back to back under the same load), and the p95
    latency the server adds (p95 of the served turns' latencies less the in-process turns' p95, medians
    over the rounds; target <= 15 ms).
(b) Time to the first SSE event: a streaming request, sent alone, until its first ``data:`` line arrives
    (the chat stream's opening chunk; target <= 50 ms, on a quiet machine); beside it, informational, the
    first event of the turn's events stream (``GET /v1/ora/turns/{id}/events``) opened right after.
(c) Memory of an idle worker: its RSS after start-up and again after the turns (``/proc/<pid>/status``).

    python benchmarks/serve.py [--turns 50] [--rounds 5] [--samples 20] [--strict]

``--strict`` exits 1 when a target is missed. The load average is printed before and after: figures
measured beside other processes are noisy; read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ANSWER = ("Harness vendors bundle foundation models with their own tooling, evaluation suites and deployment "
          "services, so customers shift their AI budgets from model providers to harness vendors, because the "
          "harness decides which model runs. The harness vendors gain pricing power and control of the customer "
          "relationship.\nCONFIDENCE: 0.90")
PASS = "Checked each claim against the evidence package; all are supported.\n\n## VERDICT\nVERDICT: PASS"
PROMPT = "Compare PostgreSQL and MySQL for a small web app."
TARGET_RPS = 0.9
TARGET_ADDED_P95_MS = 15.0
TARGET_TTFE_MS = 50.0


def config_text(root: Path) -> str:
    q = json.dumps
    return f"""
[trace]
root = {q(str(root / "traces"))}
[backends.local]
type = "scripted"
model = "scripted-1"
family = "scripted"
[backends.local.options]
latency_s = 0.1
default = {q(ANSWER)}
rules = [
  {{ match = "ROLE: VERIFIER", reply = {q(PASS)}, on = "system" }},
  {{ match = "ROLE: ANALYST", reply = {q(ANSWER)}, on = "system" }},
]
[verification]
verifier = "model"
final_verifier = "model"
same_lineage = "allow"
[pipeline]
phase_a = "skip"
[retrieval]
path = {q(str(root / "chroma"))}
[retrieval.streams]
concept = false
conversation = false
relationship = false
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(found.group(1)) / 1024 if found else float("nan")


class Server:
    def __init__(self, root: Path, config: Path, turns: int) -> None:
        ora = str(Path(sys.executable).with_name("ora"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
        env.update(HF_HUB_OFFLINE="1", XDG_DATA_HOME=str(root / "xdg-data"), PYTHONUNBUFFERED="1")
        self.log_path = root / "serve.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen([ora, "serve", "--config", str(config), "--port", "0", "--max-turns",
                                      str(turns + 10)], env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", self.log_path.read_text())
            if found:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"ora serve did not start:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        self.base_url = f"http://127.0.0.1:{found.group(1)}"
        while httpx.get(self.base_url + "/healthz", timeout=10).status_code != 200:
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self._log.close()


async def in_process(ora: Any, turns: int) -> tuple[float, list[float]]:
    async def one() -> float:
        start = time.perf_counter()
        result = await ora.arun(PROMPT, mode="standard")
        assert result.status == "ok", (result.status, result.contingencies)
        return time.perf_counter() - start

    start = time.perf_counter()
    latencies = await asyncio.gather(*(one() for _ in range(turns)))
    return time.perf_counter() - start, list(latencies)


async def served(base_url: str, turns: int) -> tuple[float, list[float]]:
    """The turns as HTTP requests, from aiohttp (the lightest client at hand: on two cores the client's CPU
    competes with the server's, and the in-process side pays none)."""
    import aiohttp

    body = {"model": "ora/standard", "messages": [{"role": "user", "content": PROMPT}]}
    connector = aiohttp.TCPConnector(limit=turns + 10)
    async with aiohttp.ClientSession(base_url, connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as client:
        async with client.get("/healthz") as warm:
            await warm.read()

        async def one() -> float:
            start = time.perf_counter()
            async with client.post("/v1/chat/completions", json=body) as response:
                text = await response.read()
                assert response.status == 200 and response.headers["x-ora-status"] == "ok", text[:500]
            return time.perf_counter() - start

        start = time.perf_counter()
        latencies = await asyncio.gather(*(one() for _ in range(turns)))
        return time.perf_counter() - start, list(latencies)


async def first_events(base_url: str, samples: int) -> tuple[list[float], list[float]]:
    body = {"model": "ora/standard", "stream": True, "messages": [{"role": "user", "content": PROMPT}]}
    chat_first: list[float] = []
    events_first: list[float] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        for _ in range(samples):
            start = time.perf_counter()
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                trace_id = response.headers["x-ora-trace-id"]
                lines = response.aiter_lines()
                async for line in lines:
                    if line.startswith("data: "):
                        chat_first.append(time.perf_counter() - start)
                        break
                async with client.stream("GET", f"/v1/ora/turns/{trace_id}/events") as events:
                    async for line in events.aiter_lines():
                        if line.startswith("data: "):
                            events_first.append(time.perf_counter() - start)
                            break
                async for _ in lines:  # the rest of the turn, to its [DONE]
                    pass
            await asyncio.sleep(0.05)
    return chat_first, events_first


def verdict(met: bool) -> str:
    return "MET" if met else "MISS"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  (cores: {os.cpu_count()})")
    with tempfile.TemporaryDirectory(prefix="ora-bench-serve-") as tmp:
        root = Path(tmp)
        config = root / "ora.toml"
        config.write_text(config_text(root), encoding="utf-8")
        from ora_core.api import Ora

        ora = Ora.open(config)
        server = Server(root, config, args.turns)
        try:
            idle_start = rss_mb(server.proc.pid)
            loop = asyncio.new_event_loop()
            loop.run_until_complete(in_process(ora, 5))  # warm both sides: first-use imports, the mode library
            loop.run_until_complete(served(server.base_url, 5))
            rows = []
            for n in range(args.rounds):
                local = loop.run_until_complete(in_process(ora, args.turns))
                remote = loop.run_until_complete(served(server.base_url, args.turns))
                rows.append((local, remote))
                print(f"round {n + 1}: in process {args.turns / local[0]:6.1f} turns/s (p95 "
                      f"{percentile(local[1], 0.95) * 1000:6.1f} ms) | served {args.turns / remote[0]:6.1f} req/s "
                      f"(p95 {percentile(remote[1], 0.95) * 1000:6.1f} ms)")
            chat_first, events_first = loop.run_until_complete(first_events(server.base_url, args.samples))
            loop.close()
            time.sleep(1.0)
            idle_after = rss_mb(server.proc.pid)
        finally:
            server.stop()
    rps_local = statistics.median(args.turns / local[0] for local, _ in rows)
    rps_served = statistics.median(args.turns / remote[0] for _, remote in rows)
    added = statistics.median((percentile(remote[1], 0.95) - percentile(local[1], 0.95)) * 1000
                              for local, remote in rows)
    # the ratio of each interleaved round, their median: the machine's load drifts between rounds, and a
    # round's two sides ran back to back under the same load
    ratio = statistics.median((local[0] / remote[0]) for local, remote in rows)
    ttfe = statistics.median(chat_first) * 1000
    ttfe_p95 = percentile(chat_first, 0.95) * 1000
    events = statistics.median(events_first) * 1000
    targets = [
        ("(a) requests/s, served vs in process", f"{rps_served:.1f} vs {rps_local:.1f}, per round x{ratio:.2f}",
         f">= x{TARGET_RPS}", ratio >= TARGET_RPS),
        ("(a) p95 latency the server adds", f"{added:+.1f} ms", f"<= {TARGET_ADDED_P95_MS:g} ms",
         added <= TARGET_ADDED_P95_MS),
        ("(b) first SSE event after the request", f"median {ttfe:.1f} ms, p95 {ttfe_p95:.1f} ms",
         f"<= {TARGET_TTFE_MS:g} ms", ttfe <= TARGET_TTFE_MS),
    ]
    print()
    for name, figure, target, met in targets:
        print(f"{name:<42} {figure:<34} target {target:<10} {verdict(met)}")
    print(f"{'(b) first event of the events stream':<42} median {events:.1f} ms (informational: the turn's "
          "first step)")
    print(f"{'(c) memory of an idle worker (RSS)':<42} {idle_start:.0f} MB after start-up, {idle_after:.0f} MB "
          f"after {args.rounds * args.turns + 5 + args.samples} turns")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    missed = [name for name, _, _, met in targets if not met]
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
