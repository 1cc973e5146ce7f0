#!/usr/bin/env python3
"""llama.cpp as a batched peer for `folio bench`: the same workload, run by
llama.cpp's own batched decoding through llama-cpp-python's low-level API.

It loads the GGUF file once, then reads workloads from stdin, one JSON object
per line, and answers each with one JSON line of per-request timings, the
shape `folio bench` records for itself (times in seconds from the start of the
run):

    in:  {"requests": [{"prompt": [ids...], "output_len": 128, "arrival_s": 0.0, "ignore_eos": true}, ...],
          "max_concurrency": 0}
    out: {"duration_s": ..., "requests": [{"arrival_s", "submit_s", "event_times_s": [...],
          "event_tokens": [...], "finish_s", "prompt_tokens", "output_tokens", "output_ids": [...]}, ...]}

What it does, to be a fair batched peer:
- One llama_context with --max-num-seqs sequence slots (n_seq_max), a per-slot
  context of --max-seq-len tokens, and llama.cpp's split (non-unified) KV
  cache, so that each sequence attends only to its own cells; f16 K and V, as
  folio's default; flash attention as llama.cpp chooses it by default.
- A continuous-batching loop, the way folio's scheduler and llama-server work:
  every step builds one llama_batch holding the next token of every decoding
  sequence (one sequence id each) and then prompt chunks of sequences still in
  prefill, up to --max-num-batched-tokens tokens in all (n_batch), calls
  llama_decode once, and takes the logits of each sequence's last token with
  llama_get_logits_ith. Requests are admitted as slots free up (in arrival
  order, honouring arrival times and max_concurrency); a finished sequence's
  KV is cleared at once (llama_memory_seq_rm) and its slot reused.
- Greedy sampling (argmax of the logits, in numpy) with end-of-generation
  ignored, so every request generates exactly output_len tokens, as folio does
  with ignore_eos; a request with "ignore_eos": false (text datasets) stops at
  an end-of-generation token (llama_vocab_is_eog), which it keeps, as folio
  counts it.
- The same thread count for generation and prompt processing (--threads),
  with OpenMP's passive wait policy unless the environment sets another
  (see below).

What it does not do: no prefix caching across requests (folio benchmarks
turn theirs off or use fresh prompts), no speculative decoding, no sampler
chain (temperature, penalties), no detokenization or HTTP; the timings are
taken in this one thread right after sampling, so they carry no client or
streaming overhead (folio's in-process driver takes its timings on client
threads, which share the cores with the engine).

Run by `folio bench --peer llama.cpp`; by hand:
    echo '{"requests":[{"prompt":[1,2,3],"output_len":8,"arrival_s":0}]}' | \
        build/venv-ref/bin/python bench/llama_cpp_peer.py --model M.gguf --threads 2
"""
import argparse
import collections
import ctypes
import json
import os
import sys
import time

# llama.cpp's CPU threads are OpenMP threads, which by default spin for a
# long while when idle. On a machine shared with other work (ours) spinning
# threads fight the other processes for the cores and llama.cpp drops to a
# fraction of its speed at random: SmolLM2 decode at 2 threads on our 2-core
# machine at load average ~10 ran 2.4 tok/s with the default policy and
# 20 tok/s with passive waiting (sleep when idle, as folio's pool does after
# a short spin), interleaved. So the peer waits passively unless the
# environment sets OMP_WAIT_POLICY (set it to active to measure the spin).
# `folio bench --peer` stops this process (SIGSTOP) between its turns, so
# with either policy its idle threads cannot take the cores from folio's.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402

import llama_cpp as L  # noqa: E402


@ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
def _quiet_log(level, text, user_data):
    # llama.cpp logs every load and context creation at length; keep errors.
    if level == 4:  # GGML_LOG_LEVEL_ERROR
        sys.stderr.write(text.decode("utf-8", "replace"))


class Peer:
    def __init__(self, args):
        L.llama_log_set(_quiet_log, None)
        L.llama_backend_init()
        mparams = L.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self.model = L.llama_model_load_from_file(args.model.encode(), mparams)
        if not self.model:
            raise SystemExit(f"llama_cpp_peer: cannot load {args.model}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.num_slots = args.max_num_seqs
        self.n_batch = args.max_num_batched_tokens
        if self.num_slots > self.n_batch:
            raise SystemExit("llama_cpp_peer: --max-num-seqs must not exceed --max-num-batched-tokens "
                             "(every decoding sequence needs a place in the batch)")
        self.seq_len = args.max_seq_len
        cparams = L.llama_context_default_params()
        cparams.n_seq_max = self.num_slots
        cparams.n_ctx = self.num_slots * self.seq_len  # split evenly among the slots
        cparams.n_batch = self.n_batch
        cparams.n_ubatch = self.n_batch
        cparams.n_threads = args.threads
        cparams.n_threads_batch = args.threads
        cparams.kv_unified = False
        cparams.type_k = cparams.type_v = 1  # GGML_TYPE_F16
        cparams.no_perf = True
        self.ctx = L.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise SystemExit("llama_cpp_peer: cannot create the context (too little memory for the KV cache?)")
        self.mem = L.llama_get_memory(self.ctx)
        self.batch = L.llama_batch_init(self.n_batch, 0, 1)
        # numpy views of the batch's arrays: filling them costs no per-token ctypes call.
        self.b_token = np.ctypeslib.as_array(self.batch.token, shape=(self.n_batch,))
        self.b_pos = np.ctypeslib.as_array(self.batch.pos, shape=(self.n_batch,))
        self.b_nseq = np.ctypeslib.as_array(self.batch.n_seq_id, shape=(self.n_batch,))
        self.b_logits = np.ctypeslib.as_array(self.batch.logits, shape=(self.n_batch,))
        self.b_nseq[:] = 1

    def run(self, work):
        reqs = work["requests"]
        max_conc = work.get("max_concurrency") or self.num_slots
        max_conc = min(max_conc, self.num_slots)
        for r in reqs:
            if len(r["prompt"]) + r["output_len"] > self.seq_len:
                raise SystemExit(f"llama_cpp_peer: a request needs {len(r['prompt']) + r['output_len']} tokens "
                                 f"but --max-seq-len is {self.seq_len}")
        out = [{"arrival_s": r.get("arrival_s", 0.0), "submit_s": None, "event_times_s": [], "event_tokens": [],
                "finish_s": None, "prompt_tokens": len(r["prompt"]), "output_tokens": 0, "output_ids": []}
               for r in reqs]
        waiting = collections.deque(range(len(reqs)))
        free_slots = list(range(self.num_slots - 1, -1, -1))
        # slot -> [request index, tokens fed so far (position of the next one), last sampled token]
        active = {}
        prefill_order = []  # slots still in prefill, in admission order
        start = time.perf_counter()
        now = 0.0
        while waiting or active:
            now = time.perf_counter() - start
            while waiting and free_slots and len(active) < max_conc and out[waiting[0]]["arrival_s"] <= now:
                i = waiting.popleft()
                slot = free_slots.pop()
                active[slot] = [i, 0, None]
                prefill_order.append(slot)
                out[i]["submit_s"] = now
            if not active:
                time.sleep(max(0.0, out[waiting[0]]["arrival_s"] - now))
                continue
            # Decode tokens first, one per decoding sequence; then prompt chunks.
            n = 0
            rows = []  # (batch index, slot) whose logits are sampled
            for slot, (i, fed, last) in active.items():
                if last is None:
                    continue
                self.b_token[n] = last
                self.b_pos[n] = fed
                self.batch.seq_id[n][0] = slot
                self.b_logits[n] = 1
                rows.append((n, slot))
                active[slot][1] = fed + 1
                n += 1
            for slot in prefill_order:
                if n >= self.n_batch:
                    break
                i, fed, _ = active[slot]
                prompt = reqs[i]["prompt"]
                take = min(len(prompt) - fed, self.n_batch - n)
                self.b_token[n:n + take] = prompt[fed:fed + take]
                self.b_pos[n:n + take] = np.arange(fed, fed + take)
                for k in range(n, n + take):
                    self.batch.seq_id[k][0] = slot
                self.b_logits[n:n + take] = 0
                if fed + take == len(prompt):
                    self.b_logits[n + take - 1] = 1
                    rows.append((n + take - 1, slot))
                active[slot][1] = fed + take
                n += take
            prefill_order = [s for s in prefill_order if active[s][1] < len(reqs[active[s][0]]["prompt"])]
            self.batch.n_tokens = n
            rc = L.llama_decode(self.ctx, self.batch)
            if rc != 0:
                raise SystemExit(f"llama_cpp_peer: llama_decode returned {rc}")
            for idx, slot in rows:
                logits = np.ctypeslib.as_array(L.llama_get_logits_ith(self.ctx, idx), shape=(self.n_vocab,))
                token = int(logits.argmax())
                i = active[slot][0]
                o = out[i]
                o["output_ids"].append(token)
                o["output_tokens"] += 1
                t = time.perf_counter() - start
                o["event_times_s"].append(t)
                o["event_tokens"].append(1)
                stop = not reqs[i].get("ignore_eos", True) and L.llama_vocab_is_eog(self.vocab, token)
                if stop or o["output_tokens"] >= reqs[i]["output_len"]:
                    o["finish_s"] = t
                    L.llama_memory_seq_rm(self.mem, slot, -1, -1)
                    del active[slot]
                    free_slots.append(slot)
                else:
                    active[slot][2] = token
        # As folio measures it: first send to last finish.
        duration = max(o["finish_s"] for o in out) - min(o["submit_s"] for o in out) if out else 0.0
        return {"duration_s": duration, "requests": out}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--threads", type=int, required=True, help="threads for prompt and generation")
    ap.add_argument("--max-num-seqs", type=int, default=64, help="sequence slots (n_seq_max)")
    ap.add_argument("--max-num-batched-tokens", type=int, default=512, help="tokens per llama_decode (n_batch)")
    ap.add_argument("--max-seq-len", type=int, default=2048, help="context per slot, prompt plus output")
    args = ap.parse_args()
    peer = Peer(args)
    print(json.dumps({"ready": True, "n_vocab": peer.n_vocab, "llama_cpp_python": L.__version__,
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "threads": args.threads,
                      "slots": args.max_num_seqs, "n_batch": args.max_num_batched_tokens,
                      "max_seq_len": args.max_seq_len,
                      "system_info": L.llama_print_system_info().decode().strip()}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        result = peer.run(json.loads(line))
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
