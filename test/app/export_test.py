#!/usr/bin/python3
"""caf-gwtf export, checked by an independent implementation (docs/checkpoints.md, Export).

Trains a small GPT or LLaMA for a few iterations in the embedded cluster with checkpoints,
exports the checkpoint cut, and asks `caf-gwtf eval` for its held-out loss and batch. Then,
without any caf-gwtf code: reads model.safetensors with a plain parser (u64 header size,
JSON header, raw little-endian floats), builds the forward pass of Hugging Face's
GPT2LMHeadModel or LlamaForCausalLM from their definitions (modeling_gpt2.py,
modeling_llama.py: Conv1D, rotate_half RoPE, RMSNorm, SwiGLU) with Debian's python3-torch,
and requires the same loss within 1e-4 relative.

usage: export_test.py gpt|llama --exe CAF_GWTF --source SOURCE_DIR
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        begin, end = info["data_offsets"]
        shape = info["shape"]
        count = end - begin
        assert count == 4 * math.prod(shape), (name, shape, count)
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(shape)
        tensors[name] = t
    return header, tensors


def gpt2_logits(cfg, w, ids):
    # modeling_gpt2.GPT2LMHeadModel in eval mode.
    eps = cfg["layer_norm_epsilon"]
    heads = cfg["n_head"]
    t = ids.shape[1]
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][torch.arange(t)]
    for layer in range(cfg["n_layer"]):
        p = f"transformer.h.{layer}."
        h = F.layer_norm(x, (x.shape[-1],), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D
        q, k, v = qkv.split(x.shape[-1], dim=2)
        split = lambda y: y.view(y.shape[0], t, heads, -1).permute(0, 2, 1, 3)
        q, k, v = split(q), split(k), split(v)
        att = q @ k.transpose(-1, -2) / math.sqrt(v.shape[-1])
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, torch.finfo(att.dtype).min).softmax(-1)
        y = (att @ v).permute(0, 2, 1, 3).reshape(x.shape)
        x = x + (y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"])
        h = F.layer_norm(x, (x.shape[-1],), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        assert cfg["activation_function"] == "gelu"
        m = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + (m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (x.shape[-1],), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    assert cfg["tie_word_embeddings"] is False
    return x @ w["lm_head.weight"].t()


def llama_logits(cfg, w, ids):
    # modeling_llama.LlamaForCausalLM in eval mode.
    eps = cfg["rms_norm_eps"]
    heads = cfg["num_attention_heads"]
    d = cfg["hidden_size"]
    hd = d // heads
    t = ids.shape[1]

    def rms(x, weight):
        var = x.pow(2).mean(-1, keepdim=True)
        return weight * (x * torch.rsqrt(var + eps))

    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = torch.outer(torch.arange(t).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(y):
        y1, y2 = y[..., : y.shape[-1] // 2], y[..., y.shape[-1] // 2:]
        return torch.cat((-y2, y1), dim=-1)

    x = w["model.embed_tokens.weight"][ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms(x, w[p + "input_layernorm.weight"])
        split = lambda y: y.view(y.shape[0], t, heads, hd).transpose(1, 2)
        q = split(h @ w[p + "self_attn.q_proj.weight"].t())
        k = split(h @ w[p + "self_attn.k_proj.weight"].t())
        v = split(h @ w[p + "self_attn.v_proj.weight"].t())
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = q @ k.transpose(2, 3) / math.sqrt(hd)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, torch.finfo(att.dtype).min).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(x.shape)
        x = x + y @ w[p + "self_attn.o_proj.weight"].t()
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        gate = F.silu(h @ w[p + "mlp.gate_proj.weight"].t())
        up = h @ w[p + "mlp.up_proj.weight"].t()
        x = x + (gate * up) @ w[p + "mlp.down_proj.weight"].t()
    x = rms(x, w["model.norm.weight"])
    assert cfg["tie_word_embeddings"] is False
    return x @ w["lm_head.weight"].t()


CONFIG = """\
node: {{data_dir: {dir}/data}}
hosts:
  - {{name: dh, role: data_holder, region: virginia}}
  - {{name: r1, role: relay, stage: 1, region: ohio}}
  - {{name: r2, role: relay, stage: 2, region: oregon}}
model: {{arch: {arch}, layers: 3, hidden: 64, heads: 4, seq_len: 32, vocab: 256, stages: 3}}
data: {{format: text, path: {source}/test/app/good_configs/corpus.txt}}
training: {{seed: 7, iterations: 3, microbatch_size: 2, microbatches_per_holder: 2, lr: 3.0e-3,
           warmup_iterations: 1, checkpoint_every: 1}}
routing: {{gwtf: {{tick_ms: 100}}}}
emulation: {{network: {source}/configs/networks/aws-8.yaml, time_scale: 0}}
"""


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", choices=["gpt", "llama"])
    ap.add_argument("--exe", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix=f"gwtf-export-{args.arch}-")
    try:
        config = os.path.join(work, "cluster.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(dir=work, arch=args.arch, source=args.source))
        run([args.exe, "--config", config])
        out = os.path.join(work, "hf")
        print(run([args.exe, "export", "--config", config, "--checkpoint", os.path.join(work, "data"), "--out", out]),
              end="")
        batch_file = os.path.join(work, "batch.json")
        first_eval = run([args.exe, "eval", "--config", config, "--checkpoint", os.path.join(work, "data"),
                          "--batch-out", batch_file])
        print(first_eval, end="")
        with open(os.path.join(out, "config.json")) as f:
            cfg = json.load(f)
        with open(batch_file) as f:
            batch = json.load(f)
        header, w = read_safetensors(os.path.join(out, "model.safetensors"))
        failures = []
        if header["__metadata__"]["caf_gwtf_iteration"] != "3":
            failures.append(f"exported iteration {header['__metadata__']['caf_gwtf_iteration']}, expected 3")
        expected_arch = "GPT2LMHeadModel" if args.arch == "gpt" else "LlamaForCausalLM"
        if cfg["architectures"] != [expected_arch]:
            failures.append(f"config.json architectures {cfg['architectures']}, expected {expected_arch}")
        seqs = torch.tensor(batch["sequences"], dtype=torch.int64)
        ids, targets = seqs[:, :-1], seqs[:, 1:]
        with torch.no_grad():
            logits = (gpt2_logits if args.arch == "gpt" else llama_logits)(cfg, w, ids)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()
        ours = batch["loss"]
        print(f"{args.arch}: caf-gwtf eval {ours:.8f}, independent forward {loss:.8f}, "
              f"relative difference {abs(loss - ours) / abs(ours):.2e}")
        if not abs(loss - ours) <= 1e-4 * abs(ours):
            failures.append(f"loss {loss} differs from caf-gwtf eval's {ours} by more than 1e-4 relative")
        # A trained model, not the initialisation: far below a uniform guess.
        if not loss < math.log(256) - 0.3:
            failures.append(f"loss {loss} is not below a uniform guess (ln 256 = {math.log(256):.3f}) by 0.3")
        # Import: the exported directory becomes checkpoints of iteration 0 for every host; the
        # same weights give eval's loss to the last digit, and training resumes from them.
        imported = os.path.join(work, "imported")
        print(run([args.exe, "import", "--config", config, "--from", out, "--checkpoint", imported]), end="")
        again = run([args.exe, "eval", "--config", config, "--checkpoint", imported])
        print(again, end="")
        loss_of = lambda text: [l for l in text.splitlines() if l.startswith("eval: ")][0].split("held-out loss ")[1].split()[0]
        if loss_of(again) != loss_of(first_eval):
            failures.append(f"imported weights give loss {loss_of(again)}, the exported ones {loss_of(first_eval)}")
        resumed = run([args.exe, "--config", config, "--set", f"node.data_dir={imported}", "--resume"])
        if "# resuming at iteration 0" not in resumed or "# dh resumed stage 0 at iteration 0" not in resumed:
            failures.append("training did not resume from the imported checkpoints:\n" + resumed)
        # A damaged model.safetensors is refused, naming the file and what is wrong.
        with open(os.path.join(out, "model.safetensors"), "r+b") as f:
            (header_size,) = struct.unpack("<Q", f.read(8))
            f.truncate(8 + header_size + 1000)  # inside the first tensor's data
        r = subprocess.run([args.exe, "import", "--config", config, "--from", out, "--checkpoint",
                            os.path.join(work, "bad")], capture_output=True, text=True, timeout=60)
        if r.returncode != 1 or "model.safetensors: " not in r.stderr or "outside the data section" not in r.stderr:
            failures.append(f"import of a truncated file: exit {r.returncode}, {r.stderr!r}")
        # A config of another run (another seed): its checkpoints are refused, naming why.
        other = os.path.join(work, "other.yaml")
        with open(other, "w") as f:
            f.write(CONFIG.format(dir=work, arch=args.arch, source=args.source).replace("seed: 7", "seed: 8"))
        r = subprocess.run([args.exe, "eval", "--config", other, "--checkpoint", os.path.join(work, "data")],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 1 or "stage 0 has no valid checkpoint" not in r.stderr \
                or "(model, seed, data or schedule changed)" not in r.stdout:
            failures.append(f"eval with another seed: exit {r.returncode}, {r.stdout!r} {r.stderr!r}")
        for f in failures:
            print("FAILED:", f)
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
