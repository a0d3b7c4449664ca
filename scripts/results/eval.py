"""Asks a local model questions about real tool results, as sent and as the gateway compacts
them, and prints the answer rate of each (issue 54).

usage: python scripts/results/eval.py DUMP [QUESTIONS]
  DUMP:      what `cargo run --example result_tokens -- --dump DUMP` wrote (each result's text
             as sent, with result_format = "json" and "toon")
  QUESTIONS: JSON [{"file", "q", "a": [accepted answers, lowercase substrings]}]
             (default: scripts/results/questions.json)
env: LLM_URL (an OpenAI-compatible /v1 base, e.g. the one scripts/eval/llm_server.py prints),
     CONDITIONS (default "original,toon")
Greedy decoding; an answer counts when it contains one of the accepted strings (ignoring case).
Questions are asked file by file, each condition's prompt starting with the same result text,
so the server's prompt cache computes each result once per condition.
"""
import json, os, sys, time, urllib.request

dump = {d["file"]: d for d in json.load(open(sys.argv[1]))}
questions = json.load(open(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "questions.json")))
url = os.environ["LLM_URL"].rstrip("/") + "/chat/completions"
conditions = os.environ.get("CONDITIONS", "original,toon").split(",")


def ask(result, question):
    body = {
        "messages": [
            {"role": "system", "content": "You answer questions about a tool result. Reply with the answer only: a few words, no explanation."},
            {"role": "user", "content": f"Tool result:\n{result}\n\nQuestion: {question}"},
        ],
        "temperature": 0, "max_tokens": 24, "seed": 1,
    }
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        reply = json.load(r)
    return reply["choices"][0]["message"]["content"].strip(), reply.get("usage", {}).get("prompt_tokens", 0)


rows, score = [], {c: 0 for c in conditions}
prompt = {c: 0 for c in conditions}
for cond in conditions:
    for item in questions:
        text = dump[item["file"]][cond]
        t0 = time.time()
        answer, tokens = ask(text, item["q"])
        ok = any(a in answer.lower() for a in item["a"])
        score[cond] += ok
        prompt[cond] += tokens
        rows.append((cond, item["file"], item["q"], answer, ok, time.time() - t0))
        print(f"{cond:8} {'ok ' if ok else 'NO '} {item['file']}: {item['q']} -> {answer!r} ({time.time() - t0:.0f} s)", flush=True)
n = len(questions)
print("\n| condition | answered | rate | prompt tokens (model's count) |")
print("|---|---:|---:|---:|")
for c in conditions:
    print(f"| {c} | {score[c]}/{n} | {100 * score[c] / n:.0f} % | {prompt[c]} |")
