"""transformers' own numbers for test/engines/local/hf-onnx.test.ts (the reference the ONNX export
run by mempo's runtime is compared with). Never imports mempo.

    python3 hf_reference.py greedy MODEL_DIR REQUEST.json OUT_PREFIX
        REQUEST: {"prompts": [[ids...], ...], "new_tokens": N}
        writes OUT_PREFIX.json {"tokens": [[ids...]...], "steps": [n logits rows per prompt]} and
        OUT_PREFIX.f32: per prompt, the prompt's logits [len, V] (one teacher-forced pass) then
        generate(do_sample=False)'s logits at each new token [N, V], float32 little-endian.
    python3 hf_reference.py score MODEL_DIR REQUEST.json OUT.json
        REQUEST: {"items": [{"prompt": [ids], "tokens": [ids]}]}
        writes {"logprobs": [[log_softmax(logits)[token] per token] ...]} (float64 math)
    python3 hf_reference.py chat MODEL_DIR REQUEST.json OUT.json
        REQUEST: {"conversations": [[{"role", "content"}, ...], ...]}
        writes {"ids": [[ids of the tokenizer's chat template with the generation prompt] ...]}
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM


def load(model_dir):
    lm = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    return lm.eval()


def greedy(lm, req, prefix):
    tokens, steps = [], []
    with open(prefix + ".f32", "wb") as out, torch.no_grad():
        for prompt in req["prompts"]:
            ids = torch.tensor([prompt])
            out.write(lm(input_ids=ids).logits[0].float().numpy().astype("<f4").tobytes())
            g = lm.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=req["new_tokens"],
                            output_logits=True, return_dict_in_generate=True,
                            pad_token_id=lm.config.pad_token_id if lm.config.pad_token_id is not None else 0)
            new = g.sequences[0, len(prompt):].tolist()
            tokens.append(new)
            steps.append(len(g.logits))
            for row in g.logits:
                out.write(row[0].float().numpy().astype("<f4").tobytes())
    with open(prefix + ".json", "w") as f:
        json.dump({"tokens": tokens, "steps": steps}, f)


def score(lm, req, path):
    res = []
    with torch.no_grad():
        for it in req["items"]:
            ids = torch.tensor([it["prompt"] + it["tokens"]])
            logp = torch.log_softmax(lm(input_ids=ids).logits[0].double(), dim=-1)
            n = len(it["prompt"])
            res.append([logp[n - 1 + i, t].item() for i, t in enumerate(it["tokens"])])
    with open(path, "w") as f:
        json.dump({"logprobs": res}, f)


def chat(model_dir, req, path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = []
    for conv in req["conversations"]:
        text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
        ids.append(tok(text, add_special_tokens=False)["input_ids"])
    with open(path, "w") as f:
        json.dump({"ids": ids}, f)


if __name__ == "__main__":
    mode, model_dir, req_path, out = sys.argv[1:5]
    with open(req_path) as f:
        request = json.load(f)
    if mode == "chat":
        chat(model_dir, request, out)
    else:
        {"greedy": greedy, "score": score}[mode](load(model_dir), request, out)
