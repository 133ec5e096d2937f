// Translates a text file with a CTranslate2 model exported by `nmt export`, the way
// `nmt translate` does: SentencePiece pieces in, nmt's per-sentence length limit
// (floor(a * source pieces + b), clamped to [1, cap]; CTranslate2 counts EOS in it as nmt
// does), EOS allowed at the first step. Sentences with one limit are translated together,
// shortest first, in batches of --batch sentences. Prints one JSON line of speed figures.
//
//   ct2_translate MODEL_DIR SPM_MODEL INPUT OUTPUT [--beam K] [--threads T]
//                 [--compute-type float32|int8|...] [--length-penalty P]
//                 [--max-len-a A] [--max-len-b B] [--cap C] [--batch N]
#include <ctranslate2/translator.h>
#include <sentencepiece_processor.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: ct2_translate MODEL_DIR SPM_MODEL INPUT OUTPUT [options]\n";
    return 2;
  }
  std::map<std::string, std::string> opt = {
      {"--beam", "5"},           {"--threads", "1"},     {"--compute-type", "float32"},
      {"--length-penalty", "1"}, {"--max-len-a", "1.5"}, {"--max-len-b", "10"},
      {"--cap", "255"},          {"--batch", "64"}};
  for (int i = 5; i + 1 < argc; i += 2) {
    if (opt.count(argv[i]) == 0) {
      std::cerr << "unknown option " << argv[i] << "\n";
      return 2;
    }
    opt[argv[i]] = argv[i + 1];
  }
  sentencepiece::SentencePieceProcessor spm;
  if (!spm.Load(argv[2]).ok()) {
    std::cerr << "cannot load " << argv[2] << "\n";
    return 1;
  }
  std::vector<std::vector<std::string>> sources;
  std::ifstream in(argv[3]);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> pieces;
    spm.Encode(line, &pieces);
    sources.push_back(pieces);
  }
  const double a = std::stod(opt["--max-len-a"]), b = std::stod(opt["--max-len-b"]);
  const long cap = std::stol(opt["--cap"]);
  auto limit_of = [&](size_t pieces) {
    const long l = static_cast<long>(std::floor(a * static_cast<double>(pieces) + b));
    return std::clamp<long>(l, 1, cap);
  };

  ctranslate2::ReplicaPoolConfig pool;
  pool.num_threads_per_replica = std::stoul(opt["--threads"]);
  ctranslate2::models::ModelLoader loader(argv[1]);
  loader.device = ctranslate2::Device::CPU;
  loader.compute_type = ctranslate2::str_to_compute_type(opt["--compute-type"]);
  ctranslate2::Translator translator(loader, pool);

  std::vector<size_t> order(sources.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return sources[x].size() < sources[y].size(); });
  std::vector<std::vector<std::string>> outputs(sources.size());
  const size_t batch = std::stoul(opt["--batch"]);
  const auto start = std::chrono::steady_clock::now();
  size_t tokens = 0;
  for (size_t i = 0; i < order.size();) {
    const long limit = limit_of(sources[order[i]].size());
    size_t end = i;
    std::vector<std::vector<std::string>> group;
    while (end < order.size() && group.size() < batch &&
           limit_of(sources[order[end]].size()) == limit)
      group.push_back(sources[order[end++]]);
    ctranslate2::TranslationOptions o;
    o.beam_size = std::stoul(opt["--beam"]);
    o.length_penalty = std::stof(opt["--length-penalty"]);
    o.max_decoding_length = static_cast<size_t>(limit);
    o.min_decoding_length = 0;
    o.max_input_length = 0;
    const auto results = translator.translate_batch(group, o);
    for (size_t k = 0; k < results.size(); ++k) {
      outputs[order[i + k]] = results[k].output();
      tokens += results[k].output().size() + 1;  // with its EOS, as nmt counts
    }
    i = end;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ofstream out(argv[4]);
  for (const auto& pieces : outputs) {
    std::string text;
    spm.Decode(pieces, &text);
    out << text << "\n";
  }
  std::cout << "{\"sentences\": " << sources.size() << ", \"seconds\": " << secs
            << ", \"sent_per_s\": " << sources.size() / secs << ", \"tgt_tok_per_s\": "
            << tokens / secs << "}\n";
  return 0;
}
