// Decoding and evaluation through the nmt binary, on one shortened quickstart run shared by the
// tests: validation BLEU and the best checkpoint, beam vs greedy, translate's line guarantees,
// n-best, streaming, attention maps, eval, average, early stopping.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "ckpt/checkpoint.h"
#include "eval/evaluate.h"
#include "eval/metrics.h"
#include "helpers.h"
#include "quickstart_run.h"
#include "util/blas.h"

using nlohmann::json;
using nmt_test::read_lines_of;
using nmt_test::run_command;
using nmt_test::write_text;

namespace {
using nmt_test::nmt_bin;
using nmt_test::QuickstartRun;

std::vector<json> metrics_rows(const std::string& path) {
  std::vector<json> rows;
  for (const auto& line : read_lines_of(path)) rows.push_back(json::parse(line));
  return rows;
}

std::vector<double> score_column(const std::vector<std::string>& lines) {
  std::vector<double> scores;
  for (const auto& l : lines) scores.push_back(std::stod(l.substr(l.rfind('\t') + 1)));
  return scores;
}

}  // namespace

TEST(QuickstartRunSetup, TrainsTheSharedModel) { nmt_test::train_shared_run(); }

TEST_F(QuickstartRun, ValidationLogsBleuAndKeepsTheBestCheckpoint) {
  int validations = 0;
  for (const auto& row : metrics_rows(run() + "/metrics.jsonl")) {
    if (!row.contains("valid_loss")) continue;
    ++validations;
    for (const char* key : {"valid_ppl", "valid_bleu", "valid_chrf", "best", "elapsed_s"})
      EXPECT_TRUE(row.contains(key)) << key << " missing in " << row.dump();
    // Quickstart targets are one or two long words, so BLEU (4-grams) says little: chrF does.
    EXPECT_GT(row["valid_chrf"].get<double>(), 50.0);
  }
  EXPECT_EQ(validations, 2);  // steps 250 and 500
  const std::string best = run() + "/checkpoints/best";
  ASSERT_TRUE(std::filesystem::exists(best + "/model.pt"));
  const auto state = json::parse(nmt_test::read_text(best + "/state.json"));
  EXPECT_EQ(state["best_metric"], "chrf");
  EXPECT_TRUE(state["step"] == 250 || state["step"] == 500) << state.dump();
  // A run directory now means its best checkpoint.
  const auto r = run_command(translate("--input " + data() + "/test.en --output /dev/null"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoints/best"), std::string::npos) << r.output;
}

// The quickstart model's beam-5 model score is never worse than greedy's, line by line.
TEST_F(QuickstartRun, BeamFiveScoreNeverWorseThanGreedy) {
  const std::string in = data() + "/test.en";
  auto r =
      run_command(translate("--beam 1 --scores --input " + in + " --output " + path("greedy.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(translate("--beam 5 --scores --input " + in + " --output " + path("beam5.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto greedy = score_column(read_lines_of(path("greedy.txt")));
  const auto beam = score_column(read_lines_of(path("beam5.txt")));
  ASSERT_EQ(greedy.size(), 300u);
  ASSERT_EQ(beam.size(), 300u);
  int better = 0;
  for (size_t i = 0; i < greedy.size(); ++i) {
    EXPECT_GE(beam[i], greedy[i] - 1e-4) << "line " << i + 1;
    if (beam[i] > greedy[i] + 1e-4) ++better;
  }
  RecordProperty("beam_better_lines", better);
}

// Batches decoded side by side (two threads, one batch each) give what one batch at a time on
// one thread gives, line for line and score for score: each batch's arithmetic is the same.
// (Not `ops` on two threads: OpenMP's spinning under ctest -j2 makes that slow on two cores.)
TEST_F(QuickstartRun, BatchesSideBySideGiveTheSameOutput) {
  const std::string in = data() + "/test.en";
  for (const char* beam : {"1", "4"}) {
    std::vector<std::string> outputs;
    for (const char* parallel : {"ops", "batches"}) {
      const std::string out = path(std::string("par_") + parallel + beam + ".txt");
      // A small budget makes many batches.
      const std::string threads = std::string(parallel) == "ops" ? "1" : "2";
      const auto r = run_command(nmt_bin() + " translate --checkpoint " + run() + " --threads " +
                                 threads + " --batch-tokens 300 --scores --beam " + beam +
                                 " --parallel " + parallel + " --input " + in + " --output " + out);
      ASSERT_EQ(r.status, 0) << r.output;
      outputs.push_back(nmt_test::read_text(out));
    }
    EXPECT_EQ(read_lines_of(path(std::string("par_ops") + beam + ".txt")).size(), 300u);
    EXPECT_EQ(outputs[0], outputs[1]) << "beam " << beam;
  }
  const auto r = run_command(translate("--parallel threads --input " + in));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--parallel: must be one of \"auto\", \"batches\", \"ops\""),
            std::string::npos)
      << r.output;
}

TEST_F(QuickstartRun, OneOutputLinePerInputLineWhateverTheInput) {
  std::string long_line;
  for (int i = 0; i < 3000; ++i) long_line += "seven hundred ";
  // Empty, blank, invalid UTF-8, NUL with CRLF, over-long, CRLF, truncated UTF-8 at the end.
  std::string bytes = "twelve\n\n   \t \nbad \xff\xfe bytes\nnul ";
  bytes.push_back('\0');
  bytes += " inside\r\n" + long_line + "\nforty-one\r\n\xc3\n";
  write_text(path("hostile.txt"), bytes);
  for (const char* beam : {"1", "3"}) {
    const auto r = run_command(translate(std::string("--beam ") + beam + " --input " +
                                         path("hostile.txt") + " --output " + path("h.out")));
    ASSERT_EQ(r.status, 0) << r.output;
    const auto out = read_lines_of(path("h.out"));
    ASSERT_EQ(out.size(), 8u) << "beam " << beam;
    EXPECT_FALSE(out[0].empty());
    EXPECT_EQ(out[1], "");
    EXPECT_EQ(out[2], "");
    EXPECT_FALSE(out[6].empty());
    EXPECT_NE(r.output.find("1 lines were longer"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("4 invalid UTF-8 or NUL bytes"), std::string::npos) << r.output;
  }
}

TEST_F(QuickstartRun, NBestListsAreSortedAndComplete) {
  write_text(path("nb.txt"), "twenty-two\n\nnine hundred five\n");
  auto r = run_command(translate("--beam 4 --nbest 3 --input " + path("nb.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<std::string> lines;
  std::istringstream is(r.output);
  for (std::string l; std::getline(is, l);)
    if (l.find(" ||| ") != std::string::npos) lines.push_back(l);
  ASSERT_EQ(lines.size(), 9u) << r.output;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto a = lines[i].find(" ||| "), b = lines[i].rfind(" ||| ");
    ASSERT_NE(a, b) << lines[i];
    EXPECT_EQ(std::stoi(lines[i].substr(0, a)), static_cast<int>(i / 3)) << lines[i];
    if (i % 3 > 0) {
      const double prev = std::stod(lines[i - 1].substr(lines[i - 1].rfind(" ||| ") + 5));
      EXPECT_LE(std::stod(lines[i].substr(b + 5)), prev) << lines[i];
    }
  }
  EXPECT_EQ(lines[3], "1 |||  ||| 0.000000");  // the empty input line
  r = run_command(translate("--beam 2 --nbest 3 --input " + path("nb.txt")));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("exceeds the beam size"), std::string::npos) << r.output;
}

// Output appears while the input is still open: translate works in flushed chunks.
TEST_F(QuickstartRun, StreamingPrintsBeforeEndOfInput) {
  const std::string fifo = path("in.fifo"), out = path("stream.out");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string cmd = "cd '" + nmt_test::source_dir() + "' && " +
                          translate("--chunk-lines 3 --input " + fifo + " --output " + out) +
                          " 2>/dev/null &";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const int fd = ::open(fifo.c_str(), O_WRONLY);  // blocks until nmt opens it
  ASSERT_GE(fd, 0);
  const std::string first = "one\ntwo\nthree\n";
  ASSERT_EQ(::write(fd, first.data(), first.size()), static_cast<ssize_t>(first.size()));
  size_t seen = 0;
  for (int i = 0; i < 600 && seen < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    seen = read_lines_of(out).size();
  }
  EXPECT_EQ(seen, 3u) << "no output before end of input";
  const std::string rest = "four\n";
  ASSERT_EQ(::write(fd, rest.data(), rest.size()), static_cast<ssize_t>(rest.size()));
  ::close(fd);
  for (int i = 0; i < 600 && read_lines_of(out).size() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(read_lines_of(out).size(), 4u);
}

TEST_F(QuickstartRun, AttentionMapsAreWrittenPerSentence) {
  write_text(path("att.txt"), "three hundred twelve\n\nninety\n");
  const std::string out = path("att");
  auto r = run_command(translate("--beam 3 --attention-out " + out + " --input " + path("att.txt") +
                                 " --output /dev/null"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out + "/000002.svg"));  // empty line: nothing to plot
  for (const char* name : {"/000001", "/000003"}) {
    const auto svg = nmt_test::read_text(out + name + ".svg");
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
    EXPECT_NE(svg.find("<svg"), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    const auto j = json::parse(nmt_test::read_text(out + name + ".json"));
    const auto& w = j["weights"];
    ASSERT_EQ(w.size(), j["target"].size());
    EXPECT_EQ(j["target"].back(), "</s>");
    EXPECT_EQ(j["source"].back(), "</s>");
    EXPECT_TRUE(j["head"].is_null());
    EXPECT_EQ(j["layer"], 1);  // the last of two decoder layers
    for (const auto& row : w) {
      ASSERT_EQ(row.size(), j["source"].size());
      double sum = 0;
      for (const auto& v : row) sum += v.get<double>();
      EXPECT_NEAR(sum, 1.0, 1e-3);  // each target piece's attention is a distribution
    }
  }
  r = run_command(translate("--attention-out " + out +
                            " --attention-layer 0 --attention-head 3"
                            " --input " +
                            path("att.txt") + " --output /dev/null"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(json::parse(nmt_test::read_text(out + "/000001.json"))["head"], 3);
  r = run_command(
      translate("--attention-out " + out + " --attention-layer 2 --input " + path("att.txt")));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("attention layer 2 is out of range"), std::string::npos) << r.output;
}

TEST_F(QuickstartRun, EvalScoresCheckpointsAndFiles) {
  const std::string src = data() + "/test.en", ref = data() + "/test.de";
  auto r =
      run_command(nmt_bin() + " eval --checkpoint " + run() + " --threads 1 --beam 2 --src " + src +
                  " --ref " + ref + " --hyp-out " + path("eval.hyp") + " --json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = json::parse(r.output);
  for (const char* key :
       {"bleu", "chrf", "bleu_signature", "chrf_signature", "sentences", "loss", "ppl"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["sentences"], 300);
  EXPECT_EQ(j["beam"], 2);
  EXPECT_GT(j["chrf"].get<double>(), 50.0);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_NE(j["bleu_signature"].get<std::string>().find("tok:13a|smooth:exp"), std::string::npos);
  EXPECT_NE(j["chrf_signature"].get<std::string>().find("nc:6|nw:0"), std::string::npos);

  // Scoring the written hypotheses gives the same figures, and equals the library's.
  r = run_command(nmt_bin() + " eval --hyp " + path("eval.hyp") + " --ref " + ref +
                  " --json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto k = json::parse(r.output);
  EXPECT_DOUBLE_EQ(k["bleu"].get<double>(), j["bleu"].get<double>());
  EXPECT_DOUBLE_EQ(k["chrf"].get<double>(), j["chrf"].get<double>());
  EXPECT_FALSE(k.contains("loss"));
  const auto hyps = read_lines_of(path("eval.hyp"));
  const auto refs = read_lines_of(ref);
  EXPECT_DOUBLE_EQ(k["bleu"].get<double>(), nmt::corpus_bleu(hyps, refs).score);
  EXPECT_DOUBLE_EQ(k["chrf"].get<double>(), nmt::corpus_chrf(hyps, refs).score);

  // Text output in sacreBLEU's style.
  r = run_command(nmt_bin() + " eval --hyp " + path("eval.hyp") + " --ref " + ref);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("BLEU = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chrF2 = "), std::string::npos) << r.output;

  // A length mismatch is an error, not a score.
  write_text(path("short.hyp"), "a\nb\n");
  r = run_command(nmt_bin() + " eval --hyp " + path("short.hyp") + " --ref " + ref);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("has 2 lines but --ref"), std::string::npos) << r.output;
  r = run_command(nmt_bin() + " eval --hyp " + path("short.hyp") + " --ref " + ref +
                  " --checkpoint " + run());
  EXPECT_NE(r.status, 0);
}

// --quantize int8 through the binary: the same lines out, a score close to the float model's,
// and a bad value refused.
// nmt eval reads its files a chunk at a time (memory flat on millions of lines): small chunks
// give the translations, BLEU and chrF of one chunk, and the loss up to the order of its sums.
TEST_F(QuickstartRun, EvalInChunksScoresLikeOnePass) {
  auto m = nmt::load_model(run());
  m.model->eval();
  nmt::TranslateOptions options = nmt::translate_options(m.config, 1);
  std::vector<std::string> whole, chunked;
  const auto one = nmt::evaluate_files(m.model, m.vocabs, data() + "/test.en", data() + "/test.de",
                                       options, 4096, [&](const std::string& h) { whole.push_back(h); });
  const auto many = nmt::evaluate_files(m.model, m.vocabs, data() + "/test.en", data() + "/test.de",
                                        options, 4096, [&](const std::string& h) { chunked.push_back(h); },
                                        /*chunk_lines=*/7);
  ASSERT_EQ(whole.size(), 300u);
  EXPECT_EQ(whole, chunked);
  EXPECT_EQ(one.sentences, many.sentences);
  EXPECT_EQ(one.result.bleu.score, many.result.bleu.score);
  EXPECT_EQ(one.result.chrf.score, many.result.chrf.score);
  EXPECT_EQ(one.bleu_lowercase.score, many.bleu_lowercase.score);
  EXPECT_EQ(one.result.loss.tokens, many.result.loss.tokens);
  EXPECT_NEAR(one.result.loss.nll_per_token, many.result.loss.nll_per_token, 1e-5);
  EXPECT_EQ(one.result.bleu.score, nmt::corpus_bleu(whole, nmt_test::read_lines_of(data() + "/test.de")).score);
}

TEST_F(QuickstartRun, Int8QuantizedModelTranslatesAndScoresCloseToFloat) {
  const std::string src = data() + "/test.en", ref = data() + "/test.de";
  const std::string eval = nmt_bin() + " eval --checkpoint " + run() +
                           " --threads 1 --beam 1 --src " + src + " --ref " + ref + " --json";
  auto f = run_command(eval + " 2>/dev/null");
  auto q = run_command(eval + " --quantize int8 --hyp-out " + path("int8.hyp") + " 2>" +
                       path("int8.log"));
  ASSERT_EQ(f.status, 0) << f.output;
  ASSERT_EQ(q.status, 0) << q.output;
  EXPECT_NE(nmt_test::read_text(path("int8.log")).find("quantized to int8"), std::string::npos);
  const auto jf = json::parse(f.output);
  const auto jq = json::parse(q.output);
  EXPECT_EQ(read_lines_of(path("int8.hyp")).size(), 300u);
  // The quickstart model copies its input almost exactly; int8 must not break that.
  EXPECT_NEAR(jq["chrf"].get<double>(), jf["chrf"].get<double>(), 3.0);
  EXPECT_NEAR(jq["ppl"].get<double>(), jf["ppl"].get<double>(), 0.1 * jf["ppl"].get<double>());
  const auto bad = run_command(translate("--quantize int4 --input " + src + " 2>&1"));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("--quantize: must be one of \"int8\""), std::string::npos) << bad.output;
}

// --precision bf16 on the CPU (bfloat16 products) scores close to float, where the CPU has them;
// elsewhere it is refused with the reason.
TEST_F(QuickstartRun, Bf16ProductsOnTheCpuScoreCloseToFloat) {
  const std::string src = data() + "/test.en", ref = data() + "/test.de";
  const std::string eval = nmt_bin() + " eval --checkpoint " + run() + " --device cpu" +
                           " --threads 1 --beam 1 --src " + src + " --ref " + ref + " --json";
  if (!nmt::have_bf16_gemm()) {
    const auto r = run_command(eval + " --precision bf16 2>&1");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.output.find(nmt::bf16_gemm_missing()), std::string::npos) << r.output;
    return;
  }
  const auto f = run_command(eval + " --precision fp32 2>/dev/null");
  const auto b = run_command(eval + " --precision bf16 2>" + path("bf16.log"));
  ASSERT_EQ(f.status, 0) << f.output;
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(nmt_test::read_text(path("bf16.log")).find("precision bf16"), std::string::npos);
  const auto jf = json::parse(f.output), jb = json::parse(b.output);
  EXPECT_NEAR(jb["chrf"].get<double>(), jf["chrf"].get<double>(), 3.0);
  EXPECT_NEAR(jb["bleu"].get<double>(), jf["bleu"].get<double>(), 3.0);
}

TEST_F(QuickstartRun, AveragedCheckpointTranslates) {
  const std::string ck = run() + "/checkpoints/";
  auto r =
      run_command(nmt_bin() + " average --last 2 --run-dir " + run() + " --output " + path("avg"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(nmt_bin() + " eval --checkpoint " + path("avg") + " --threads 1 --beam 1 --src " +
                  data() + "/test.en --ref " + data() + "/test.de --json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_GT(json::parse(r.output)["chrf"].get<double>(), 50.0);
  // The average of a checkpoint with itself is that checkpoint.
  r = run_command(nmt_bin() + " average --checkpoints " + ck + "ckpt-00000500 " + ck +
                  "ckpt-00000500 --output " + path("self"));
  ASSERT_EQ(r.status, 0) << r.output;
  write_text(path("few.txt"), "eight\nsix hundred\nseventy-seven thousand three\n");
  r = run_command(translate("--scores --input " + path("few.txt") + " --output " + path("self.out"),
                            path("self")));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(translate("--scores --input " + path("few.txt") + " --output " + path("orig.out"),
                            ck + "ckpt-00000500"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_lines_of(path("self.out")), read_lines_of(path("orig.out")));
  r = run_command(nmt_bin() + " average --last 9 --run-dir " + run() + " --output " + path("x"));
  EXPECT_NE(r.status, 0);
}

// With a learning rate of zero nothing improves, so patience 2 stops after the third check.
TEST(EarlyStopping, StopsAfterPatienceValidationsWithoutImprovement) {
  nmt_test::TempDir dir;
  auto r = run_command("python3 scripts/make_quickstart_data.py --out " + (dir / "data") +
                       " --train 500 --valid 20 --test 5");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string d = dir / "data";
  r = run_command(nmt_bin() + " train --config configs/quickstart.json --run-dir " + (dir / "run") +
                  " --set data.train_src=" + d + "/train.en --set data.train_tgt=" + d +
                  "/train.de --set data.valid_src=" + d + "/valid.en --set data.valid_tgt=" + d +
                  "/valid.de --set vocab.size=80 --set model.d_model=32 --set model.d_ff=64"
                  " --set train.threads=1 --set train.batch_tokens=600 --set train.lr_factor=0"
                  " --set train.max_steps=100 --set train.valid_every=5 --set train.patience=2"
                  " --set train.best_metric=loss");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("early stopping"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "run/checkpoints/ckpt-00000015"));
  EXPECT_FALSE(std::filesystem::exists(dir / "run/checkpoints/ckpt-00000020"));
  const auto best = json::parse(nmt_test::read_text(dir / "run/checkpoints/best/state.json"));
  EXPECT_EQ(best["step"], 5);
  EXPECT_EQ(best["best_metric"], "loss");
}

// `nmt translate ... | head` ends quietly when the reader goes away: no error message.
TEST_F(QuickstartRun, ClosedOutputPipeExitsQuietly) {
  std::string many;
  for (int i = 0; i < 3000; ++i) many += "forty-two thousand\n";
  write_text(path("many.en"), many);
  const auto r =
      run_command("{ " + translate("--beam 1 --chunk-lines 100 --input " + path("many.en")) +
                  " 2>" + path("err.txt") + "; echo $? > " + path("status.txt") + "; } | head -1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  const int status = std::stoi(nmt_test::read_text(path("status.txt")));
  EXPECT_TRUE(status == 141 || status == 0) << status;  // 141: SIGPIPE's default action
  const auto err = nmt_test::read_text(path("err.txt"));
  EXPECT_EQ(err.find("error"), std::string::npos) << err;
}
