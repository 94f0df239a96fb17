//! A BERT encoder forward pass for sentence embeddings on the CPU: matrix
//! products through `ndarray` (the `matrixmultiply` kernels), everything else
//! fused into a few passes over rows that stay in cache, spread over rayon.
//!
//! Texts are packed back to back without padding: dense layers work per token
//! and attention per text, so padding would only cost time, and a text's
//! vector cannot depend on its batch neighbours.

use std::borrow::Cow;

use ndarray::linalg::general_mat_mul;
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis, Slice};
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::attention::Wide;
use crate::few_rows::Simd;
use crate::int8::{Kernel, QuantizedMatrix};
use crate::kernels;

/// Token rows per task in the per-token phases. Every block repacks the
/// weight matrices, which at 64 rows took a fifth of the time; measured on
/// 100 texts, 64 / 128 / 256 / 512 rows gave about 4.6k / 5.5k / 5.8k / 5.6k
/// tokens/s. 256 also leaves a few blocks per batch of 16 texts for each thread.
const ROW_BLOCK: usize = 256;

/// Output columns a thread's share of a small product is rounded up to.
const COLUMN_ALIGN: usize = 16;

/// Tokens (all texts together) up to which attention runs on the calling
/// thread with plain loops.
const SHORT_TEXT: usize = 32;

/// Rows up to which a product reads the weights itself
/// ([`few_rows`](crate::few_rows)) instead of packing them for the general
/// product. Measured on one thread with the weights out of cache (384 →
/// 1536): 301 against 732 µs at 13 rows, 1,087 against 1,290 µs at 64,
/// 2,203 against 2,107 µs at 128.
const FEW_ROWS: usize = 64;

/// The fields of a Hugging Face BERT `config.json` that the forward pass needs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub hidden_act: String,
}

/// The tensors of a safetensors file, converted to f32 on request.
struct Tensors<'a> {
    file: SafeTensors<'a>,
    // Some checkpoints nest everything under "bert.".
    prefix: &'static str,
}

impl<'a> Tensors<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, String> {
        let file = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let prefix = if file
            .tensor("bert.embeddings.word_embeddings.weight")
            .is_ok()
        {
            "bert."
        } else {
            ""
        };
        Ok(Self { file, prefix })
    }

    /// The tensor `name` as f32 values, checked to have `shape`.
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .file
            .tensor(&full)
            .map_err(|_| format!("tensor {full} is missing"))?;
        if view.shape() != shape {
            return Err(format!(
                "tensor {full} has shape {:?}, expected {shape:?}",
                view.shape()
            ));
        }
        let bytes = view.data();
        let values = match view.dtype() {
            Dtype::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            // bf16 is the top half of an f32.
            Dtype::BF16 => bytes
                .chunks_exact(2)
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
            Dtype::F16 => bytes
                .chunks_exact(2)
                .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            other => return Err(format!("tensor {full} has unsupported type {other:?}")),
        };
        Ok(values)
    }

    fn vector(&self, name: &str, len: usize) -> Result<Array1<f32>, String> {
        Ok(Array1::from_vec(self.get(name, &[len])?))
    }

    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Array2<f32>, String> {
        Array2::from_shape_vec((rows, cols), self.get(name, &[rows, cols])?)
            .map_err(|e| format!("tensor {name}: {e}"))
    }
}

/// IEEE half precision to single, subnormals included.
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: value is m · 2⁻²⁴, exact in f32.
            let magnitude = m as f32 * f32::from_bits(0x3380_0000);
            sign | magnitude.to_bits()
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

impl Norm {
    fn load(tensors: &Tensors, prefix: &str, size: usize) -> Result<Self, String> {
        Ok(Self {
            gamma: tensors.get(&format!("{prefix}.weight"), &[size])?,
            beta: tensors.get(&format!("{prefix}.bias"), &[size])?,
        })
    }

    fn apply(&self, row: &mut [f32], residual: &[f32], eps: f32) {
        kernels::add_layer_norm(row, residual, &self.gamma, &self.beta, eps);
    }
}

/// A dense layer `x · Wᵀ + b`. The weight keeps the checkpoint's
/// `(outputs, inputs)` layout: the few-rows product reads each output's
/// weights as one contiguous row, and the general product packs whatever
/// layout it is given. In 8-bit mode it is quantised and packed once at load
/// ([`int8`](crate::int8)) and the float copy is dropped.
struct Dense {
    weight: Weight,
    bias: Array1<f32>,
}

enum Weight {
    Float(Array2<f32>),
    Int8(QuantizedMatrix, Kernel),
}

impl Dense {
    fn load(
        tensors: &Tensors,
        prefix: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<Self, String> {
        Ok(Self {
            weight: Weight::Float(tensors.matrix(&format!("{prefix}.weight"), outputs, inputs)?),
            bias: tensors.vector(&format!("{prefix}.bias"), outputs)?,
        })
    }

    fn float(&self) -> &Array2<f32> {
        match &self.weight {
            Weight::Float(weight) => weight,
            Weight::Int8(..) => unreachable!("layers are quantised after they are assembled"),
        }
    }

    /// Replaces the float weight by its 8-bit form.
    fn quantize(&mut self, kernel: Kernel) {
        let weight = self.float();
        let (outputs, inputs) = weight.dim();
        // Row by row whatever the memory layout.
        let values: Vec<f32> = weight.iter().copied().collect();
        self.weight = Weight::Int8(kernel.quantize_matrix(&values, inputs, outputs), kernel);
    }

    /// `out ← input · Wᵀ + b`.
    ///
    /// A block of fewer than [`ROW_BLOCK`] rows (a search query, the tail of
    /// a batch) is the only work of its task, so its output columns are
    /// shared out over the pool: each thread reads only its own columns of
    /// the weight. Up to [`FEW_ROWS`] rows, where the CPU allows, each
    /// thread reads its columns once with no copy
    /// ([`few_rows`](crate::few_rows)); larger blocks go to the general
    /// product, which writes the bias first and accumulates onto it.
    fn forward(&self, input: &ArrayView2<f32>, mut out: ArrayViewMut2<f32>) {
        let weight = match &self.weight {
            Weight::Float(weight) => weight,
            Weight::Int8(matrix, kernel) => return self.forward_int8(*kernel, matrix, input, out),
        };
        let threads = rayon::current_num_threads();
        let rows = input.nrows();
        let few = (rows <= FEW_ROWS)
            .then(Simd::available)
            .flatten()
            .zip(input.as_slice());
        if few.is_none() && (rows >= ROW_BLOCK || threads < 2) {
            out.assign(&self.bias);
            general_mat_mul(
                1.0,
                weight,
                &input.t(),
                1.0,
                &mut out.view_mut().reversed_axes(),
            );
            return;
        }
        // Whole kernel panels (8 or 16 columns wide) per thread.
        let width = out.ncols().div_ceil(threads).next_multiple_of(COLUMN_ALIGN);
        let parts: Vec<_> = out
            .axis_chunks_iter_mut(Axis(1), width)
            .enumerate()
            .collect();
        parts.into_par_iter().for_each(|(i, mut part)| {
            let columns = Slice::from(i * width..i * width + part.ncols());
            let bias = self.bias.slice_axis(Axis(0), columns);
            let weight = weight.slice_axis(Axis(0), columns);
            match (few, weight.as_slice(), bias.as_slice()) {
                (Some((simd, x)), Some(weight), Some(bias)) => {
                    simd.product(x, input.ncols(), weight, bias, &mut part);
                }
                _ => {
                    part.assign(&bias);
                    general_mat_mul(
                        1.0,
                        &weight,
                        &input.t(),
                        1.0,
                        &mut part.view_mut().reversed_axes(),
                    );
                }
            }
        });
    }

    /// The same in 8 bits. Rows are quantised once for all threads; a block
    /// of fewer than [`ROW_BLOCK`] rows shares its columns out as above,
    /// each thread writing its own buffer, copied into place after.
    fn forward_int8(
        &self,
        kernel: Kernel,
        matrix: &QuantizedMatrix,
        input: &ArrayView2<f32>,
        mut out: ArrayViewMut2<f32>,
    ) {
        let rows = input.nrows();
        let outputs = matrix.outputs();
        let x = match input.as_slice() {
            Some(x) => kernel.quantize_rows(x, input.ncols()),
            None => kernel.quantize_rows(&input.iter().copied().collect::<Vec<_>>(), input.ncols()),
        };
        let bias = match self.bias.as_slice() {
            Some(bias) => Cow::Borrowed(bias),
            None => Cow::Owned(self.bias.to_vec()),
        };
        let threads = rayon::current_num_threads();
        if (rows >= ROW_BLOCK || threads < 2)
            && let Some(out) = out.as_slice_mut()
        {
            kernel.product(&x, matrix, 0..outputs, &bias, out);
            return;
        }
        let width = outputs.div_ceil(threads).next_multiple_of(COLUMN_ALIGN);
        let parts: Vec<Vec<f32>> = (0..outputs.div_ceil(width))
            .into_par_iter()
            .map(|i| {
                let columns = i * width..((i + 1) * width).min(outputs);
                let mut part = vec![0.0f32; rows * columns.len()];
                kernel.product(&x, matrix, columns.clone(), &bias[columns], &mut part);
                part
            })
            .collect();
        for (i, part) in parts.iter().enumerate() {
            let part_width = (part.len() / rows.max(1)).max(1);
            for (mut target, values) in out
                .rows_mut()
                .into_iter()
                .zip(part.chunks_exact(part_width))
            {
                for (o, &v) in target.iter_mut().skip(i * width).zip(values) {
                    *o = v;
                }
            }
        }
    }
}

struct Layer {
    /// Query, key and value side by side, the query part pre-scaled by 1/√d.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

/// The encoder stack of a BERT checkpoint in Hugging Face's tensor naming.
pub(crate) struct Bert {
    word_embeddings: Array2<f32>,
    // Every input is a single segment, so token type 0 is folded in here.
    position_embeddings: Array2<f32>,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    intermediate: usize,
    heads: usize,
    head_size: usize,
    eps: f32,
    /// The attention kernel on AVX-512 or AVX2, for every batch, where the
    /// CPU has one.
    wide: Option<Wide>,
    /// Without one, 8-bit layers take the general products for every batch,
    /// a lone query included, rather than plain loops for short ones, so
    /// that a text's attention is the same bits in any batch: 8-bit layers
    /// would otherwise turn a last-bit difference into a whole
    /// quantisation step.
    uniform_attention: bool,
}

impl Bert {
    /// With `int8`, every dense layer of the encoder is quantised to 8 bits
    /// for that kernel; embeddings, norms and attention stay in floats.
    pub(crate) fn load(
        weights: &[u8],
        config: &Config,
        int8: Option<Kernel>,
    ) -> Result<Self, String> {
        let tensors = Tensors::new(weights)?;
        let hidden = config.hidden_size;
        let intermediate = config.intermediate_size;
        // The exact erf GELU is the only activation implemented; a checkpoint
        // asking for another would silently produce wrong vectors.
        if config.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?} is not supported, only \"gelu\"",
                config.hidden_act
            ));
        }
        let heads = config.num_attention_heads;
        if heads == 0 || hidden == 0 || !hidden.is_multiple_of(heads) {
            return Err(format!(
                "hidden size {hidden} is not a multiple of {heads} attention heads"
            ));
        }
        let head_size = hidden / heads;

        let word_embeddings = tensors.matrix(
            "embeddings.word_embeddings.weight",
            config.vocab_size,
            hidden,
        )?;
        let mut position_embeddings = tensors.matrix(
            "embeddings.position_embeddings.weight",
            config.max_position_embeddings,
            hidden,
        )?;
        let token_types = tensors.matrix(
            "embeddings.token_type_embeddings.weight",
            config.type_vocab_size,
            hidden,
        )?;
        position_embeddings += &token_types.row(0);
        let embeddings_norm = Norm::load(&tensors, "embeddings.LayerNorm", hidden)?;

        let scale = 1.0 / (head_size as f32).sqrt();
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let parts = ["query", "key", "value"].map(|part| {
                Dense::load(
                    &tensors,
                    &format!("{p}.attention.self.{part}"),
                    hidden,
                    hidden,
                )
            });
            let [query, key, value] = parts;
            let (query, key, value) = (query?, key?, value?);
            // Scaling the query projection once here replaces scaling every score.
            let query_weight = query.float() * scale;
            let query_bias = &query.bias * scale;
            let qkv = Dense {
                weight: Weight::Float(
                    ndarray::concatenate(
                        Axis(0),
                        &[
                            query_weight.view(),
                            key.float().view(),
                            value.float().view(),
                        ],
                    )
                    .map_err(|e| format!("layer {i} query/key/value: {e}"))?,
                ),
                bias: ndarray::concatenate(
                    Axis(0),
                    &[query_bias.view(), key.bias.view(), value.bias.view()],
                )
                .map_err(|e| format!("layer {i} query/key/value: {e}"))?,
            };
            layers.push(Layer {
                qkv,
                attention_out: Dense::load(
                    &tensors,
                    &format!("{p}.attention.output.dense"),
                    hidden,
                    hidden,
                )?,
                attention_norm: Norm::load(
                    &tensors,
                    &format!("{p}.attention.output.LayerNorm"),
                    hidden,
                )?,
                intermediate: Dense::load(
                    &tensors,
                    &format!("{p}.intermediate.dense"),
                    hidden,
                    intermediate,
                )?,
                output: Dense::load(&tensors, &format!("{p}.output.dense"), intermediate, hidden)?,
                output_norm: Norm::load(&tensors, &format!("{p}.output.LayerNorm"), hidden)?,
            });
        }
        if let Some(kernel) = int8 {
            for layer in &mut layers {
                for dense in [
                    &mut layer.qkv,
                    &mut layer.attention_out,
                    &mut layer.intermediate,
                    &mut layer.output,
                ] {
                    dense.quantize(kernel);
                }
            }
        }
        Ok(Self {
            word_embeddings,
            position_embeddings,
            embeddings_norm,
            layers,
            hidden,
            intermediate,
            heads,
            head_size,
            eps: config.layer_norm_eps as f32,
            wide: Wide::available(head_size),
            uniform_attention: int8.is_some(),
        })
    }

    /// Mean-pooled, L2-normalised sentence vectors for texts given as token
    /// ids, `[CLS]` and `[SEP]` included.
    pub(crate) fn embed(&self, texts: &[&[u32]]) -> Result<Vec<Vec<f32>>, String> {
        let h = self.hidden;
        let vocab = self.word_embeddings.nrows();
        let max_positions = self.position_embeddings.nrows();
        let mut spans = Vec::with_capacity(texts.len());
        let mut tokens = Vec::new();
        for ids in texts {
            if ids.len() > max_positions {
                return Err(format!(
                    "input of {} tokens is longer than the model's {max_positions}",
                    ids.len()
                ));
            }
            spans.push((tokens.len(), ids.len()));
            for (position, &id) in ids.iter().enumerate() {
                let id = id as usize;
                if id >= vocab {
                    return Err(format!(
                        "token id {id} is outside the vocabulary of {vocab}"
                    ));
                }
                tokens.push((id, position));
            }
        }
        let rows = tokens.len();

        let mut x = vec![0.0f32; rows * h];
        x.par_chunks_mut(ROW_BLOCK * h)
            .zip(tokens.par_chunks(ROW_BLOCK))
            .for_each(|(block, block_tokens)| {
                for (row, &(id, position)) in block.chunks_exact_mut(h).zip(block_tokens) {
                    let word = self.word_embeddings.row(id);
                    let place = self.position_embeddings.row(position);
                    for ((out, &w), &p) in row.iter_mut().zip(word).zip(place) {
                        *out = w + p;
                    }
                    self.embeddings_norm.apply(row, &[], self.eps);
                }
            });

        // Reused by every layer.
        let mut qkv = vec![0.0f32; rows * 3 * h];
        let mut context = vec![0.0f32; rows * h];
        for layer in &self.layers {
            x.par_chunks(ROW_BLOCK * h)
                .zip(qkv.par_chunks_mut(ROW_BLOCK * 3 * h))
                .try_for_each(|(input, out)| {
                    let n = input.len() / h;
                    layer
                        .qkv
                        .forward(&view(input, n, h)?, view_mut(out, n, 3 * h)?);
                    Ok::<_, String>(())
                })?;
            self.attend(&qkv, &mut context, &spans)?;
            self.feed_forward(layer, &mut x, &context)?;
        }

        Ok(spans
            .iter()
            .map(|&(start, len)| {
                let mut pooled = vec![0.0f32; h];
                for row in x[start * h..(start + len) * h].chunks_exact(h) {
                    for (p, &v) in pooled.iter_mut().zip(row) {
                        *p += v;
                    }
                }
                // Dividing by the count does not change the direction, but
                // keeps the vector the same as sentence-transformers' before
                // normalising, in case normalisation ever becomes optional.
                let count = len.max(1) as f32;
                for p in &mut pooled {
                    *p /= count;
                }
                crate::vector::normalise(&mut pooled);
                pooled
            })
            .collect())
    }

    /// Scaled dot-product attention of every text and head, written into
    /// `context` (rows × hidden, heads side by side).
    fn attend(
        &self,
        qkv: &[f32],
        context: &mut [f32],
        spans: &[(usize, usize)],
    ) -> Result<(), String> {
        let h = self.hidden;
        let d = self.head_size;
        let qkv_rows = qkv;
        let qkv = view(qkv, qkv.len() / (3 * h), 3 * h)?;
        // One task per (text, head), each owning its column block of the
        // text's context rows, so tasks never share output.
        let mut tasks: Vec<Task<'_>> = Vec::with_capacity(spans.len() * self.heads);
        let mut rest = context;
        for &(start, len) in spans {
            let (block, tail) = rest.split_at_mut(len * h);
            rest = tail;
            let mut columns = view_mut(block, len, h)?;
            for head in 0..self.heads {
                let (this, next) = columns.split_at(Axis(1), d);
                tasks.push((start, len, head, this));
                columns = next;
            }
        }
        // A lone query's heads are a few thousand multiply-adds each: done
        // in turn here they cost less than waking the pool, and plain loops
        // less than packing operands for a general product.
        let short = spans.iter().map(|&(_, len)| len).sum::<usize>() <= SHORT_TEXT;
        // Where the CPU has AVX-512 or AVX2, every head of every batch runs
        // the same kernel, so that a text's attention is the same bits in
        // any batch: 8-bit layers would otherwise turn a last-bit difference
        // into a whole quantisation step.
        if let Some(wide) = self.wide {
            let head = |scratch: &mut Vec<f32>, (start, len, head, mut out): Task<'_>| {
                let at = [head * d, h + head * d, 2 * h + head * d];
                wide.head(qkv_rows, 3 * h, start, len, at, d, scratch, &mut out);
            };
            if short {
                let mut scratch = Vec::new();
                tasks.into_iter().for_each(|task| head(&mut scratch, task));
            } else {
                tasks.into_par_iter().for_each_init(Vec::new, head);
            }
            return Ok(());
        }
        if short && !self.uniform_attention {
            let plain = |scores: &mut Vec<f32>, (start, len, head, mut out): Task<'_>| {
                let row = |i: usize, offset: usize| {
                    let at = (start + i) * 3 * h + offset + head * d;
                    &qkv_rows[at..at + d]
                };
                scores.resize(len * len, 0.0);
                for (i, weights) in scores.chunks_exact_mut(len.max(1)).enumerate() {
                    for (j, score) in weights.iter_mut().enumerate() {
                        *score = kernels::dot(row(i, 0), row(j, h));
                    }
                    kernels::softmax_in_place(weights);
                    let mut context = out.row_mut(i);
                    context.fill(0.0);
                    for (j, &weight) in weights.iter().enumerate() {
                        context.scaled_add(weight, &ArrayView1::from(row(j, 2 * h)));
                    }
                }
            };
            let mut scores = Vec::new();
            tasks.into_iter().for_each(|task| plain(&mut scores, task));
            return Ok(());
        }
        let general =
            |scores: &mut Vec<f32>, (start, len, head, mut out): Task<'_>| -> Result<(), String> {
                // The `s!` macro expands to unsafe code, which the workspace forbids.
                let text = qkv.slice_axis(Axis(0), Slice::from(start..start + len));
                let part = |offset: usize| {
                    let first = offset + head * d;
                    text.slice_axis(Axis(1), Slice::from(first..first + d))
                };
                let (q, k, v) = (part(0), part(h), part(2 * h));
                scores.resize(len * len, 0.0);
                let scores = &mut scores[..len * len];
                general_mat_mul(1.0, &q, &k.t(), 0.0, &mut view_mut(scores, len, len)?);
                for row in scores.chunks_exact_mut(len.max(1)) {
                    kernels::softmax_in_place(row);
                }
                general_mat_mul(1.0, &view(scores, len, len)?, &v, 0.0, &mut out);
                Ok(())
            };
        if short {
            let mut scores = Vec::new();
            tasks
                .into_iter()
                .try_for_each(|task| general(&mut scores, task))
        } else {
            tasks.into_par_iter().try_for_each_init(Vec::new, general)
        }
    }

    /// Everything after attention, per block of token rows: output
    /// projection, residual and norm, the GELU feed-forward, residual and
    /// norm again, with the block's intermediate activations kept in cache.
    fn feed_forward(&self, layer: &Layer, x: &mut [f32], context: &[f32]) -> Result<(), String> {
        let h = self.hidden;
        let inner = self.intermediate;
        let eps = self.eps;
        let block = (x.len() / h).min(ROW_BLOCK);
        x.par_chunks_mut(ROW_BLOCK * h)
            .zip(context.par_chunks(ROW_BLOCK * h))
            .try_for_each_init(
                || (vec![0.0f32; block * h], vec![0.0f32; block * inner]),
                |(attended, expanded), (x, context)| {
                    let n = x.len() / h;
                    let attended = &mut attended[..n * h];
                    let expanded = &mut expanded[..n * inner];
                    layer
                        .attention_out
                        .forward(&view(context, n, h)?, view_mut(attended, n, h)?);
                    for (row, residual) in attended.chunks_exact_mut(h).zip(x.chunks_exact(h)) {
                        layer.attention_norm.apply(row, residual, eps);
                    }
                    layer
                        .intermediate
                        .forward(&view(attended, n, h)?, view_mut(expanded, n, inner)?);
                    kernels::gelu_in_place(expanded);
                    layer
                        .output
                        .forward(&view(expanded, n, inner)?, view_mut(x, n, h)?);
                    for (row, residual) in x.chunks_exact_mut(h).zip(attended.chunks_exact(h)) {
                        layer.output_norm.apply(row, residual, eps);
                    }
                    Ok(())
                },
            )
    }
}

/// One text's attention for one head: its first row, its length, the head,
/// and the head's columns of the text's context rows.
type Task<'a> = (usize, usize, usize, ArrayViewMut2<'a, f32>);

fn view(data: &[f32], rows: usize, cols: usize) -> Result<ArrayView2<'_, f32>, String> {
    ArrayView2::from_shape((rows, cols), data)
        .map_err(|e| format!("activation block of {rows}×{cols}: {e}"))
}

fn view_mut(data: &mut [f32], rows: usize, cols: usize) -> Result<ArrayViewMut2<'_, f32>, String> {
    ArrayViewMut2::from_shape((rows, cols), data)
        .map_err(|e| format!("activation block of {rows}×{cols}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_f16(bits: u16, expected: f32) {
        let got = f16_to_f32(bits);
        assert!(
            got.to_bits() == expected.to_bits() || (got.is_nan() && expected.is_nan()),
            "f16 {bits:#06x} -> {got:e}, want {expected:e}"
        );
    }

    #[test]
    fn half_precision_weights_convert_exactly() {
        check_f16(0x0000, 0.0);
        check_f16(0x8000, -0.0);
        check_f16(0x3c00, 1.0);
        check_f16(0xc000, -2.0);
        check_f16(0x3555, 0.333_251_95);
        check_f16(0x7bff, 65504.0);
        // Smallest subnormal and largest subnormal.
        check_f16(0x0001, 5.960_464_5e-8);
        check_f16(0x03ff, 6.097_555e-5);
        check_f16(0x7c00, f32::INFINITY);
        check_f16(0xfc00, f32::NEG_INFINITY);
        check_f16(0x7e00, f32::NAN);
    }

    /// A float dense layer of `inputs → outputs` drawn from `value`, with
    /// its weights (row per output) and bias.
    fn random_dense(
        value: &mut impl FnMut() -> f32,
        inputs: usize,
        outputs: usize,
    ) -> (Dense, Vec<f32>, Vec<f32>) {
        let weight: Vec<f32> = (0..outputs * inputs).map(|_| value()).collect();
        let bias: Vec<f32> = (0..outputs).map(|_| value()).collect();
        let dense = Dense {
            weight: Weight::Float(
                Array2::from_shape_vec((outputs, inputs), weight.clone()).unwrap(),
            ),
            bias: Array1::from_vec(bias.clone()),
        };
        (dense, weight, bias)
    }

    fn two_threads() -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap()
    }

    /// Every way `Dense::forward` can run (the few-rows product, the general
    /// product with the columns shared out, the general product of a full
    /// block) gives the plain sums, on a pool of two threads.
    #[test]
    fn a_dense_layer_gives_the_plain_sums_at_every_size() {
        let (inputs, outputs) = (48, 70);
        let mut value = crate::test_values(11);
        let (dense, weight, bias) = random_dense(&mut value, inputs, outputs);
        let pool = two_threads();
        for rows in [1, 13, FEW_ROWS, FEW_ROWS + 1, 100, ROW_BLOCK, ROW_BLOCK + 3] {
            let x: Vec<f32> = (0..rows * inputs).map(|_| value()).collect();
            let out = forward_on(&pool, &dense, &x, rows);
            for r in 0..rows {
                for j in 0..outputs {
                    let sum: f64 = (0..inputs)
                        .map(|k| f64::from(x[r * inputs + k]) * f64::from(weight[j * inputs + k]))
                        .sum::<f64>()
                        + f64::from(bias[j]);
                    let got = out[r * outputs + j];
                    assert!(
                        (f64::from(got) - sum).abs() < 1e-4,
                        "{rows} rows, at {r},{j}: {got} against {sum}"
                    );
                }
            }
        }
    }

    /// `dense` on `rows` rows of `x`, run on `pool`.
    fn forward_on(pool: &rayon::ThreadPool, dense: &Dense, x: &[f32], rows: usize) -> Vec<f32> {
        let (inputs, outputs) = (x.len() / rows, dense.bias.len());
        let mut out = vec![f32::NAN; rows * outputs];
        pool.install(|| {
            dense.forward(
                &view(x, rows, inputs).unwrap(),
                view_mut(&mut out, rows, outputs).unwrap(),
            )
        });
        out
    }

    /// In 8 bits, every size and every split of the columns over threads
    /// gives the same bits as one product of the whole block, on every
    /// kernel the CPU runs.
    #[test]
    fn an_8_bit_dense_layer_gives_the_same_bits_at_every_size() {
        for kernel in Kernel::available() {
            same_bits_at_every_size(kernel);
        }
    }

    fn same_bits_at_every_size(kernel: Kernel) {
        let (inputs, outputs) = (48, 70);
        let mut value = crate::test_values(7);
        let (mut dense, _, bias) = random_dense(&mut value, inputs, outputs);
        dense.quantize(kernel);
        let Weight::Int8(matrix, _) = &dense.weight else {
            unreachable!("just quantised")
        };
        let pool = two_threads();
        for rows in [1, 13, FEW_ROWS + 1, ROW_BLOCK, ROW_BLOCK + 3] {
            let x: Vec<f32> = (0..rows * inputs).map(|_| value()).collect();
            let out = forward_on(&pool, &dense, &x, rows);
            let mut whole = vec![0.0; rows * outputs];
            let q = Kernel::Portable.quantize_rows(&x, inputs);
            Kernel::Portable.product(&q, matrix, 0..outputs, &bias, &mut whole);
            assert_eq!(out, whole, "{} {rows} rows", kernel.name());
        }
    }
}
