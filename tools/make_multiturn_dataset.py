#!/usr/bin/python3
"""Writes a multi-turn chat workload for `folio bench --dataset FILE.jsonl`.

Each conversation starts with a system prompt; every turn re-sends the whole
history (system prompt, every earlier user message and reply) plus a new user
message, as chat clients do. Requests go round-robin over the conversations,
turn by turn, so that between two turns of one conversation the others' prompts
pass through the KV cache: the workload of the prefix cache's host tier
(docs/performance.md). Token ids are random (below --vocab-size), lengths fixed:

    tools/make_multiturn_dataset.py --out /tmp/multiturn.jsonl \\
        --conversations 8 --turns 4 --system 120 --user 100 --reply 40 --output-len 16
"""
import argparse
import json
import random


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--conversations", type=int, default=8)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--system", type=int, default=120, help="system prompt tokens")
    p.add_argument("--user", type=int, default=100, help="tokens of each user message")
    p.add_argument("--reply", type=int, default=40,
                   help="tokens of each earlier reply, as re-sent in the history")
    p.add_argument("--output-len", type=int, default=16, help="tokens generated per turn")
    p.add_argument("--vocab-size", type=int, default=1459)
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    rng = random.Random(a.seed)

    def tokens(n):
        return [rng.randrange(3, a.vocab_size - 2) for _ in range(n)]

    history = [tokens(a.system) for _ in range(a.conversations)]
    with open(a.out, "w") as f:
        for _ in range(a.turns):
            for c in range(a.conversations):
                history[c] += tokens(a.user)
                f.write(json.dumps({"prompt_token_ids": history[c],
                                    "output_len": a.output_len}) + "\n")
                history[c] += tokens(a.reply)
    print(f"{a.out}: {a.conversations * a.turns} requests, prompts of "
          f"{a.system + a.user} to {a.system + a.turns * a.user + (a.turns - 1) * a.reply} tokens")


if __name__ == "__main__":
    main()
