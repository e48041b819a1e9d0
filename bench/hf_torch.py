"""The torch side of bench/hf.mjs: transformers' own `generate` and a plain torch training step on a
Hugging Face directory, as a worker that bench/hf.mjs drives one request at a time, so that its
rounds interleave with the embedded runtime's and the learner's in one run (no process start or
model load inside a timed region).

    python3 bench/hf_torch.py MODEL_DIR THREADS

stdin: one JSON request a line; stdout: one JSON answer a line (anything else goes to stderr).
  {"op": "generate", "ids": [[...], ...], "new": N}  greedy, every row the same length, no eos stop:
      -> {"s": wall seconds of generate, "tokens": [[new ids], ...]}
  {"op": "train", "ids": [[...], ...], "target_start": [..]}  one step: right-padded batch, the
      model's full logits, cross-entropy summed over the targets / their count, backward, clip at
      max_grad_norm, AdamW (lr, weight_decay, betas, eps as given) -> {"s": wall seconds}
"""
import json
import sys
import time

import torch
import transformers


def main() -> None:
    model_dir, threads = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(threads)
    transformers.utils.logging.disable_progress_bar()
    lm = transformers.AutoModelForCausalLM.from_pretrained(model_dir, use_safetensors=True, trust_remote_code=False,
                                                           dtype=torch.float32)
    # every row decodes exactly N tokens: no eos in the generation config (the embedded side passes no eos ids either)
    lm.generation_config.eos_token_id = None
    lm.generation_config.pad_token_id = 0
    opt = None
    print(json.dumps({"ready": True, "torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "generate":
            ids = torch.tensor(req["ids"], dtype=torch.int64)
            lm.eval()
            with torch.no_grad():
                t = time.perf_counter()
                out = lm.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=req["new"],
                                  do_sample=False, num_beams=1, use_cache=True)
                s = time.perf_counter() - t
            print(json.dumps({"s": s, "tokens": out[:, ids.shape[1]:].tolist()}), flush=True)
        elif req["op"] == "train":
            o = req["optim"]
            if opt is None:
                opt = torch.optim.AdamW(lm.parameters(), lr=o["lr"], weight_decay=o["weight_decay"],
                                        betas=tuple(o["betas"]), eps=o["eps"])
            rows = req["ids"]
            T = max(len(r) for r in rows)
            ids = torch.zeros((len(rows), T), dtype=torch.int64)
            mask = torch.zeros((len(rows), T), dtype=torch.int64)
            labels = torch.full((len(rows), T), -100, dtype=torch.int64)
            for i, (r, ts) in enumerate(zip(rows, req["target_start"])):
                ids[i, :len(r)] = torch.tensor(r)
                mask[i, :len(r)] = 1
                labels[i, ts:len(r)] = torch.tensor(r[ts:])
            lm.train()
            t = time.perf_counter()
            logits = lm(input_ids=ids, attention_mask=mask).logits
            # position p predicts token p + 1
            lp = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                   labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum")
            loss = lp / int((labels != -100).sum())
            loss.backward()
            if o["max_grad_norm"] > 0:
                torch.nn.utils.clip_grad_norm_(lm.parameters(), o["max_grad_norm"])
            opt.step()
            opt.zero_grad(set_to_none=True)
            s = time.perf_counter() - t
            print(json.dumps({"s": s, "loss": float(loss.detach())}), flush=True)
        else:
            raise SystemExit(f"hf_torch.py: unknown op {req['op']!r}")


if __name__ == "__main__":
    main()
