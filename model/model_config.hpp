// Plain configuration of the model, the data and the training loop. No LibTorch, no CAF:
// app/ fills these from YAML, everything else reads them.
#pragma once

#include "common/validation.hpp"
#include "model/share_codec.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <utility>

namespace gwtf::model {

/// Decoder family.
enum class architecture {
  gpt,   ///< learned positions, LayerNorm, GELU MLP
  llama, ///< RoPE, RMSNorm, SwiGLU, no biases
};

/// Names of `architecture` values as they appear in YAML.
constexpr std::array<std::pair<architecture, const char*>, 2> enum_names(architecture) {
  return {{{architecture::gpt, "gpt"}, {architecture::llama, "llama"}}};
}

/// Shape of the decoder-only model and its split into pipeline stages.
struct model_config {
  architecture arch = architecture::gpt; ///< decoder family
  int layers = 4;                        ///< transformer blocks in the whole model
  int hidden = 128;                      ///< model width d
  int heads = 4;                         ///< attention heads; must divide hidden
  int ffn_hidden = 0;                    ///< MLP width; 0 picks 4*d (gpt) or 8d/3 rounded up to 32 (llama)
  int seq_len = 64;                      ///< tokens per sequence
  int vocab = 256;                       ///< vocabulary size (256 = raw bytes)
  int stages = 3;                        ///< pipeline stages S; stage 0 is held by the data holders

  /// Reports every field that is out of range or inconsistent.
  void validate(const issue_sink& report) const;

  /// The MLP width after resolving ffn_hidden = 0.
  int resolved_ffn_hidden() const;
};

/// Where training tokens come from.
enum class data_format {
  text,   ///< raw bytes are the tokens (vocab 256)
  tokens, ///< nanoGPT .bin: flat little-endian uint16 token ids
};

/// Names of `data_format` values as they appear in YAML.
constexpr std::array<std::pair<data_format, const char*>, 2> enum_names(data_format) {
  return {{{data_format::text, "text"}, {data_format::tokens, "tokens"}}};
}

/// The training corpus of a data holder.
struct data_config {
  data_format format = data_format::text; ///< how the file is read
  std::string path;                       ///< corpus file; relative paths start at the config file

  /// Reports every invalid field; `vocab` is the model's vocabulary size.
  void validate(int vocab, const issue_sink& report) const;
};

/// What the hosts train as (docs/atom.md): a pipeline of stages (GWTF, SWARM), or ATOM's
/// whole-model peers, each training the whole model on its own data.
enum class training_mode { pipeline, atom };

constexpr std::array<std::pair<training_mode, const char*>, 2> enum_names(training_mode) {
  return {{{training_mode::pipeline, "pipeline"}, {training_mode::atom, "atom"}}};
}

/// training.mode atom: how the whole-model peers average (docs/atom.md).
struct atom_config {
  /// Local steps (iterations) between two parameter averages; the run's last step is always
  /// followed by one.
  int sync_every = 1;

  /// Reports every invalid field.
  void validate(const issue_sink& report) const;
};

/// The synchronous training loop: global batch, optimizer and schedule.
struct training_config {
  /// pipeline (stages over hosts) or atom (every host a whole-model peer on its own data).
  training_mode mode = training_mode::pipeline;
  atom_config atom; ///< training.mode atom only
  std::uint64_t seed = 1;          ///< seeds sampling, initialisation and every random choice
  int iterations = 100;            ///< optimizer steps to run
  int microbatch_size = 4;         ///< sequences per microbatch
  int microbatches_per_holder = 4; ///< microbatches each data holder pushes per iteration
  double lr = 3e-3;                ///< peak learning rate (AdamW)
  double min_lr = 3e-4;            ///< learning rate at the end of the cosine decay
  int warmup_iterations = 10;      ///< linear warm-up length in iterations
  double weight_decay = 0.1;       ///< AdamW decoupled weight decay
  double beta1 = 0.9;              ///< AdamW first-moment decay
  double beta2 = 0.95;             ///< AdamW second-moment decay
  double grad_clip = 1.0;          ///< global gradient-norm clip; 0 disables clipping
  std::string loss_out;            ///< file for the per-iteration loss series; empty = none
  /// The cluster's data holders in holder-index order (a holder's index picks its data).
  /// Node mode: required, the same on every host. Embedded: empty = hosts' data holders in order.
  std::vector<std::string> data_holders;
  /// Every replica writes its stage's state after each this many iterations and after the
  /// last one, under node.data_dir (docs/checkpoints.md); 0 = never.
  int checkpoint_every = 0;
  int checkpoint_keep = 3; ///< checkpoints kept per stage and host (older ones are removed)
  /// Each checkpoint is also pushed to this many live hosts of other stages, which store the
  /// bytes under node.data_dir/HOST/replicas/OWNER/ (docs/checkpoints.md); 0 = none.
  int checkpoint_replicas = 1;
  /// The pace of those copies, in MB/s per copy (0 = as fast as the link takes them): chunks
  /// leave one by one with gaps, so that activations between the same hosts are not queued
  /// behind a whole stage's state (docs/checkpoints.md).
  double checkpoint_push_mb_s = 0;
  /// How the replicas of a stage send each other their gradient shares: fp32 (exact), bf16
  /// or int8 with per-block scales and error feedback (model/share_codec.hpp). bf16 by
  /// default: half the bytes at no loss cost measured on the demo (docs/benchmarks.md,
  /// "Compressed gradient shares"); fp32 for runs that must equal the reference trainer.
  model::share_compression share_compression = model::share_compression::bf16;
  /// How they exchange them: butterfly (reduce-scatter + all-gather, from 3 replicas on) or
  /// all_to_all (every replica's whole share to every other).
  model::share_exchange share_exchange = model::share_exchange::butterfly;
  /// When the averaged gradient is applied: sync, or overlap (one iteration stale, as
  /// hivemind's delayed optimizer step), in the runtime, the reference trainer and the
  /// simulator alike (docs/runtime.md, "Overlapped averaging").
  model::averaging_mode averaging = model::averaging_mode::sync;
  /// How a replica adds its microbatches' gradients: off (one float32 running sum per data
  /// holder, as they arrive: the least memory and compute), key_order (each kept apart until
  /// the averaging point and added in microbatch-key order: its sums do not depend on arrival
  /// order; with one replica per stage runs are bit for bit alike; one gradient copy per
  /// microbatch counted) or exact (each rounded once onto a fixed grid, 2^-40, and added as
  /// int64, shares too: any grouping over replicas gives the same bits, so runs are bit for bit
  /// alike with any number of replicas; int64 shares, fp32 compression only).
  /// docs/model.md, "Reproducible sums"; the costs in docs/benchmarks.md.
  model::sum_order reproducible_sums = model::sum_order::off;

  /// Reports every field that is out of range or inconsistent.
  void validate(const issue_sink& report) const;
};

/// The most data holders, and microbatches per holder and iteration, that a microbatch's key
/// holds (model::microbatch_id::key(): 12 bits each); the configs are validated to them.
inline constexpr std::uint32_t max_data_holders = 4096;
inline constexpr std::uint32_t max_microbatches_per_holder = 4096;

/// Field lists: drive the YAML reader, the printer and the docs check (app/).
template <class F>
void visit_fields(F& f, model_config& x) {
  f("arch", x.arch);
  f("layers", x.layers);
  f("hidden", x.hidden);
  f("heads", x.heads);
  f("ffn_hidden", x.ffn_hidden);
  f("seq_len", x.seq_len);
  f("vocab", x.vocab);
  f("stages", x.stages);
}

template <class F>
void visit_fields(F& f, data_config& x) {
  f("format", x.format);
  f("path", x.path);
}

template <class F>
void visit_fields(F& f, atom_config& x) {
  f("sync_every", x.sync_every);
}

template <class F>
void visit_fields(F& f, training_config& x) {
  f("mode", x.mode);
  f("atom", x.atom);
  f("seed", x.seed);
  f("iterations", x.iterations);
  f("microbatch_size", x.microbatch_size);
  f("microbatches_per_holder", x.microbatches_per_holder);
  f("lr", x.lr);
  f("min_lr", x.min_lr);
  f("warmup_iterations", x.warmup_iterations);
  f("weight_decay", x.weight_decay);
  f("beta1", x.beta1);
  f("beta2", x.beta2);
  f("grad_clip", x.grad_clip);
  f("loss_out", x.loss_out);
  f("data_holders", x.data_holders);
  f("checkpoint_every", x.checkpoint_every);
  f("checkpoint_keep", x.checkpoint_keep);
  f("checkpoint_replicas", x.checkpoint_replicas);
  f("checkpoint_push_mb_s", x.checkpoint_push_mb_s);
  f("share_compression", x.share_compression);
  f("share_exchange", x.share_exchange);
  f("averaging", x.averaging);
  f("reproducible_sums", x.reproducible_sums);
}

} // namespace gwtf::model
