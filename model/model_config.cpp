#include "model/model_config.hpp"

#include <cmath>
#include <string>

namespace gwtf::model {

namespace {

// Keeps a tiny config from allocating gigabytes by a typo (an extra zero in `hidden`).
constexpr int max_dimension = 1 << 16;
constexpr int max_vocab = 1 << 20;

} // namespace

int model_config::resolved_ffn_hidden() const {
  if (ffn_hidden > 0)
    return ffn_hidden;
  if (arch == architecture::gpt)
    return 4 * hidden;
  // LLaMA: 2/3 of 4d keeps SwiGLU's three matrices at the cost of GELU's two.
  int f = (8 * hidden + 2) / 3;
  return (f + 31) / 32 * 32;
}

void model_config::validate(const issue_sink& report) const {
  check_int(report, "layers", layers, 1, 4096, "a number of transformer blocks");
  check_int(report, "hidden", hidden, 8, max_dimension, "a model width");
  check_int(report, "heads", heads, 1, 1024, "a number of attention heads");
  if (heads >= 1 && hidden >= 8 && hidden % heads != 0)
    report("heads", "a divisor of hidden (" + std::to_string(hidden) + "), got "
                      + std::to_string(heads));
  if (arch == architecture::llama && heads >= 1 && hidden % heads == 0 && (hidden / heads) % 2 != 0)
    report("heads", "an even head size hidden/heads for RoPE, got " + std::to_string(hidden / heads));
  check_int(report, "ffn_hidden", ffn_hidden, 0, 4 * max_dimension,
              "an MLP width (0 = derive from hidden)");
  check_int(report, "seq_len", seq_len, 1, max_dimension, "a sequence length");
  check_int(report, "vocab", vocab, 2, max_vocab, "a vocabulary size");
  check_int(report, "stages", stages, 2, 1024, "a number of pipeline stages (stage 0 + relays)");
  if (stages >= 2 && layers >= 1 && layers < stages - 1)
    report("stages", "at most layers + 1 = " + std::to_string(layers + 1)
                       + " so that every relay stage holds a block, got " + std::to_string(stages));
}

void data_config::validate(int vocab, const issue_sink& report) const {
  if (path.empty())
    report("path", "the path of a corpus file");
  if (format == data_format::text && vocab < 256)
    report("format", "'tokens' when model.vocab < 256 (text uses all 256 byte values)");
  if (format == data_format::tokens && vocab > 65536)
    report("format", "'text' or model.vocab <= 65536 (tokens files hold uint16 ids)");
}

void atom_config::validate(const issue_sink& report) const {
  check_int(report, "sync_every", sync_every, 1, 100'000'000, "a number of local steps between averages");
}

void training_config::validate(const issue_sink& report) const {
  atom.validate(nested_sink(report, "atom"));
  check_int(report, "iterations", iterations, 1, 100'000'000, "a number of iterations");
  check_int(report, "microbatch_size", microbatch_size, 1, 65536, "sequences per microbatch");
  check_int(report, "microbatches_per_holder", microbatches_per_holder, 1, max_microbatches_per_holder,
            "microbatches per data holder and iteration (a microbatch id keeps 12 bits for its index)");
  check_real(report, "lr", lr, 0.0, bound::open, 10.0, bound::closed, "a learning rate");
  check_real(report, "min_lr", min_lr, 0.0, bound::closed, 10.0, bound::closed, "a learning rate");
  if (std::isfinite(lr) && std::isfinite(min_lr) && min_lr > lr)
    report("min_lr", "at most lr (" + format_number(lr) + "), got " + format_number(min_lr));
  check_int(report, "warmup_iterations", warmup_iterations, 0, 100'000'000,
              "a number of warm-up iterations");
  check_real(report, "weight_decay", weight_decay, 0.0, bound::closed, 1.0, bound::closed, "a weight decay");
  check_real(report, "beta1", beta1, 0.0, bound::closed, 1.0, bound::closed, "an Adam beta below 1");
  check_real(report, "beta2", beta2, 0.0, bound::closed, 1.0, bound::closed, "an Adam beta below 1");
  if (beta1 == 1.0)
    report("beta1", "a value below 1 (1 never updates the moment)");
  if (beta2 == 1.0)
    report("beta2", "a value below 1 (1 never updates the moment)");
  check_real(report, "grad_clip", grad_clip, 0.0, bound::closed, 1e9, bound::closed, "a gradient-norm clip (0 = off)");
  check_int(report, "checkpoint_every", checkpoint_every, 0, 100'000'000, "a number of iterations (0 = no checkpoints)");
  check_int(report, "checkpoint_keep", checkpoint_keep, 1, 1'000'000, "a number of checkpoints to keep");
  check_int(report, "checkpoint_replicas", checkpoint_replicas, 0, 16, "a number of hosts to copy each checkpoint to");
  check_real(report, "checkpoint_push_mb_s", checkpoint_push_mb_s, 0.0, bound::closed, 1e6, bound::closed,
             "megabytes per second per copy (0 = unpaced)");
  check_int(report, "data_holders", static_cast<long long>(data_holders.size()), 0, 4095,
            "a number of data holders (the wire's holder index has 12 bits)");
  for (std::size_t i = 0; i < data_holders.size(); ++i) {
    auto key = "data_holders[" + std::to_string(i) + "]";
    if (!is_host_name(data_holders[i]))
      report(key, "a host name of 1-64 characters from [A-Za-z0-9._-], got '" + data_holders[i] + "'");
    for (std::size_t j = 0; j < i; ++j)
      if (data_holders[j] == data_holders[i])
        report(key, "each data holder once, got '" + data_holders[i] + "' twice");
  }
  if (reproducible_sums == sum_order::exact && share_compression != share_compression::fp32)
    report("reproducible_sums", std::string{"key_order or off with share_compression "}
                                  + (share_compression == share_compression::bf16 ? "bf16" : "int8")
                                  + " (exact sums travel as int64 integers: a compressed share would round them "
                                    "again; set training.share_compression: fp32, the default is bf16), got exact");
}

} // namespace gwtf::model
