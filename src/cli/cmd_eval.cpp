#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <unistd.h>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "cli/decode_flags.h"
#include "eval/evaluate.h"
#include "eval/metrics.h"
#include "util/io.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

namespace {

// sacreBLEU's one-line summary: BLEU = 27.43 58.9/33.6/20.8/13.1 (BP = 1.000 ratio = ...).
std::string bleu_summary(const BleuResult& b) {
  char buf[256];
  const double ratio =
      b.ref_len > 0 ? static_cast<double>(b.sys_len) / static_cast<double>(b.ref_len) : 0.0;
  std::snprintf(buf, sizeof buf,
                "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld "
                "ref_len = %lld)",
                b.score, b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.bp,
                ratio, static_cast<long long>(b.sys_len), static_cast<long long>(b.ref_len));
  return buf;
}

struct EvalArgs {
  std::vector<std::string> checkpoints;
  std::string src, ref, hyp, hyp_out;
  DecodeFlags decode;
  bool json = false;
};

void check_eval_args(const EvalArgs& args) {
  if (args.checkpoints.empty() == args.hyp.empty())
    throw Error("give either --checkpoint with --src, or --hyp");
  if (!args.checkpoints.empty() && args.src.empty())
    throw Error("--checkpoint needs --src, the source file to translate");
  if (args.hyp.empty() == false && (!args.src.empty() || !args.hyp_out.empty()))
    throw Error("--src and --hyp-out need --checkpoint; --hyp scores an existing file");
  // Refused before the translation, not after it.
  if (!args.hyp_out.empty()) check_writable_file(args.hyp_out);
}

// Translates --src and scores it; the report gets the model's entries, loss_line the reference
// loss in words.
FileEval translate_and_score(const EvalArgs& args, const DecodeRequest& request,
                             nlohmann::json& report, std::string& loss_line) {
  const DecodeOptions& decode = request.options;
  use_inference_threads(decode);
  const DecodingModels d = load_for_decoding(request.checkpoints, decode);
  const LoadedModel& m = d.first();
  TranslateOptions options = d.translate;
  options.search.nbest = 1;
  spdlog::info("translating {} with {} (beam {})", args.src, m.dir, options.search.beam_size);
  // Translations go to a temporary file renamed over --hyp-out at the end.
  const std::string tmp =
      args.hyp_out.empty() ? "" : args.hyp_out + ".tmp-" + std::to_string(::getpid());
  std::optional<OutFile> hyp_out;
  if (!tmp.empty()) hyp_out.emplace(tmp, OutFile::Mode::kTruncate);
  FileEval e;
  try {
    // The reference loss covers the pairs both sides of which can be encoded.
    e = evaluate_files(*d.scorer, m.vocabs, args.src, args.ref, options, options.batch_tokens,
                       [&](const std::string& h) {
                         if (hyp_out) hyp_out->write(h + "\n");
                       });
    if (hyp_out) {
      hyp_out->sync();
      hyp_out->close();
      rename_path(tmp, args.hyp_out);
    }
  } catch (...) {
    if (!tmp.empty()) ::unlink(tmp.c_str());
    throw;
  }
  const auto& r = e.result;
  const auto& cs = e.pairs;
  report = EvalScores(r).to_json();
  report["checkpoint"] = m.dir;
  if (args.checkpoints.size() > 1) report["ensemble"] = args.checkpoints;
  report["beam"] = options.search.beam_size;
  report["length_penalty"] = options.search.length_penalty;
  report["loss_pairs"] = cs.kept;
  report["translate_seconds"] = r.translate_seconds;
  const double secs = std::max(r.translate_seconds, 1e-9);
  report["sent_per_s"] = static_cast<double>(e.sentences) / secs;
  report["tgt_tok_per_s"] = static_cast<double>(r.stats.output_tokens) / secs;
  char buf[256];
  std::snprintf(buf, sizeof buf, "loss = %.4f ppl = %.2f (%lld reference tokens, %lld of %lld pairs)",
                r.loss.nll_per_token, r.loss.ppl, static_cast<long long>(r.loss.tokens),
                static_cast<long long>(cs.kept), static_cast<long long>(e.sentences));
  loss_line = buf;
  if (cs.kept < e.sentences)
    spdlog::warn("reference loss skips {} pairs: {} empty, {} invalid UTF-8",
                 e.sentences - cs.kept, cs.empty, cs.invalid_utf8);
  return e;
}

// The scores, as JSON (--json) or as sacreBLEU's text.
void print_scores(const FileEval& e, nlohmann::json report, const std::string& loss_line,
                  bool json) {
  const BleuResult& bleu = e.result.bleu;
  const ChrfResult& chrf = e.result.chrf;
  // Lowercased as well (sacreBLEU -lc), for setting beside papers that score that way.
  const BleuResult& bleu_lc = e.bleu_lowercase;
  report["bleu"] = bleu.score;
  report["chrf"] = chrf.score;
  report["bleu_lowercase"] = bleu_lc.score;
  report["bleu_signature"] = bleu_signature();
  report["bleu_lowercase_signature"] = bleu_signature(/*lowercase=*/true);
  report["chrf_signature"] = chrf_signature();
  report["sentences"] = e.sentences;
  report["bleu_details"] = {{"precisions", bleu.precisions}, {"counts", bleu.counts},
                            {"totals", bleu.totals},         {"bp", bleu.bp},
                            {"sys_len", bleu.sys_len},       {"ref_len", bleu.ref_len}};
  if (json) {
    write_standard_output(report.dump() + "\n");
    return;
  }
  char chrf_line[64];
  std::snprintf(chrf_line, sizeof chrf_line, "chrF2 = %.2f", chrf.score);
  write_standard_output(
      bleu_summary(bleu) + "\n" + chrf_line + "\nBLEU signature: " + bleu_signature() +
      "\nchrF2 signature: " + chrf_signature() + "\n" + "lowercased " + bleu_summary(bleu_lc) +
      "\nlowercased BLEU signature: " + bleu_signature(true) + "\n" +
      (loss_line.empty() ? "" : loss_line + "\n"));
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand(
      "eval",
      "Score translations with BLEU and chrF (sacreBLEU-compatible): translate --src with a "
      "checkpoint, or score an existing --hyp file");
  auto* ckpt_opt =
      cmd->add_option("--checkpoint", args->checkpoints,
                      "Checkpoint directory, or a run directory (its best checkpoint); repeat it "
                      "for an ensemble")
          ->take_all();
  cmd->add_option("--src", args->src, "Source file to translate (with --checkpoint)");
  cmd->add_option("--ref", args->ref, "Reference translations, one per line")->required();
  auto* hyp_opt = cmd->add_option("--hyp", args->hyp, "Hypothesis file to score (no model)");
  hyp_opt->excludes(ckpt_opt);
  cmd->add_option("--hyp-out", args->hyp_out, "Also write the translations here");
  add_decode_flags(cmd, args->decode);
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->callback([args] {
    setup_logging();
    check_eval_args(*args);
    nlohmann::json report;
    std::string loss_line;
    if (args->checkpoints.empty()) {
      print_scores(score_files(args->hyp, args->ref), report, loss_line, args->json);
      return;
    }
    const FileEval e =
        translate_and_score(*args, decode_request(args->decode, args->checkpoints), report,
                            loss_line);
    print_scores(e, report, loss_line, args->json);
  });
}

}  // namespace nmt
