"""ONNX Runtime side of the embedding benchmark: a lone query's latency and,
with --texts, throughput on the benchmark texts in float32 and with weights
quantised to int8 (ONNX Runtime's dynamic quantisation: int8 weights per
output channel, activations quantised per call, MatMulInteger where the CPU
has VNNI).

Builds an ONNX graph of the BERT sentence encoder straight from the model
directory the Rust crate reads (config.json, model.safetensors,
tokenizer.json), without PyTorch: the same layers as a Hugging Face export
(embeddings, six encoder layers of attention and GELU feed-forward, mean
pooling, L2 normalisation), written with onnx.helper. ONNX Runtime then runs
it with all graph optimisations on (it fuses the layer norms, GELU and the
attention pattern itself) and the given number of intra-op threads.

Before timing, the vector it gives for the query is compared with the one
our engine wrote (cosine similarity, printed): the two sides must compute
the same function or the comparison means nothing.

Prints `embed.onnxruntime.query_p50_ms` and `..._p99_ms`, tokenising
included, as bench_embed prints ours; with --texts also
`embed.onnxruntime.sentences_per_s`, `embed.onnxruntime_int8.sentences_per_s`
(and tokens/s), best of --repeat passes, each text one call (the graph takes
one text: no padding, as our engine packs texts without any), tokenising
included, and how close the int8 vectors come to the float32 ones.
"""

import argparse
import json
import pathlib
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file
from tokenizers import Tokenizer


def build_graph(model_dir: pathlib.Path) -> onnx.ModelProto:
    config = json.loads((model_dir / "config.json").read_text())
    weights = {
        name.removeprefix("bert."): tensor.astype(np.float32)
        for name, tensor in load_file(str(model_dir / "model.safetensors")).items()
    }
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    head_size = hidden // heads
    eps = float(config["layer_norm_eps"])

    nodes, inits = [], []
    counter = [0]

    def name(prefix):
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def const(array, prefix="c"):
        n = name(prefix)
        inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def op(kind, inputs, **attrs):
        out = name(kind.lower())
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def dense(x, prefix):
        w = const(weights[f"{prefix}.weight"].T.copy(), "w")
        b = const(weights[f"{prefix}.bias"], "b")
        return op("Add", [op("MatMul", [x, w]), b])

    def norm(x, prefix):
        scale = const(weights[f"{prefix}.weight"], "g")
        bias = const(weights[f"{prefix}.bias"], "b")
        return op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)

    # input_ids: [tokens] of one text; positions are 0..tokens.
    ids = "input_ids"
    count = op("Shape", [ids])
    positions = op(
        "Range",
        [const(np.array(0, dtype=np.int64)), op("Squeeze", [count, const(np.array([0], dtype=np.int64))]), const(np.array(1, dtype=np.int64))],
    )
    x = op("Gather", [const(weights["embeddings.word_embeddings.weight"], "emb"), ids])
    x = op("Add", [x, op("Gather", [const(weights["embeddings.position_embeddings.weight"], "pos"), positions])])
    x = op("Add", [x, const(weights["embeddings.token_type_embeddings.weight"][0], "type")])
    x = norm(x, "embeddings.LayerNorm")

    split_heads = const(np.array([-1, heads, head_size], dtype=np.int64))
    merge_heads = const(np.array([-1, hidden], dtype=np.int64))
    scale = const(np.array(1.0 / np.sqrt(head_size), dtype=np.float32))
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}"

        def heads_of(kind, perm):
            projected = dense(x, f"{p}.attention.self.{kind}")
            return op("Transpose", [op("Reshape", [projected, split_heads])], perm=perm)

        q = heads_of("query", [1, 0, 2])  # heads, tokens, d
        k = heads_of("key", [1, 2, 0])  # heads, d, tokens
        v = heads_of("value", [1, 0, 2])
        scores = op("Mul", [op("MatMul", [q, k]), scale])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        context = op("Reshape", [op("Transpose", [context], perm=[1, 0, 2]), merge_heads])
        attended = dense(context, f"{p}.attention.output.dense")
        x = norm(op("Add", [attended, x]), f"{p}.attention.output.LayerNorm")
        inner = dense(x, f"{p}.intermediate.dense")
        # Exact GELU, as BERT's "gelu": x/2 · (1 + erf(x/√2)); ORT fuses it.
        erf = op("Erf", [op("Mul", [inner, const(np.array(1 / np.sqrt(2), dtype=np.float32))])])
        gelu = op("Mul", [op("Mul", [inner, op("Add", [erf, const(np.array(1, dtype=np.float32))])]), const(np.array(0.5, dtype=np.float32))])
        out = dense(gelu, f"{p}.output.dense")
        x = norm(op("Add", [out, x]), f"{p}.output.LayerNorm")

    pooled = op("ReduceMean", [x, const(np.array([0], dtype=np.int64))], keepdims=0)
    op("LpNormalization", [op("Unsqueeze", [pooled, const(np.array([0], dtype=np.int64))])], p=2, axis=-1)
    nodes[-1].output[0] = "embedding"
    graph = helper.make_graph(
        nodes,
        "sentence_encoder",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, ["tokens"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [1, hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def session_for(model, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def quantised(model):
    """The same graph with int8 weights, as `quantize_dynamic` writes it."""
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        source = pathlib.Path(tmp) / "fp32.onnx"
        target = pathlib.Path(tmp) / "int8.onnx"
        onnx.save(model, str(source))
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True)
        return onnx.load(str(target))


def throughput(label, session, tokenizer, texts, repeat):
    """Best of `repeat` passes over `texts`, one call a text, after a warm-up."""
    encoded = [np.array(tokenizer.encode(t).ids[:256], dtype=np.int64) for t in texts]
    tokens = sum(len(ids) for ids in encoded)
    for ids in encoded[:8]:
        session.run(None, {"input_ids": ids})
    best = None
    vectors = []
    for _ in range(repeat):
        start = time.perf_counter()
        vectors = [session.run(None, {"input_ids": np.array(tokenizer.encode(t).ids[:256], dtype=np.int64)})[0][0] for t in texts]
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    print(f"embed.{label}.texts {len(texts)}")
    print(f"embed.{label}.seconds {best:.3f}")
    print(f"embed.{label}.sentences_per_s {len(texts) / best:.1f}")
    print(f"embed.{label}.tokens_per_s {tokens / best:.0f}")
    return np.array(vectors)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, type=pathlib.Path)
    parser.add_argument("--query", required=True)
    parser.add_argument("--ours", type=pathlib.Path, help="our engine's vector of the query (JSON array)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--texts", type=pathlib.Path, help="JSON array of texts: also time throughput")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    model = build_graph(args.model)
    session = session_for(model, args.threads)
    tokenizer = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()

    def embed(text):
        ids = np.array(tokenizer.encode(text).ids, dtype=np.int64)
        return session.run(None, {"input_ids": ids})[0][0]

    vector = embed(args.query)
    if args.ours:
        ours = np.array(json.loads(args.ours.read_text()), dtype=np.float32)
        cosine = float(np.dot(vector, ours) / (np.linalg.norm(vector) * np.linalg.norm(ours)))
        print(f"embed.onnxruntime.cosine_to_ours {cosine:.6f}")
        if cosine < 0.999:
            sys.exit("the ONNX graph does not compute what our engine computes")
    for _ in range(20):
        embed(args.query)
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        embed(args.query)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    print(f"embed.onnxruntime.version {ort.__version__}")
    print(f"embed.onnxruntime.query_p50_ms {times[len(times) // 2]:.2f}")
    print(f"embed.onnxruntime.query_p99_ms {times[len(times) * 99 // 100]:.2f}")

    if args.texts:
        texts = json.loads(args.texts.read_text(encoding="utf-8"))
        tokenizer.enable_truncation(256)
        fp32 = throughput("onnxruntime", session, tokenizer, texts, args.repeat)
        int8 = throughput("onnxruntime_int8", session_for(quantised(model), args.threads), tokenizer, texts, args.repeat)
        cosines = np.sum(fp32 * int8, axis=1) / (np.linalg.norm(fp32, axis=1) * np.linalg.norm(int8, axis=1))
        print(f"embed.onnxruntime_int8.cosine_to_fp32_mean {float(np.mean(cosines)):.4f}")
        print(f"embed.onnxruntime_int8.cosine_to_fp32_min {float(np.min(cosines)):.4f}")


if __name__ == "__main__":
    main()
