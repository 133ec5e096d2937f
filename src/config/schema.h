// The config's schema, written once: every key of every section with its JSON name, its
// meaning and its value check. The parser, the printer and the reference table (parse.cpp,
// print.cpp) each walk these same fields, so a key cannot be parsed but not printed or
// documented. Only the config layer includes this header.
#pragma once

#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include "config/config.h"

namespace nmt {

// Keys and values as they appear in messages: long ones are cut, so a message stays readable.
std::string clip(std::string s, size_t max = 60);

// A value check: returns an error text, or nullopt when the value is fine.
template <class T>
using Check = std::function<std::optional<std::string>(const T&)>;

Check<int64_t> at_least(int64_t lo);
Check<int64_t> int_range(int64_t lo, int64_t hi);
Check<double> in_range(double lo, double hi, bool hi_inclusive = true);
// A device name as train.device and --device take it: auto | cpu | cuda | cuda:N.
Check<std::string> device_name();
Check<Duration> duration_at_most(double max_seconds);
Check<std::string> not_empty();
// A corpus tag: 1 to 64 bytes, no whitespace, no ',' and none of the special pieces.
Check<std::string> tag_text();

template <class T>
Check<T> any() {
  return [](const T&) -> std::optional<std::string> { return std::nullopt; };
}

// A visitor V has section(name, struct), list(name, vector, doc), for_arch(arch, active, fields),
// operator()(name, field, doc, check) and optional(name, string, doc, check): a string key that
// is given with a value or left out, so it is printed only when it is not empty.
template <class V>
void visit(CorpusConfig& c, V& v) {
  v("src", c.src, "source file (plain text or gzip), one sentence a line", not_empty());
  v("tgt", c.tgt, "target file, aligned line by line with src", not_empty());
  v("weight", c.weight,
    "an epoch takes weight x the corpus's pairs: whole copies, then a sample for the fraction "
    "(0 = none)",
    in_range(0.0, 1e6));
  v.optional("tag", c.tag,
             "a piece such as `<BT>` (tagged back-translation) whose id starts every source "
             "sentence of this corpus: a user-defined piece of the trained source vocabulary; "
             "translate --tag asks for that kind of source (left out = no tag)",
             tag_text());
}

template <class V>
void visit(SubwordSampling& c, V& v) {
  v("enabled", c.enabled,
    "draw a segmentation of each training sentence each time it is read (subword "
    "regularization); validation, eval and translate use the best one",
    any<bool>());
  v("alpha", c.alpha,
    "unigram vocabularies: smoothing of the draw (near 0: all segmentations alike; large: the "
    "best one)",
    in_range(0.0, 100.0));
  v("nbest", c.nbest,
    "unigram vocabularies: draw among this many best segmentations (-1 = among all of them)",
    Check<int64_t>([](const int64_t& n) -> std::optional<std::string> {
      if (n == -1 || (n >= 2 && n <= 512)) return std::nullopt;
      return "must be -1 (all segmentations) or in [2, 512], got " + std::to_string(n);
    }));
  v("dropout", c.dropout, "bpe vocabularies: probability that each merge is skipped (BPE-dropout)",
    in_range(0.0, 1.0, false));
}

template <class V>
void visit(DataConfig& c, V& v) {
  v("train_src", c.train_src, "training source file (plain text or gzip), one sentence a line",
    any<std::string>());
  v("train_tgt", c.train_tgt, "training target file, aligned line by line with train_src",
    any<std::string>());
  v.list("train", c.train,
         "several training corpora, each {src, tgt, weight, tag}, instead of train_src/train_tgt");
  v("train_store", c.train_store,
    "a token store made by nmt prepare to train on instead of the text files (\"\" = none)",
    any<std::string>());
  v("cache_dir", c.cache_dir,
    "where nmt train prepares the text into a token store, shared by runs with the same data "
    "(\"\" = the run directory)",
    any<std::string>());
  v("in_memory", c.in_memory,
    "copy the token store's ids into memory instead of mapping the file (memory grows with the "
    "corpus)",
    any<bool>());
  v("valid_src", c.valid_src, "validation source file (\"\" = no validation)", any<std::string>());
  v("valid_tgt", c.valid_tgt, "validation target file", any<std::string>());
  v("max_len", c.max_len, "drop training pairs with more pieces than this on either side",
    int_range(1, 65535));
  v("max_len_ratio", c.max_len_ratio,
    "drop training pairs whose longer side has more than this times the pieces of the shorter "
    "(0 = off)",
    Check<double>([](const double& v) -> std::optional<std::string> {
      if (v == 0.0 || (v >= 1.0 && v <= 1e6)) return std::nullopt;
      std::ostringstream os;
      os << "must be 0 (off) or in [1, 1e6], got " << v;
      return os.str();
    }));
  v("dedup", c.dedup, "drop training pairs identical to an earlier pair (by a 64-bit hash)",
    any<bool>());
  // Printed only when on: configs and checkpoints without sampling keep their bytes.
  v.optional_section("src_sampling", c.src_sampling, c.src_sampling.enabled);
  v.optional_section("tgt_sampling", c.tgt_sampling, c.tgt_sampling.enabled);
}


template <class V>
void visit(VocabConfig& c, V& v) {
  v("joint", c.joint, "one SentencePiece model shared by source and target", any<bool>());
  v("size", c.size, "vocabulary size when a model is trained", at_least(8));
  v("model_type", c.model_type, "SentencePiece model type: unigram | bpe | char | word",
    any<VocabType>());
  v("character_coverage", c.character_coverage,
    "share of characters the vocabulary must cover (0.98 for CJK)", in_range(0.5, 1.0));
  v("input_sentence_size", c.input_sentence_size, "sentences sampled to train the vocabulary",
    at_least(1));
  v("max_sentence_length", c.max_sentence_length,
    "longer lines (in bytes) are left out of the vocabulary's sample", at_least(1));
  v("model", c.model, "existing joint .model file; \"\" = train one into the run directory",
    any<std::string>());
  v("src_model", c.src_model, "existing source .model when joint = false; \"\" = train one",
    any<std::string>());
  v("tgt_model", c.tgt_model, "existing target .model when joint = false; \"\" = train one",
    any<std::string>());
}

template <class V>
void visit(RnnConfig& c, V& v) {
  v("cell", c.cell, "recurrent cell of encoder and decoder: gru | lstm", any<RnnCell>());
  v("hidden", c.hidden, "decoder state width; each encoder direction has half of it (must be even)",
    at_least(2));
  v("layers", c.layers, "encoder layers (bidirectional) and decoder layers", at_least(1));
  v("attention", c.attention,
    "bahdanau (additive: v . tanh(W s + U h)) | luong_dot (s . h) | luong_general (s . W h)",
    any<RnnAttentionKind>());
}

template <class V>
void visit(ModelConfig& c, V& v) {
  v("arch", c.arch, "model family: transformer | rnn (bidirectional encoder, attention decoder)",
    any<Arch>());
  v("d_model", c.d_model,
    "width of embeddings and hidden states (rnn: embeddings and the attentional vector)",
    at_least(2));
  v("dropout", c.dropout,
    "dropout on embeddings, residual branches and (unless activation_dropout) the ReLU output "
    "(rnn: embeddings, between layers, the attentional vector)",
    in_range(0.0, 1.0, false));
  v("max_positions", c.max_positions,
    "longest sequence the model takes (transformer: the position table)", at_least(2));
  v("tie_embeddings", c.tie_embeddings,
    "none | decoder (decoder input and output) | all (also the encoder; needs a joint vocab)",
    any<TieEmbeddings>());
  v.for_arch(Arch::kTransformer, c.arch, [&] {
    v("heads", c.heads, "attention heads; must divide d_model", at_least(1));
    v("encoder_layers", c.encoder_layers, "encoder layers", at_least(1));
    v("decoder_layers", c.decoder_layers, "decoder layers", at_least(1));
    v("d_ff", c.d_ff, "inner width of the feed-forward blocks", at_least(1));
    v("attention_dropout", c.attention_dropout, "dropout on attention weights",
      in_range(0.0, 1.0, false));
    v("activation_dropout", c.activation_dropout,
      "dropout on the ReLU output inside the feed-forward blocks (fairseq's activation_dropout); "
      "-1 = model.dropout",
      Check<double>([](const double& v) -> std::optional<std::string> {
        if (v == -1.0 || (v >= 0.0 && v < 1.0)) return std::nullopt;
        std::ostringstream os;
        os << "must be -1 (= model.dropout) or in [0, 1), got " << v;
        return os.str();
      }));
    v("positional", c.positional, "position encoding: sinusoidal | learned",
      any<Positional>());
    v("norm", c.norm, "post (the paper's) | pre (LayerNorm before each block, plus a final one)",
      any<Norm>());
  });
  v.for_arch(Arch::kRnn, c.arch, [&] { v.section("rnn", c.rnn); });
}

template <class V>
void visit(TrainConfig& c, V& v) {
  v("max_steps", c.max_steps, "stop after this many optimizer steps (0 = no limit)", at_least(0));
  v("max_epochs", c.max_epochs, "stop after this many passes over the data (0 = no limit)",
    at_least(0));
  v("max_time", c.max_time,
    "stop when the training time (across --resume) reaches this, with a final validation and "
    "checkpoint: seconds, or a string such as \"90s\", \"45m\", \"2h\", \"1h30m\" (0 = no "
    "limit)",
    duration_at_most(10 * 365 * 86400.0));
  v("seed", c.seed, "seed for initialisation, shuffling and dropout", at_least(0));
  v("threads", c.threads, "intra-op CPU threads (0 = all cores)", at_least(0));
  v("device", c.device,
    "auto (CUDA when available, else the CPU) | cpu | cuda | cuda:N (--device overrides it)",
    device_name());
  v("precision", c.precision,
    "fp32 | bf16 | fp16 | auto: mixed precision by CUDA autocast, weights and Adam state stay "
    "fp32, the loss in fp32; fp16 adds dynamic loss scaling. On the CPU, bf16 runs the linear "
    "layers' products in bfloat16 (AVX512-BF16 CPUs), all else in fp32. auto: bf16 on a CPU "
    "with AVX512-BF16, else fp32 (CUDA included)",
    any<PrecisionSetting>());
  v("log_every", c.log_every, "steps between log lines and metrics.jsonl rows, plus one at the end",
    at_least(1));
  v("save_every", c.save_every, "steps between checkpoints (a final one is always written)",
    at_least(1));
  v("keep_last", c.keep_last, "checkpoints kept under DIR/checkpoints", at_least(1));
  v("average_last", c.average_last,
    "at the end of training, average the weights of this many checkpoints into "
    "DIR/checkpoints/averaged and validate it; --checkpoint DIR then takes the better of best and "
    "averaged (0 = off, else >= 2)",
    at_least(0));
  v("average_best", c.average_best,
    "average the average_last checkpoints with the best validation best_metric instead of the "
    "newest (they are kept beside keep_last; needs valid_every)",
    any<bool>());
  v("batch_tokens", c.batch_tokens,
    "token budget of one batch: rows x padded width (must be > data.max_len)", at_least(2));
  v("accum_steps", c.accum_steps, "batches whose gradients are summed per optimizer step",
    at_least(1));
  v("lr_schedule", c.lr_schedule,
    "noam: factor * d_model^-0.5 * min(s^-0.5, s * w^-1.5) | inverse_sqrt: lr * min(s / w, "
    "sqrt(w / s)) | constant: lr * min(1, s / w) (s the step, w warmup_steps)",
    any<LrSchedule>());
  v("warmup_steps", c.warmup_steps, "warm-up steps of the learning-rate schedule", at_least(1));
  v("lr_factor", c.lr_factor, "noam's scale factor", in_range(0.0, 1e6));
  v("lr", c.lr, "peak learning rate of inverse_sqrt and constant", in_range(0.0, 1e3));
  v("cooldown", c.cooldown,
    "share of the run, at its end, over which the schedule's rate falls linearly to zero; the run "
    "ends at max_steps, max_epochs or max_time, whichever comes first (0 = no cool-down)",
    in_range(0.0, 1.0));
  v("adam_beta1", c.adam_beta1, "Adam beta1", in_range(0.0, 1.0, false));
  v("adam_beta2", c.adam_beta2, "Adam beta2", in_range(0.0, 1.0, false));
  v("adam_eps", c.adam_eps, "Adam epsilon", in_range(0.0, 1.0));
  v("label_smoothing", c.label_smoothing, "probability mass spread over the vocabulary",
    in_range(0.0, 1.0, false));
  v("clip_norm", c.clip_norm, "clip the global gradient norm to this (0 = off)",
    in_range(0.0, 1e9));
  v("valid_every", c.valid_every,
    "steps between validation passes: loss, perplexity and BLEU (0 = only at the end)",
    at_least(0));
  v("valid_beam", c.valid_beam, "beam size for validation BLEU (1 = greedy)", at_least(1));
  v("best_metric", c.best_metric,
    "what picks DIR/checkpoints/best: validation bleu, chrf (higher is better) or loss",
    any<BestMetric>());
  v("patience", c.patience,
    "stop after this many validations without improvement of best_metric (0 = off)", at_least(0));
  v("max_bad_steps", c.max_bad_steps,
    "stop with an error after this many consecutive steps with a non-finite loss or gradient "
    "norm (each is skipped)",
    at_least(1));
  v("auto_resume", c.auto_resume,
    "under torchrun: continue from the run directory's newest complete checkpoint when it has "
    "one, as a restarted worker group must (--resume is then implied)",
    any<bool>());
  v("dist_timeout", c.dist_timeout,
    "seconds a data-parallel collective (or the rendezvous) waits for the other ranks before "
    "failing the group",
    int_range(1, 86400));
}

template <class V>
void visit(DecodeConfig& c, V& v) {
  v("max_len_a", c.max_len_a, "output length limit: a * source_length + b", in_range(0.0, 1e3));
  v("max_len_b", c.max_len_b, "output length limit: a * source_length + b", at_least(0));
  v("batch_tokens", c.batch_tokens, "source-token budget of one translation batch", at_least(1));
  v("beam_size", c.beam_size, "hypotheses kept per sentence during search (1 = greedy)",
    at_least(1));
  v("length_penalty", c.length_penalty,
    "GNMT length penalty alpha: score = log P / ((5 + |Y|) / 6)^alpha, |Y| with EOS (0 = none)",
    in_range(0.0, 10.0));
  v("nbest", c.nbest, "hypotheses written per sentence (at most beam_size)", at_least(1));
}

template <class V>
void visit(Config& c, V& v) {
  v.section("data", c.data);
  v.section("vocab", c.vocab);
  v.section("model", c.model);
  v.section("train", c.train);
  v.section("decode", c.decode);
}

}  // namespace nmt
