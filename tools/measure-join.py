#!/usr/bin/python3
"""tools/measure-join.py: what a long prompt arriving mid-generation costs the requests already
decoding (issue 35). Starts `goose serve`, lets --decoders streaming clients generate, sends one
prompt of --prompt-tokens token ids while they do, and prints, for the decoders, the longest gap
between two of their tokens while that prompt was prefilled (from its send to its first token)
next to their longest gap before it arrived.

  build/goose synth --inflate ../shared/models/stories260K.gguf --ctx 8192 -o /tmp/small8k.gguf
  tools/measure-join.py --model /tmp/small8k.gguf
(a model whose tokens have text: the stream sends a chunk per token that adds text)
"""
import argparse
import http.client
import json
import random
import socket
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stream(port, body, stamps, errors=None):
    """POSTs a streaming completion; appends the arrival time of every token chunk."""
    try:
        stream_or_raise(port, body, stamps)
    except (OSError, SystemExit) as e:
        if errors is None:
            raise
        errors.append(str(e))


def stream_or_raise(port, body, stamps):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise SystemExit(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    for line in resp:
        if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
            stamps.append(time.monotonic())


def wait_healthy(port, server):
    for _ in range(600):
        if server.poll() is not None:
            raise SystemExit("goose serve exited")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("goose serve never became healthy")


def max_gap(stamps, begin, end):
    inside = [t for t in stamps if begin <= t <= end]
    before = [t for t in stamps if t < begin][-1:]
    points = before + inside
    after = [t for t in stamps if t > end][:1]
    points += after  # the first token after the prefill closes the last gap
    return max((b - a for a, b in zip(points, points[1:])), default=0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--goose", default="build/goose")
    ap.add_argument("--model", required=True)
    ap.add_argument("--decoders", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=2000)
    ap.add_argument("--spec", default="goose")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    args = ap.parse_args()

    port = free_port()
    server = subprocess.Popen(
        [args.goose, "serve", "-m", args.model, "--port", str(port), "-t", str(args.threads),
         "--parallel", str(args.decoders + 1), "-c", str(args.ctx), "--spec", args.spec,
         "--no-table-cache"], stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, server)
        stamps = [[] for _ in range(args.decoders)]
        errors = []
        decoders = [threading.Thread(target=stream, args=(port, {
            "prompt": f"Once upon a time there was a child number {i}", "max_tokens": 400,
            "stream": True}, stamps[i], errors)) for i in range(args.decoders)]
        for t in decoders:
            t.start()
        deadline = time.monotonic() + 120
        while min(len(s) for s in stamps) < 20:
            if errors or time.monotonic() > deadline:
                raise SystemExit(f"the decoders did not stream 20 chunks each: {errors}")
            time.sleep(0.05)
        # Token ids the tiny vocabulary has (3..499), so that the prompt is valid for any model
        # inflated from stories260K.
        rng = random.Random(7)
        long_prompt = [rng.randrange(3, 500) for _ in range(args.prompt_tokens)]
        joiner = []
        sent = time.monotonic()
        stream(port, {"prompt": long_prompt, "max_tokens": 4, "stream": True}, joiner)
        first = joiner[0]
        for t in decoders:
            t.join()
    finally:
        server.terminate()
        server.wait()

    print(f"{args.prompt_tokens}-token prompt: first token {first - sent:.2f} s after it was sent")
    for i, s in enumerate(stamps):
        before = max_gap(s, s[0], sent - 1e-9)
        during = max_gap(s, sent, first)
        print(f"decoder {i}: longest gap between tokens {during * 1000:.0f} ms while it was "
              f"prefilled ({before * 1000:.0f} ms before it arrived)")


if __name__ == "__main__":
    main()
