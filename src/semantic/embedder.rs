//! The sentence encoder: tokenizer + BERT + mean pooling + L2 normalisation, on the CPU.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::cache::hex;
use super::{BATCH, MAX_TOKENS, MODEL_FILES, SemanticError};

/// The largest model file read (2 GiB: a `model.safetensors` of a BERT-large is 1.3 GB); a
/// device named as the model directory's file is refused, not read until memory runs out.
const MAX_MODEL_FILE_BYTES: u64 = 2 << 30;

/// A loaded sentence-embedding model (feature `semantic`). `Send + Sync`: one instance
/// serves every thread; each call runs on the calling thread.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    weights: PathBuf,
    dims: usize,
    digest: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("weights", &self.weights)
            .field("dims", &self.dims)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the sentence-transformers directory `dir`: `config.json` (a BERT configuration),
    /// `tokenizer.json`, `model.safetensors` (f32 weights, with or without a `bert.` prefix).
    ///
    /// The weights are read into memory rather than memory-mapped: mapping a file is `unsafe`
    /// in Rust (another process may change it under the map) and this crate forbids `unsafe`;
    /// candle copies the tensors out of either, so the resident size after loading is the same
    /// (the file's bytes are dropped once the model is built).
    ///
    /// # Errors
    /// A missing or unreadable file (named), a configuration that is not BERT's, a tokenizer
    /// that does not load, or weights that do not fit the configuration.
    pub fn load(dir: &Path) -> Result<Self, SemanticError> {
        let mut hasher = Sha256::new();
        let mut files = Vec::with_capacity(MODEL_FILES.len());
        for name in MODEL_FILES {
            let path = dir.join(name);
            if !path.is_file() {
                return Err(SemanticError::Missing { path });
            }
            let bytes =
                crate::files::read_bytes(&path, MAX_MODEL_FILE_BYTES).map_err(|source| {
                    SemanticError::Read {
                        path: path.clone(),
                        source,
                    }
                })?;
            hasher.update(name.as_bytes());
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
            files.push((path, bytes));
        }
        // The recipe is part of what a cached vector depends on.
        hasher.update(format!("mean-pooled, normalised, {MAX_TOKENS} tokens").as_bytes());
        let digest = hex(&hasher.finalize());
        let [
            (config_path, config),
            (tokenizer_path, tokenizer),
            (weights, model),
        ]: [_; 3] = files.try_into().expect("one entry per model file");
        let config: Config =
            serde_json::from_slice(&config).map_err(|source| SemanticError::Config {
                path: config_path,
                source,
            })?;
        let tokenizer = load_tokenizer(&tokenizer_path, &tokenizer)?;
        let device = Device::Cpu;
        let model_error = |e: candle_core::Error| SemanticError::Model {
            path: weights.clone(),
            message: e.to_string(),
        };
        let vb = VarBuilder::from_buffered_safetensors(model, DType::F32, &device)
            .map_err(model_error)?;
        let model = BertModel::load(vb, &config).map_err(model_error)?;
        Ok(Self {
            model,
            tokenizer,
            device,
            dims: config.hidden_size,
            weights,
            digest,
        })
    }

    /// Width of the vectors (384 for all-MiniLM-L6-v2).
    #[must_use]
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Hex sha256 of the model's files and the recipe: cached vectors are valid for one
    /// digest.
    #[must_use]
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// One L2-normalised vector per text, in order, [`BATCH`] texts at a time (texts of
    /// similar length together, so little padding is computed).
    ///
    /// # Errors
    /// The tokenizer or the model failed (neither happens on ordinary text).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, SemanticError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, vector) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    /// One batch through the tokenizer and the model.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, SemanticError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| SemanticError::Tokenizer {
                path: self.weights.with_file_name(MODEL_FILES[1]),
                message: e.to_string(),
            })?;
        let model_error = |e: candle_core::Error| SemanticError::Model {
            path: self.weights.clone(),
            message: e.to_string(),
        };
        let rows = |f: fn(&tokenizers::Encoding) -> &[u32]| -> Result<Tensor, SemanticError> {
            let rows: Vec<Tensor> = encodings
                .iter()
                .map(|e| Tensor::new(f(e), &self.device))
                .collect::<Result<_, _>>()
                .map_err(model_error)?;
            Tensor::stack(&rows, 0).map_err(model_error)
        };
        let ids = rows(tokenizers::Encoding::get_ids)?;
        let types = rows(tokenizers::Encoding::get_type_ids)?;
        let mask = rows(tokenizers::Encoding::get_attention_mask)?;
        let pooled = (|| {
            let hidden = self.model.forward(&ids, &types, Some(&mask))?;
            // Masked mean over the tokens, then L2 normalisation.
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let mean = summed.broadcast_div(&mask.sum(1)?)?;
            let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
            mean.broadcast_div(&norm)?.to_vec2::<f32>()
        })();
        pooled.map_err(model_error)
    }
}

/// The tokenizer of `tokenizer.json`, truncating at [`MAX_TOKENS`] and padding a batch to its
/// longest text (the shipped file pads and truncates at a fixed 128).
fn load_tokenizer(path: &Path, bytes: &[u8]) -> Result<Tokenizer, SemanticError> {
    let error = |message: String| SemanticError::Tokenizer {
        path: path.to_path_buf(),
        message,
    };
    let mut tokenizer = Tokenizer::from_bytes(bytes).map_err(|e| error(e.to_string()))?;
    let padding = PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        ..tokenizer.get_padding().cloned().unwrap_or_default()
    };
    tokenizer.with_padding(Some(padding));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS,
            ..TruncationParams::default()
        }))
        .map_err(|e| error(e.to_string()))?;
    Ok(tokenizer)
}
