"""Every model call verbatim in the trace: the exact messages sent, the parameters, the raw output,
finish reason, usage, latency, planned and effective backend, and why the call was made — in the
step's JSON (``calls``) and its Markdown (collapsed) — so a reader can answer "what exactly was this
model asked, and what did it say, at every attempt" from the files alone."""

from __future__ import annotations

from ora_core.engine.prompts import DIRECTIVE_MARKER

VAULT = [{"text": "Harness vendors bundle models with tooling.", "source": "notes/harness.md"}]
CONCEPT_ONLY = {"retrieval": {"streams": {"conversation": False, "relationship": False}}}
STEP = "gear2-analyst"
REFUSAL = "I cannot help with that request. I won't do it.\nCONFIDENCE: 0.90"


def _gear2(gears, *, replies=None, first=(), verifier="scripted-verifier", retriever=None, secret=None):
    rules = gears.rules(first=list(first))
    config = {"verification": {"verifier": verifier, "final_verifier": verifier, "same_lineage": "allow"},
              **CONCEPT_ONLY}
    if replies is not None:
        config["backends"] = {"local": {"options": {"rules": rules}},
                              "ana": {"type": "scripted", "model": "scripted-ana", "family": "ana",
                                      "options": {"replies": list(replies), "rules": rules}}}
        config["roles"] = {"analyst": "ana"}
    if secret:
        config.setdefault("backends", {}).setdefault("local", {})["api_key"] = secret
    plugins = [gears.Plugin(verifiers=[gears.Verifier()], retrievers=[retriever or gears.Retriever(VAULT)])]
    return gears.run(rules=rules, mode="standard", prompt="Explain why the harness shift matters.",
                     plugins=plugins, **config)


def test_a_regenerated_call_keeps_the_discarded_output_and_says_why_it_was_made(gears):
    result, trace, rt = _gear2(gears, replies=[REFUSAL, gears.reply("HEALTHY")])
    step = trace.step(STEP)
    first, second = step["calls"]
    assert (first["step_call"], second["step_call"]) == (1, 2) and second["call"] == first["call"] + 1
    assert first["why"] == "first attempt" and first["output"] == REFUSAL
    assert second["why"].startswith("regenerate: ") and "refusal" in second["why"]
    assert str(first["call"]) in second["why"]
    assert second["output"].startswith("HEALTHY")
    assert step["output"]["attempts"][0]["discarded_calls"] == [first["call"]]
    # the exact messages the backend received, system prompt and directive included
    sent = [c for c in rt.pool._built["ana"].calls]
    assert [[m["content"] for m in c["messages"]] for c in (first, second)] == [[m.content for m in c] for c in sent]
    assert DIRECTIVE_MARKER in first["messages"][0]["content"] and first["messages"][0]["role"] == "system"
    for call in (first, second):
        assert (call["role"], call["planned_backend"], call["backend"], call["family"]) == \
            ("analyst", "ana", "ana", "ana")
        assert call["effective_model"] == "scripted-ana" and call["finish_reason"] == "stop"
        assert call["params"]["model"] == "scripted-ana" and call["params"]["max_tokens"] >= 1
        assert call["prompt_tokens"] > 0 and call["latency_s"] >= 0
    assert "## Model calls" in trace.markdown(STEP) and "<details>" in trace.markdown(STEP)
    assert "regenerate: " in trace.markdown(STEP) and REFUSAL.splitlines()[0] in trace.markdown(STEP)


def test_a_retry_call_says_which_failure_it_retries(gears):
    low = gears.reply("LOW", confidence=0.4)
    _, trace, _ = _gear2(gears, replies=[low, gears.reply("RETRIED")])
    first, second = trace.step(STEP)["calls"]
    assert first["why"] == "first attempt"
    assert second["why"].startswith("retry 1: confidence 0.40 below 0.65")
    assert "RETRY CONTEXT" in second["messages"][1]["content"]


def test_a_supplement_round_keeps_the_request_the_resubmission_and_the_fetched_text_with_provenance(gears):
    request = ("## SUPPLEMENTAL RAG REQUEST\nGap: the package does not say who funds the harness consortium\n"
               "Query terms: harness consortium funding\nWhy: the benefit claim depends on it")
    fact = "The harness consortium is funded by three cloud vendors."
    retriever = gears.Retriever([{"text": fact, "source": "notes/consortium.md"}])
    first = [gears.role(r"(?s)SUPPLEMENTAL RAG RESULT.*consortium", gears.reply("WITH-SUPPLEMENT"), on="user"),
             gears.role(r"ROLE: ANALYST \(gear 2\)", request)]
    _, trace, _ = _gear2(gears, first=first, retriever=retriever)
    asked, resubmitted = trace.step(STEP)["calls"]
    assert asked["output"] == request  # the whole output that carried the request
    assert resubmitted["why"] == "first attempt; supplement round 1"
    assert "## SUPPLEMENTAL RAG RESULT" in resubmitted["messages"][-1]["content"]
    [line] = trace.jsonl("supplemental-rag.jsonl")
    [fetched] = line["fetched"]
    assert fetched["text"] == fact and fetched["provenance"]["source"] == "notes/consortium.md"
    assert fetched["id"] and fetched["stream"] == "concept"


def test_the_verifier_s_calls_are_recorded_in_its_step(gears):
    _, trace, _ = _gear2(gears, verifier="model")
    [call] = trace.step("gear2-cycle1-verify")["calls"]
    assert call["role"] == "verifier" and call["why"] == "verify: gear2-cycle1-verify"
    assert "ROLE: VERIFIER" in call["messages"][0]["content"] and call["output"].rstrip().endswith("VERDICT: PASS")


def test_the_result_s_ledger_stays_small_while_the_trace_keeps_every_call(gears):
    result, trace, _ = _gear2(gears)
    dumped = result.model_dump(mode="json")
    assert all(set(c) >= {"call", "step", "backend", "why"} and not set(c) & {"messages", "output", "params"}
               for c in dumped["runtime_role_models"])
    assert all("messages" not in c for c in trace.turn()["runtimeRoleModels"])
    assert all(not c.messages and c.output is None for c in result.runtime_role_models)
    numbers = sorted(c["call"] for s in trace.steps() for c in trace.step(s).get("calls", []))
    assert numbers == list(range(1, len(result.runtime_role_models) + 1))


def test_a_secret_in_what_was_sent_never_reaches_the_call_records(gears):
    secret = "sk-test-9f8e7d6c5b4a39281706"
    rules_reply = gears.reply("ANALYSIS", extra=f"the key is {secret}")
    _, trace, _ = _gear2(gears, replies=[rules_reply], secret=secret)
    text = "".join(p.read_text() for p in trace.path.iterdir() if p.is_file())
    assert secret not in text and "[REDACTED]" in trace.step(STEP)["calls"][0]["output"]


def test_ledger_only_keeps_every_call_numbered_and_explained_without_the_prompts(gears):
    rules = gears.rules()
    result, trace, _ = gears.run(rules=rules, mode="standard", prompt="Explain why the harness shift matters.",
                                 plugins=[gears.Plugin(verifiers=[gears.Verifier()],
                                                       retrievers=[gears.Retriever(VAULT)])],
                                 verification={"verifier": "scripted-verifier"}, trace={"calls": "ledger"},
                                 **CONCEPT_ONLY)
    [call] = trace.step(STEP)["calls"]
    assert call["why"] == "first attempt" and call["backend"] == "local" and call["call"] == 2
    assert not {"messages", "params", "output"} & set(call)
    assert not result.runtime_role_models[1].messages, "the result's ledger never carries the call verbatim"
