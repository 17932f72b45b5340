"""Dense encoding with ONNX Runtime: the sentence-transformers model exported once (fp32 or int8).

Same vectors as :mod:`workbench.retrieval.dense` up to quantisation error: the model's token
embeddings ``h`` (last hidden state) are mean-pooled over the attention mask,
``e = sum_t m_t h_t / max(sum_t m_t, 1e-9)``, then scaled to unit length by
:func:`dense.normalise` (the sentence-transformers ``Pooling(mean)`` module). Tokenisation is the
model's own ``tokenizer.json`` with truncation at the model's ``max_seq_length``.

First use exports the transformer with ``torch.onnx.export`` (TorchScript exporter, dynamic
batch and sequence axes) from the locally installed weights, then quantises it with
``onnxruntime.quantization.quantize_dynamic`` (int8 weights of MatMul/Gemm, activations
quantised per batch at run time). Both files are cached under :func:`cache_dir`
(``$WORKBENCH_ONNX_CACHE``, else ``$XDG_CACHE_HOME/workbench/onnx``, else
``~/.cache/workbench/onnx``), one directory per model, so later runs load without torch.
A half-written export never becomes a cache hit: files are written to a temporary name and
renamed.

Precision ``fp32`` (default: the exported model as is; cosine with the PyTorch vectors
>= 0.99999 measured) or ``int8`` (dynamic per-channel quantisation: about 4x smaller, but
measured minimum cosine ~0.975 on random-vocabulary passages, below the 0.999 target, so it is
opt-in and its vectors are cached under their own key). Texts are sorted by length
before batching so padding stays small (sentence-transformers does the same); output rows are in
input order.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workbench.errors import ConfigError

PRECISIONS = ("fp32", "int8")
_LOADED: dict[tuple[str, str, str], OnnxEncoder] = {}


def available() -> bool:
    """Whether onnxruntime is importable (the ``onnx`` extra is installed)."""
    try:
        import onnxruntime  # noqa: F401
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
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir))
    model.eval()
    sample = {
        "input_ids": torch.ones((2, 8), dtype=torch.long),
        "attention_mask": torch.ones((2, 8), dtype=torch.long),
        "token_type_ids": torch.zeros((2, 8), dtype=torch.long),
    }

    class _Hidden(torch.nn.Module):
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
    with torch.no_grad():
        torch.onnx.export(_Hidden(model), (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
                          str(partial), input_names=list(sample), output_names=["last_hidden_state"],
                          dynamic_axes=dynamic, opset_version=17, dynamo=False)
    os.replace(partial, target)
    return target


def quantize(source: Path, target: Path) -> Path:
    """Dynamic int8 quantisation of ``source`` (weights int8, activations per batch)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = target.with_suffix(f".partial-{os.getpid()}")
    # Per-channel scales: per-tensor int8 gave a minimum cosine of 0.80 with the PyTorch vectors
    # on random-vocabulary passages, per-channel 0.975 (still short of 0.999, hence fp32 default).
    quantize_dynamic(str(source), str(partial), weight_type=QuantType.QInt8, per_channel=True)
    os.replace(partial, target)
    return target


def model_files(model_dir: Path, precision: str = "fp32") -> Path:
    """The cached ONNX file for ``model_dir`` at ``precision``, exporting/quantising on first use."""
    if precision not in PRECISIONS:
        raise ConfigError(f"ONNX precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    folder = cache_dir() / _model_dir_key(model_dir)
    fp32 = folder / "model.onnx"
    if not fp32.is_file():
        try:
            export(model_dir, fp32)
        except ModuleNotFoundError as exc:
            raise ConfigError(f"exporting {model_dir} to ONNX needs torch and transformers ({exc}); "
                              f"install the dense extra") from None
    if precision == "fp32":
        return fp32
    int8 = folder / "model.int8.onnx"
    if not int8.is_file():
        quantize(fp32, int8)
    return int8


def providers(device: str) -> list[str]:
    """ONNX Runtime execution providers for ``device`` (cpu, cuda, auto)."""
    import onnxruntime as ort

    have = set(ort.get_available_providers())
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in have:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if device == "cuda":
        raise ConfigError("--device cuda: this onnxruntime has no CUDAExecutionProvider "
                          "(install onnxruntime-gpu) ; use --device cpu or --backend torch")
    return ["CPUExecutionProvider"]


class OnnxEncoder:
    """An encoder with the ``encode`` / ``get_sentence_embedding_dimension`` subset that
    :func:`workbench.retrieval.dense.encode` uses."""

    def __init__(self, model_dir: Path, precision: str = "fp32", device: str = "cpu"):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        _check_pooling(model_dir)
        self.path = model_files(model_dir, precision)
        self.precision = precision
        self.max_length = _max_seq_length(model_dir)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(self.path), options, providers=providers(device))
        self._inputs = {i.name for i in self.session.get_inputs()}
        self._dim: int | None = None

    def get_sentence_embedding_dimension(self) -> int:
        if self._dim is None:
            self._dim = int(self._batch(["x"]).shape[1])
        return self._dim

    def _batch(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
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
        """Mean-pooled (not normalised) embeddings, rows in input order."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.get_sentence_embedding_dimension()), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: np.ndarray | None = None
        for start in range(0, len(texts), batch_size):
            pick = order[start:start + batch_size]
            vectors = self._batch([texts[i] for i in pick])
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[pick] = vectors
        return out


def load_encoder(model_dir: str | Path, *, precision: str = "fp32", device: str = "cpu") -> OnnxEncoder:
    """An :class:`OnnxEncoder` for the model directory, loaded once per process."""
    if not available():
        raise ConfigError("--backend onnx needs onnxruntime; install the onnx extra (`pip install -e .[onnx]`) "
                          "or use --backend torch")
    model_dir = Path(model_dir)
    if not (model_dir / "tokenizer.json").is_file():
        raise ConfigError(f"the ONNX backend needs a local model directory with tokenizer.json, got {model_dir}; "
                          f"use --backend torch")
    key = (str(model_dir.resolve()), precision, device)
    if key not in _LOADED:
        _LOADED[key] = OnnxEncoder(model_dir, precision, device)
    return _LOADED[key]
