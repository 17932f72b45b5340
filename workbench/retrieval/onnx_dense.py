"""Dense encoding with ONNX Runtime: the sentence-transformers model exported once, fused, quantised.

Same vectors as :mod:`workbench.retrieval.dense` up to quantisation error: the model's token
embeddings ``h`` (last hidden state) are mean-pooled over the attention mask,
``e = sum_t m_t h_t / max(sum_t m_t, 1e-9)``, then scaled to unit length by
:func:`dense.normalise` (the sentence-transformers ``Pooling(mean)`` module). Tokenisation is the
model's own ``tokenizer.json`` with truncation at the model's ``max_seq_length``.

First use exports the transformer with ``torch.onnx.export`` (TorchScript exporter, eager
attention so the graph matches ONNX Runtime's BERT fusion patterns, dynamic batch and sequence
axes) from the locally installed weights, fuses it with ``onnxruntime.transformers.optimizer``
(``Attention``, ``SkipLayerNormalization``, ``BiasGelu``, ``EmbedLayerNormalization``) and, for
an int8 precision, quantises the fused graph. Files are cached under :func:`cache_dir`
(``$WORKBENCH_ONNX_CACHE``, else ``$XDG_CACHE_HOME/workbench/onnx``, else
``~/.cache/workbench/onnx``) as ``<model>/ort-<onnxruntime version>-r<RECIPE>/<precision>.onnx``,
so later runs load without torch (inference imports onnxruntime, tokenizers and numpy only). A
half-written file never becomes a cache hit: files are written to a temporary name and renamed.

Precisions (:data:`PRECISIONS`; :data:`DEFAULT_PRECISION` is ``fp32``):

- ``fp32`` (default): the fused model as is (minimum cosine 0.99999+ with the PyTorch vectors).
- ``int8-safe``: :mod:`workbench.retrieval.onnx_int8`, per-token int8 activations with
  per-channel int8 weights, GELU shift and channel smoothing, first layer in fp32. Measured
  against PyTorch: mean cosine 0.9996, 1st percentile 0.9993, minimum 0.9993 on a seeded 341
  (300 DL19 + 41 demo sections) but 0.99899 on the first 1,000 DL19 passages, so it just misses
  a strict minimum of 0.999 and is opt-in; throughput in ``benchmarks/retrieval_bench.py``.
- ``int8``: ``quantize_dynamic`` (one activation scale per tensor, per-channel weights): the
  fastest, but its minimum cosine is ~0.988, below 0.999, so it is opt-in.

Each precision caches its vectors under its own key. Texts are tokenised once, sorted by token
count and cut into batches of at most ``batch_size`` rows and :data:`MAX_BATCH_TOKENS` padded
tokens (sentence-transformers sorts by length too), so padding and the attention buffers stay
small; output rows are in input order.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workbench import lazylibs
from workbench.errors import ConfigError
from workbench.retrieval import onnx_int8

PRECISIONS = ("fp32", "int8-safe", "int8")
DEFAULT_PRECISION = "fp32"
RECIPE = 2  # bump when the export, fusion or quantisation recipe changes (a new cache folder)
# Padded tokens per batch: bounds the attention buffers (batch x heads x len^2) and keeps a batch's
# activations cache-sized: less CPU than 8192 for the same vectors (docs/performance.md).
MAX_BATCH_TOKENS = 2048
_LOADED: dict[tuple[str, str, str], OnnxEncoder] = {}


def available() -> bool:
    """Whether onnxruntime is importable (the ``onnx`` extra is installed)."""
    try:
        lazylibs.onnxruntime  # the first read imports it
    except ModuleNotFoundError:
        return False
    return True


def cache_dir() -> Path:
    """Where exported models are kept (see the module docstring for the order of lookup)."""
    explicit = os.environ.get("WORKBENCH_ONNX_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "workbench" / "onnx"


def _model_dir_key(model_dir: Path) -> str:
    """A directory name for a model: its folder name plus a hash of its weights' size and path."""
    weights = [p for p in sorted(model_dir.iterdir()) if p.suffix in (".safetensors", ".bin")]
    stamp = "|".join(f"{p.name}:{p.stat().st_size}" for p in weights) + f"|{model_dir.resolve()}"
    return f"{model_dir.name}-{hashlib.sha256(stamp.encode()).hexdigest()[:12]}"


def _max_seq_length(model_dir: Path) -> int:
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        value = json.loads(config.read_text()).get("max_seq_length")
        if value:
            return int(value)
    return 512


def _check_pooling(model_dir: Path) -> None:
    config = model_dir / "1_Pooling" / "config.json"
    if config.is_file():
        pooling = json.loads(config.read_text())
        if not pooling.get("pooling_mode_mean_tokens", False):
            raise ConfigError(f"the ONNX backend implements mean pooling only; {model_dir} pools otherwise; "
                              f"use --backend torch")


def export(model_dir: Path, target: Path) -> Path:
    """Export the transformer in ``model_dir`` to ``target`` (fp32 ONNX); needs torch + transformers."""

    # Eager attention: the SDPA graph does not match ORT's Attention fusion pattern.
    model = lazylibs.transformers.AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
    model.eval()
    sample = {
        "input_ids": lazylibs.torch.ones((2, 8), dtype=lazylibs.torch.long),
        "attention_mask": lazylibs.torch.ones((2, 8), dtype=lazylibs.torch.long),
        "token_type_ids": lazylibs.torch.zeros((2, 8), dtype=lazylibs.torch.long),
    }

    class _Hidden(lazylibs.torch.nn.Module):
        # Only the last hidden state; pooling happens in numpy so both precisions share it.
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    dynamic = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
               "token_type_ids": {0: "batch", 1: "sequence"}, "last_hidden_state": {0: "batch", 1: "sequence"}}
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    with lazylibs.torch.no_grad():
        lazylibs.torch.onnx.export(_Hidden(model), (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
                                   str(partial), input_names=list(sample), output_names=["last_hidden_state"],
                                   dynamic_axes=dynamic, opset_version=17, dynamo=False)
    os.replace(partial, target)
    return target


def fuse(source: Path, target: Path, model_dir: Path) -> Path:
    """ORT's BERT fusions (fused attention, skip-LayerNorm, bias-GELU, embedding LayerNorm)."""

    config = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").is_file() else {}
    fused = lazylibs.onnxruntime_transformers_optimizer.optimize_model(str(source), model_type="bert", num_heads=int(config.get("num_attention_heads", 0)),
                                                                       hidden_size=int(config.get("hidden_size", 0)), opt_level=1)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    fused.save_model_to_file(str(partial))
    os.replace(partial, target)
    return target


def quantize(source: Path, target: Path) -> Path:
    """``int8``: dynamic quantisation (weights int8 per channel, one activation scale per tensor)."""

    partial = target.with_suffix(f".partial-{os.getpid()}")
    # Per-channel scales: per-tensor weights gave a minimum cosine of 0.93 on DL19 passages,
    # per-channel 0.988 (the per-tensor activation scale is what remains; see onnx_int8).
    lazylibs.onnxruntime_quantization.quantize_dynamic(str(source), str(partial), weight_type=lazylibs.onnxruntime_quantization.QuantType.QInt8, per_channel=True,
                                                       op_types_to_quantize=["MatMul", "Attention"], extra_options={"DefaultTensorType": 1})
    os.replace(partial, target)
    return target


def quantize_safe(source: Path, target: Path, model_dir: Path) -> Path:
    """``int8-safe``: :func:`workbench.retrieval.onnx_int8.rewrite` after a calibration pass of
    ``source`` over :func:`onnx_int8.calibration_texts`, in a session with the encoder's options
    (:func:`session_options`): ONNX Runtime's defaults, a thread per core and spinning, took
    more CPU for the pass for the same maxima bit for bit (the same int8-safe file;
    docs/performance.md)."""


    tokenizer = lazylibs.tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=_max_seq_length(model_dir))

    def feed(text: str) -> dict:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}

    maxima = onnx_int8.activation_maxima(source, onnx_int8.calibration_texts(), feed, session_options())
    onnx_int8.rewrite(source, target, maxima)
    return target


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision must be one of {', '.join(PRECISIONS)} for the onnx backend, "
                          f"got {precision!r}")
    return precision


def model_files(model_dir: Path, precision: str = DEFAULT_PRECISION) -> Path:
    """The cached ONNX file for ``model_dir`` at ``precision``, building it on first use
    (export needs torch once; fusing and quantising need onnxruntime only)."""

    check_precision(precision)
    folder = cache_dir() / _model_dir_key(model_dir) / f"ort-{lazylibs.onnxruntime.__version__}-r{RECIPE}"
    target = folder / f"{precision}.onnx"
    if target.is_file():
        return target
    fused = folder / "fp32.onnx"
    if not fused.is_file():
        raw = folder / "export.onnx"
        if not raw.is_file():
            try:
                export(model_dir, raw)
            except ModuleNotFoundError as exc:
                raise ConfigError(f"exporting {model_dir} to ONNX needs torch and transformers ({exc}); "
                                  f"install the dense extra") from None
        fuse(raw, fused, model_dir)
        raw.unlink(missing_ok=True)
    if precision == "int8":
        quantize(fused, target)
    elif precision == "int8-safe":
        quantize_safe(fused, target, model_dir)
    return target


def threads() -> int:
    """Intra-op threads of an encoder session: ``OMP_NUM_THREADS`` when it is set to a positive
    number (as torch reads it, so one setting bounds both backends; a test worker or a server that
    runs several encoders side by side sets 1), else the cores this process may run on (its CPU
    affinity, not every core of the machine)."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def session_options():
    """The options of every ONNX Runtime session this module makes (an encoder's, and the
    calibration pass of ``int8-safe``): :func:`threads` intra-op threads, one inter-op thread, no
    spinning, every graph optimisation."""

    options = lazylibs.onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads()
    options.inter_op_num_threads = 1
    # No busy-waiting between parallel sections: on a shared machine (more runnable threads
    # than cores) spinning threads steal the cores the work needs (docs/performance.md).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = lazylibs.onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


def providers(device: str) -> list[str]:
    """ONNX Runtime execution providers for ``device`` (cpu, cuda, auto)."""

    have = set(lazylibs.onnxruntime.get_available_providers())
    if device not in ("cpu", "cuda", "auto"):
        raise ConfigError(f"--device must be cpu, cuda or auto, got {device!r}")
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in have:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if device == "cuda":
        raise ConfigError("--device cuda: this onnxruntime has no CUDAExecutionProvider "
                          "(install onnxruntime-gpu); use --device cpu or --backend torch")
    return ["CPUExecutionProvider"]


class OnnxEncoder:
    """An encoder with the ``encode`` / ``get_sentence_embedding_dimension`` subset that
    :func:`workbench.retrieval.dense.encode` uses."""

    def __init__(self, model_dir: Path, precision: str = DEFAULT_PRECISION, device: str = "cpu"):
        _check_pooling(model_dir)
        self.path = model_files(model_dir, precision)
        self.precision = precision
        self.max_length = _max_seq_length(model_dir)
        self.tokenizer = lazylibs.tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer.no_padding()
        self.session = lazylibs.onnxruntime.InferenceSession(str(self.path), session_options(), providers=providers(device))
        self._inputs = {i.name for i in self.session.get_inputs()}
        self._dim: int | None = None

    def _batch(self, encodings: list) -> np.ndarray:
        width = max((len(e.ids) for e in encodings), default=1) or 1
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = enc.attention_mask
            types[row, :n] = enc.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        return summed / np.maximum(weights.sum(axis=1), 1e-9)

    def encode(self, texts: Sequence[str], batch_size: int = 64, **_ignored) -> np.ndarray:
        """Mean-pooled (not normalised) embeddings, rows in input order.

        Longest first; a batch closes at ``batch_size`` rows or :data:`MAX_BATCH_TOKENS` padded
        tokens (its first, longest row sets the width), whichever comes first.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.get_sentence_embedding_dimension()), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        order = np.argsort([-len(e.ids) for e in encodings], kind="stable")
        out: np.ndarray | None = None
        start = 0
        while start < len(order):
            width = max(len(encodings[order[start]].ids), 1)
            size = max(1, min(batch_size, MAX_BATCH_TOKENS // width))
            pick = order[start:start + size]
            vectors = self._batch([encodings[i] for i in pick])
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[pick] = vectors
            start += size
        return out

    def get_sentence_embedding_dimension(self) -> int:
        if self._dim is None:
            self._dim = int(self._batch(self.tokenizer.encode_batch(["x"])).shape[1])
        return self._dim


def load_encoder(model_dir: str | Path, *, precision: str = DEFAULT_PRECISION, device: str = "cpu") -> OnnxEncoder:
    """An :class:`OnnxEncoder` for the model directory, loaded once per process."""
    if not available():
        raise ConfigError("--backend onnx needs onnxruntime; install the onnx extra (`pip install -e .[onnx]`) "
                          "or use --backend torch")
    check_precision(precision)
    providers(device)  # a bad --device fails before any export
    model_dir = Path(model_dir)
    if not (model_dir / "tokenizer.json").is_file():
        raise ConfigError(f"the ONNX backend needs a local model directory with tokenizer.json, got {model_dir}; "
                          f"use --backend torch")
    key = (str(model_dir.resolve()), precision, device)
    if key not in _LOADED:
        _LOADED[key] = OnnxEncoder(model_dir, precision, device)
    return _LOADED[key]
