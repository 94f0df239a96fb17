//! A BERT encoder forward pass for inference on the CPU, built from candle
//! tensor ops and shaped for sentence embeddings: one fused query/key/value
//! projection, the single-pass softmax, and no dropout or pooler layers.

use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{LayerNorm, VarBuilder};
use serde::Deserialize;

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

/// A dense layer kept as `x · Wᵀ + b` with `Wᵀ` stored contiguous, so every
/// call is one GEMM on a row-major operand.
struct Dense {
    weight_t: Tensor,
    bias: Tensor,
}

impl Dense {
    fn load(vb: &VarBuilder, inputs: usize, outputs: usize) -> Result<Self> {
        let weight = vb.get((outputs, inputs), "weight")?;
        Ok(Self {
            weight_t: weight.t()?.contiguous()?,
            bias: vb.get(outputs, "bias")?,
        })
    }

    /// Query, key and value weights side by side: three GEMMs become one.
    fn load_fused(vbs: &[VarBuilder], inputs: usize, outputs: usize) -> Result<Self> {
        let mut weights = Vec::with_capacity(vbs.len());
        let mut biases = Vec::with_capacity(vbs.len());
        for vb in vbs {
            weights.push(vb.get((outputs, inputs), "weight")?);
            biases.push(vb.get(outputs, "bias")?);
        }
        Ok(Self {
            weight_t: Tensor::cat(&weights, 0)?.t()?.contiguous()?,
            bias: Tensor::cat(&biases, 0)?,
        })
    }

    /// `x` is `(rows, inputs)`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight_t)?.broadcast_add(&self.bias)
    }
}

struct Layer {
    qkv: Dense,
    attention_out: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    output_norm: LayerNorm,
}

/// The encoder stack of a BERT checkpoint in Hugging Face's tensor naming.
pub(crate) struct Bert {
    word_embeddings: Tensor,
    position_embeddings: Tensor,
    // Every input is a single segment, so the token-type embedding is one row.
    token_type_row: Tensor,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
}

fn layer_norm(vb: &VarBuilder, size: usize, eps: f64) -> Result<LayerNorm> {
    Ok(LayerNorm::new(
        vb.get(size, "weight")?,
        vb.get(size, "bias")?,
        eps,
    ))
}

impl Bert {
    pub(crate) fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        // Some checkpoints nest everything under "bert.".
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            vb.pp("bert")
        } else {
            vb
        };
        let hidden = config.hidden_size;
        // The exact erf GELU is the only activation implemented; a checkpoint
        // asking for another would silently produce wrong vectors.
        if config.hidden_act != "gelu" {
            candle_core::bail!(
                "hidden_act {:?} is not supported, only \"gelu\"",
                config.hidden_act
            );
        }
        if config.num_attention_heads == 0 || !hidden.is_multiple_of(config.num_attention_heads) {
            candle_core::bail!(
                "hidden size {hidden} is not a multiple of {} attention heads",
                config.num_attention_heads
            );
        }
        let eps = config.layer_norm_eps;
        let emb = vb.pp("embeddings");
        let word_embeddings = emb.get((config.vocab_size, hidden), "word_embeddings.weight")?;
        let position_embeddings = emb.get(
            (config.max_position_embeddings, hidden),
            "position_embeddings.weight",
        )?;
        let token_type_row = emb
            .get(
                (config.type_vocab_size, hidden),
                "token_type_embeddings.weight",
            )?
            .get(0)?;
        let embeddings_norm = layer_norm(&emb.pp("LayerNorm"), hidden, eps)?;

        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let attention = l.pp("attention");
            let own = attention.pp("self");
            layers.push(Layer {
                qkv: Dense::load_fused(
                    &[own.pp("query"), own.pp("key"), own.pp("value")],
                    hidden,
                    hidden,
                )?,
                attention_out: Dense::load(&attention.pp("output.dense"), hidden, hidden)?,
                attention_norm: layer_norm(&attention.pp("output.LayerNorm"), hidden, eps)?,
                intermediate: Dense::load(
                    &l.pp("intermediate.dense"),
                    hidden,
                    config.intermediate_size,
                )?,
                output: Dense::load(&l.pp("output.dense"), config.intermediate_size, hidden)?,
                output_norm: layer_norm(&l.pp("output.LayerNorm"), hidden, eps)?,
            });
        }
        Ok(Self {
            word_embeddings,
            position_embeddings,
            token_type_row,
            embeddings_norm,
            layers,
            heads: config.num_attention_heads,
            head_size: hidden / config.num_attention_heads,
        })
    }

    /// Hidden states `(batch, seq, hidden)` for token ids and attention mask,
    /// both `(batch, seq)`.
    pub(crate) fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        let hidden = self.heads * self.head_size;
        let words = self
            .word_embeddings
            .index_select(&ids.flatten_all()?, 0)?
            .reshape((batch, seq, hidden))?;
        let positions = self.position_embeddings.narrow(0, 0, seq)?;
        let x = words
            .broadcast_add(&positions)?
            .broadcast_add(&self.token_type_row)?;
        let mut x = self
            .embeddings_norm
            .forward(&x)?
            .reshape((batch * seq, hidden))?;

        // Padding gets a large negative score so softmax gives it no weight;
        // finite, unlike -inf, so a row never turns into NaN.
        let mask_bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?.reshape((batch, 1, 1, seq))?;
        let scale = 1.0 / (self.head_size as f64).sqrt();

        for layer in &self.layers {
            let qkv = layer
                .qkv
                .forward(&x)?
                .reshape((batch, seq, 3, self.heads, self.head_size))?
                .permute((2, 0, 3, 1, 4))?
                .contiguous()?;
            let q = (qkv.get(0)? * scale)?;
            let k = qkv.get(1)?;
            let v = qkv.get(2)?;
            let scores = q.matmul(&k.t()?)?.broadcast_add(&mask_bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((batch * seq, hidden))?;
            let attended = layer
                .attention_norm
                .forward(&(layer.attention_out.forward(&context)? + &x)?)?;
            let expanded = layer.intermediate.forward(&attended)?.gelu_erf()?;
            x = layer
                .output_norm
                .forward(&(layer.output.forward(&expanded)? + &attended)?)?;
        }
        x.reshape((batch, seq, hidden))
    }
}
