"""Accuracy-preserving int8 for the fused ONNX encoder: per-token activations, per-channel weights.

ONNX Runtime's ``quantize_dynamic`` quantises each MatMul's activations with **one** scale per
tensor (the whole batch). A few tokens and channels of a BERT layer carry values 10-100x larger
than the rest, so that scale leaves most values with a handful of levels: on MiniLM the pooled
vectors drift to a minimum cosine of ~0.988 with the PyTorch ones (target 0.999).

This module rewrites a MatMul ``Y = X W`` (``W`` a constant ``K x N``) instead as

- weights: ``Wq[k, n] = round(W[k, n] / w_n)`` in int8, ``w_n = max_k |W[k, n]| / 127``
  (one scale per output channel);
- activations, one scale per **row** (token): ``s_r = max(max_k |X[r, k]| / 127, 1e-12)``,
  ``Xq = round(X / s_r) + 128`` in uint8 (symmetric, so the zero point is the constant 128
  that ``MatMulInteger`` accepts);
- ``Y[r, n] = s_r * w_n * sum_k (Xq[r, k] - 128) Wq[k, n]`` with ``MatMulIntegerToFloat``
  (u8 x s8 integer kernels, VNNI where the CPU has it) and one ``Mul`` by ``s_r``.

Two refinements, each measured on DL19 passages (see ``benchmarks/retrieval_bench.py``):

- **GELU inputs are shifted, not centred.** ``GELU(x) >= -0.16997``, so the FFN output
  projection reads ``X + 0.17 >= 0``, quantised unsigned with zero point 0 (8 bits of range,
  not 7); the constant ``-0.17 * sum_k Wdeq[k, n]`` is added back after the product.
- **Channel smoothing** (as in SmoothQuant) for the inputs of the FFN input projection and the
  attention output projection: ``X W = (X / c) (c W)`` with
  ``c_k = max|X_k|^0.5 / max|W_k|^0.5``; ``max|X_k|`` comes from a calibration pass of the
  fp32 model over :func:`calibration_texts` (sentences written for this module and seeded
  paragraphs of them; not the benchmark passages).
  Outlier channels then share their range with the weights.

The first transformer layer keeps fp32 MatMuls (it was the most sensitive in a per-layer
search). The attention block's fused Q/K/V projection (``Attention``) stays fp32 as well.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from workbench import lazylibs

GELU_FLOOR = 0.17  # GELU(x) >= -0.16997 for all x
SMOOTH_ALPHA = 0.5
CALIBRATION_SEED = 12
CALIBRATION_TEXTS = 40
SMOOTHED_ROLES = ("intermediate", "attention/output")  # node-name parts of the smoothed MatMuls
FP32_LAYERS = ("layer.0/",)  # node-name parts of the MatMuls left in fp32
_GELU_OPS = ("BiasGelu", "Gelu", "FastGelu")


# Calibration sentences written for this module: varied topics, lengths, numbers, names and
# punctuation, like the passages a corpus holds. Only their per-channel activation maxima are used.
_CALIBRATION_SENTENCES = (
    "The committee approved the budget on 12 March 2021 after a long debate about school funding.",
    "How long does it take to boil an egg?",
    "Symptoms of the flu include fever, cough, sore throat, muscle aches and fatigue.",
    "To reset the router, hold the button on the back for ten seconds until the light blinks.",
    "The Treaty of Versailles was signed in 1919 and formally ended the First World War.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Our refund policy allows returns within 30 days if the item is unused and in its box.",
    "what is the average salary of a nurse in texas",
    "Mix two cups of flour with one teaspoon of salt, then add warm water slowly.",
    "The API returns HTTP 429 when a client sends more than 100 requests per minute.",
    "Mount Everest, at 8,849 metres, is the highest mountain above sea level.",
    "Interest rates rose by 0.25 percentage points, the third increase this year.",
    "She scored 27 points as the team won the championship in overtime.",
    "Employees must complete the security training before they receive access to customer data.",
    "The mitochondria is the powerhouse of the cell.",
    "Side effects may include nausea, dizziness or headache; call your doctor if they persist.",
    "Shakespeare wrote Hamlet around 1600; it is his longest play.",
    "A 401(k) is a retirement savings plan sponsored by an employer in the United States.",
    "Press Ctrl+Shift+T to reopen the last closed tab.",
    "The river floods every spring, so the village built a levee in 1952.",
    "Is it safe to take ibuprofen with coffee?",
    "Quantum computers use qubits, which can represent 0 and 1 at the same time.",
    "The contract ends on 31 December unless either party gives 60 days' notice.",
    "Paris is the capital and most populous city of France, with about 2.1 million residents.",
    "Bananas are rich in potassium and vitamin B6.",
    "The error 'permission denied' means the user lacks write access to the directory.",
    "Dogs were domesticated from wolves more than 15,000 years ago.",
    "In 2019 the company reported revenue of $4.2 billion, up 8% from the year before.",
    "The median household income in the county was $52,000 (2018 estimate).",
    "Ask the help desk to unlock your account after five failed sign-in attempts.",
    "Volcanoes form where tectonic plates diverge or converge.",
    "The recipe serves four and takes about 45 minutes, including 15 minutes of preparation.",
)


def calibration_texts(seed: int = CALIBRATION_SEED, n: int = CALIBRATION_TEXTS) -> list[str]:
    """:data:`_CALIBRATION_SENTENCES` one by one, plus ``n`` seeded shuffles of them joined into
    paragraphs of 3-30 sentences (long inputs reach the 256-token truncation)."""
    rng = random.Random(seed)
    texts = list(_CALIBRATION_SENTENCES)
    for _ in range(n):
        texts.append(" ".join(rng.sample(_CALIBRATION_SENTENCES, rng.randint(3, 30))))
    return texts


def _quantisable(model) -> list:
    constants = {i.name for i in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in constants]


def activation_maxima(model_path: Path, texts: Sequence[str], feed: Callable[[str], dict],
                      options=None) -> dict[str, np.ndarray]:
    """Per-channel ``max |X_k|`` of every quantisable MatMul input over ``texts`` (fp32 model),
    one text per run; ``options``: the session's ``onnxruntime.SessionOptions`` (None: ONNX
    Runtime's defaults)."""

    model = lazylibs.onnx.load(str(model_path))
    inputs = sorted({n.input[0] for n in _quantisable(model)})
    for name in inputs:
        model.graph.output.append(lazylibs.onnx.helper.make_tensor_value_info(name, lazylibs.onnx.TensorProto.FLOAT, None))
    session = lazylibs.onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    maxima: dict[str, np.ndarray] = {}
    for text in texts:
        for name, value in zip(inputs, session.run(inputs, feed(text)), strict=True):
            peak = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], peak) if name in maxima else peak
    return maxima


def rewrite(source: Path, target: Path, maxima: dict[str, np.ndarray]) -> int:
    """Write ``target``: ``source`` with its MatMuls in per-token int8 (module docstring).
    Returns how many MatMuls were rewritten."""

    model = lazylibs.onnx.load(str(source))
    constants = {i.name: i for i in model.graph.initializer}
    producer = {out: node for node in model.graph.node for out in node.output}
    shared = {"rq_inv127": np.float32(1 / 127), "rq_inv255": np.float32(1 / 255), "rq_eps": np.float32(1e-12),
              "rq_one": np.float32(1.0), "rq_zp128": np.uint8(128), "rq_zp0": np.uint8(0),
              "rq_shift": np.float32(GELU_FLOOR)}
    added = [lazylibs.onnx.numpy_helper.from_array(np.array(v), k) for k, v in shared.items()]
    nodes, done = [], 0
    for node in model.graph.node:
        if not (node.op_type == "MatMul" and node.input[1] in constants
                and not any(part in node.name for part in FP32_LAYERS)):
            nodes.append(node)
            continue
        done += 1
        p = f"rq{done}"
        x = node.input[0]
        w = lazylibs.onnx.numpy_helper.to_array(constants[node.input[1]]).astype(np.float32)
        gelu_input = x in producer and producer[x].op_type in _GELU_OPS
        if not gelu_input and any(role in node.name for role in SMOOTHED_ROLES) and x in maxima:
            smooth = (np.maximum(maxima[x], 1e-5) ** SMOOTH_ALPHA
                      / np.maximum(np.abs(w).max(axis=1), 1e-5) ** (1 - SMOOTH_ALPHA)).astype(np.float32)
            w = w * smooth[:, None]
            added.append(lazylibs.onnx.numpy_helper.from_array((1 / smooth).astype(np.float32), f"{p}_smooth"))
            nodes.append(lazylibs.onnx.helper.make_node("Mul", [x, f"{p}_smooth"], [f"{p}_xc"]))
            x = f"{p}_xc"
        scale_w = np.abs(w).max(axis=0) / 127.0
        scale_w[scale_w == 0] = 1.0
        wq = np.clip(np.rint(w / scale_w), -127, 127).astype(np.int8)
        added += [lazylibs.onnx.numpy_helper.from_array(wq, f"{p}_wq"), lazylibs.onnx.numpy_helper.from_array(scale_w.astype(np.float32), f"{p}_ws")]
        if gelu_input:
            nodes += [lazylibs.onnx.helper.make_node("Add", [x, "rq_shift"], [f"{p}_xp"]),
                      lazylibs.onnx.helper.make_node("ReduceMax", [f"{p}_xp"], [f"{p}_amax"], axes=[-1], keepdims=1),
                      lazylibs.onnx.helper.make_node("Mul", [f"{p}_amax", "rq_inv255"], [f"{p}_s0"])]
            x, zero = f"{p}_xp", "rq_zp0"
        else:
            nodes += [lazylibs.onnx.helper.make_node("Abs", [x], [f"{p}_abs"]),
                      lazylibs.onnx.helper.make_node("ReduceMax", [f"{p}_abs"], [f"{p}_amax"], axes=[-1], keepdims=1),
                      lazylibs.onnx.helper.make_node("Mul", [f"{p}_amax", "rq_inv127"], [f"{p}_s0"])]
            zero = "rq_zp128"
        scaled = f"{p}_y1" if gelu_input else node.output[0]
        nodes += [lazylibs.onnx.helper.make_node("Max", [f"{p}_s0", "rq_eps"], [f"{p}_s"]),
                  lazylibs.onnx.helper.make_node("Reciprocal", [f"{p}_s"], [f"{p}_r"]),
                  lazylibs.onnx.helper.make_node("Mul", [x, f"{p}_r"], [f"{p}_xs"]),
                  lazylibs.onnx.helper.make_node("QuantizeLinear", [f"{p}_xs", "rq_one", zero], [f"{p}_xq"]),
                  lazylibs.onnx.helper.make_node("MatMulIntegerToFloat", [f"{p}_xq", f"{p}_wq", "rq_one", f"{p}_ws", zero],
                                                                                                         [f"{p}_y0"], domain="com.microsoft"),
                  lazylibs.onnx.helper.make_node("Mul", [f"{p}_y0", f"{p}_s"], [scaled])]
        if gelu_input:
            dequantised = wq.astype(np.float32) * scale_w
            added.append(lazylibs.onnx.numpy_helper.from_array((-GELU_FLOOR * dequantised.sum(axis=0)).astype(np.float32),
                                                               f"{p}_shift_back"))
            nodes.append(lazylibs.onnx.helper.make_node("Add", [scaled, f"{p}_shift_back"], list(node.output)))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(added)
    used = {name for node in model.graph.node for name in node.input}
    kept = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(lazylibs.onnx.helper.make_opsetid("com.microsoft", 1))
    partial = target.with_suffix(f".partial-{os.getpid()}")
    lazylibs.onnx.save(model, str(partial))
    os.replace(partial, target)
    return done
