#include "doc/document.h"

#include <optional>
#include <utility>

#include "decode/alignment.h"
#include "doc/html.h"
#include "text/spm.h"
#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// The words of [begin, end) of text, as byte spans split at whitespace.
std::vector<SentenceSpan> words_in(const std::string& text, size_t begin, size_t end) {
  std::vector<SentenceSpan> words;
  for (size_t i = begin; i < end;) {
    while (i < end && is_space(text[i])) ++i;
    const size_t start = i;
    while (i < end && !is_space(text[i])) ++i;
    if (i > start) words.push_back({start, i});
  }
  return words;
}

// Cuts one sentence into pieces of whole words whose ids fit max_ids. SentencePiece segments
// each word apart (pieces never cross a space), so a piece's ids are its words' ids summed and
// every word is encoded once: linear in the sentence, however long.
void cut_to_fit(const SentencePiece& spm, const std::string& text, SentenceSpan sentence,
                int64_t max_ids, std::vector<SentenceSpan>& out) {
  std::optional<SentenceSpan> piece;
  int64_t ids = 0;
  for (const auto& word : words_in(text, sentence.begin, sentence.end)) {
    const auto n =
        static_cast<int64_t>(spm.encode(text.substr(word.begin, word.end - word.begin)).size());
    if (piece && ids + n > max_ids) {
      out.push_back(*piece);
      piece.reset();
    }
    if (!piece) {
      piece = word;
      ids = 0;
    }
    piece->end = word.end;
    ids += n;
  }
  if (piece) out.push_back(*piece);
}

// --wrapped: a paragraph is its lines up to a blank line, joined with a space; a blank line is a
// unit of its own (an empty output line).
class WrappedParagraphs {
 public:
  bool read(LineReader& in, std::string& unit) {
    std::string line;
    if (pending_) {
      line = std::move(*pending_);
      pending_.reset();
    } else if (!in.next(line)) {
      return false;
    }
    unit = trim(line);
    if (unit.empty()) return true;
    while (in.next(line)) {
      std::string text = trim(line);
      if (text.empty()) {
        pending_ = std::move(line);
        break;
      }
      unit += ' ' + text;
    }
    return true;
  }

 private:
  std::optional<std::string> pending_;
};

}  // namespace

std::vector<SentenceSpan> translation_spans(const SentenceSplitter& splitter,
                                            const SentencePiece& spm, const std::string& paragraph,
                                            int64_t max_ids) {
  std::vector<SentenceSpan> out;
  for (const auto& span : splitter.split(paragraph)) {
    const auto ids = spm.encode(paragraph.substr(span.begin, span.end - span.begin)).size();
    if (static_cast<int64_t>(ids) <= max_ids)
      out.push_back(span);
    else
      cut_to_fit(spm, paragraph, span, max_ids, out);
  }
  return out;
}

std::string rebuild_paragraph(const std::string& paragraph, const std::vector<SentenceSpan>& spans,
                              const std::vector<std::string>& translations) {
  std::string out;
  size_t at = 0;
  for (size_t k = 0; k < spans.size(); ++k) {
    out.append(paragraph, at, spans[k].begin - at);
    out += translations[k];
    at = spans[k].end;
  }
  out.append(paragraph, at, std::string::npos);
  return out;
}

std::vector<Translation> translate_paragraphs(
    Scorer& scorer, const Vocabs& vocabs, const std::vector<std::string>& paragraphs,
    const TranslateOptions& options, const SentenceSplitter& splitter, const JobHooks& hooks,
    int64_t first_unit, TranslateStats* stats, std::vector<std::vector<SentenceSpan>>* spans_out) {
  // Room for EOS, and for the tag that translate puts first.
  const int64_t max_ids = scorer.max_positions() - 1 - (options.tag_id >= 0 ? 1 : 0);
  std::vector<std::vector<SentenceSpan>> spans(paragraphs.size());
  std::vector<std::string> sentences;
  for (size_t i = 0; i < paragraphs.size(); ++i) {
    spans[i] = translation_spans(splitter, vocabs.src, paragraphs[i], max_ids);
    for (const auto& s : spans[i])
      sentences.push_back(paragraphs[i].substr(s.begin, s.end - s.begin));
  }
  // Progress counts units, not sentences: reported once the chunk is done.
  JobHooks sentence_hooks;
  sentence_hooks.stop_requested = hooks.stop_requested;
  auto results =
      translate_lines(scorer, vocabs, sentences, options, stats, {}, sentence_hooks, first_unit);
  std::vector<Translation> out(paragraphs.size());
  size_t next = 0;
  for (size_t i = 0; i < paragraphs.size(); ++i) {
    auto& t = out[i];
    t.done = true;
    double score = 0.0;
    std::vector<std::string> texts;
    for (size_t k = 0; k < spans[i].size(); ++k, ++next) {
      t.done = t.done && results[next].done;
      texts.push_back(results[next].texts[0]);
      score += results[next].scores[0];
      t.sentences.push_back(std::move(results[next]));
    }
    t.texts = {rebuild_paragraph(paragraphs[i], spans[i], texts)};
    t.scores = {score};
  }
  if (stats != nullptr) stats->lines = static_cast<int64_t>(paragraphs.size());
  if (hooks.on_lines) hooks.on_lines(static_cast<int64_t>(paragraphs.size()));
  if (spans_out != nullptr) *spans_out = std::move(spans);
  return out;
}

namespace {

// For each target word of a paragraph's translation, the paragraph's source word it is aligned
// to (-1: none), from its sentences' hard alignments: sentence k's words follow those of the
// sentences before it on both sides (its source words counted in the paragraph, since an empty
// translation has no alignment to count them).
std::vector<int64_t> paragraph_alignment(const Translation& paragraph, const std::string& text,
                                         const std::vector<SentenceSpan>& spans) {
  std::vector<int64_t> out;
  int64_t source_offset = 0;
  for (size_t k = 0; k < paragraph.sentences.size(); ++k) {
    const auto& sentence = paragraph.sentences[k];
    const size_t start = out.size();
    out.resize(start + words_of(sentence.texts[0]).size(), -1);
    if (!sentence.alignments.empty()) {
      const auto& a = sentence.alignments[0];
      const auto sources = target_sources(a.links, a.weights, static_cast<int64_t>(a.target.size()));
      for (size_t t = 0; t < sources.size() && start + t < out.size(); ++t)
        if (sources[t] >= 0) out[start + t] = source_offset + sources[t];
    }
    source_offset += static_cast<int64_t>(words_in(text, spans[k].begin, spans[k].end).size());
  }
  return out;
}

}  // namespace

std::vector<Translation> translate_html(Scorer& scorer, const Vocabs& vocabs,
                                        const std::vector<std::string>& units,
                                        const TranslateOptions& options,
                                        const SentenceSplitter& splitter, bool lenient,
                                        const JobHooks& hooks, int64_t first_unit,
                                        TranslateStats* stats) {
  std::vector<HtmlDocument> documents;
  std::vector<std::string> blocks;
  for (size_t i = 0; i < units.size(); ++i) {
    documents.emplace_back(units[i], lenient, first_unit + static_cast<int64_t>(i) + 1);
    const auto& b = documents.back().blocks();
    blocks.insert(blocks.end(), b.begin(), b.end());
  }
  // Progress counts units: reported once the chunk is done.
  JobHooks block_hooks;
  block_hooks.stop_requested = hooks.stop_requested;
  std::vector<std::vector<SentenceSpan>> spans;
  auto translated = translate_paragraphs(scorer, vocabs, blocks, options, splitter, block_hooks,
                                         first_unit, stats, &spans);
  std::vector<Translation> out(units.size());
  size_t next = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    auto& t = out[i];
    t.done = true;
    std::vector<std::string> texts;
    std::vector<std::vector<int64_t>> alignments;
    double score = 0.0;
    for (size_t b = 0; b < documents[i].blocks().size(); ++b, ++next) {
      auto& block = translated[next];
      t.done = t.done && block.done;
      texts.push_back(block.texts[0]);
      alignments.push_back(paragraph_alignment(block, blocks[next], spans[next]));
      score += block.scores[0];
      for (auto& s : block.sentences) t.sentences.push_back(std::move(s));
    }
    t.texts = {t.done ? documents[i].restore(texts, alignments) : ""};
    t.scores = {score};
  }
  if (stats != nullptr) stats->lines = static_cast<int64_t>(units.size());
  if (hooks.on_lines) hooks.on_lines(static_cast<int64_t>(units.size()));
  return out;
}

void use_document_format(StreamOptions& stream, Scorer& scorer, const Vocabs& vocabs,
                         const TranslateOptions& options, const DocumentOptions& document) {
  if (document.format == InputFormat::kLines) {
    if (document.wrapped) throw Error("--wrapped needs --format text or html (paragraphs)");
    if (document.html_lenient) throw Error("--html-lenient needs --format html");
    return;
  }
  if (options.search.nbest > 1) throw Error("--nbest needs --format lines");
  if (options.attention) throw Error("--attention-out needs --format lines");
  if (!options.constraints_file.empty() || !options.avoid_file.empty())
    throw Error("--constraints and --avoid need --format lines: their lines are the input's");
  if (document.html_lenient && document.format != InputFormat::kHtml)
    throw Error("--html-lenient needs --format html");
  auto splitter = std::make_shared<const SentenceSplitter>(document.language);
  if (document.format == InputFormat::kHtml) {
    // Tags follow the words through hard alignments, asked for whether or not they are written.
    auto aligned = std::make_shared<TranslateOptions>(options);
    if (aligned->alignment == AlignmentMode::kNone) aligned->alignment = AlignmentMode::kHard;
    const bool lenient = document.html_lenient;
    stream.format.translate = [&scorer, &vocabs, aligned, splitter, lenient](
                                  const std::vector<std::string>& units, const LineTerms&,
                                  const JobHooks& hooks, int64_t first_unit,
                                  TranslateStats* stats) {
      return translate_html(scorer, vocabs, units, *aligned, *splitter, lenient, hooks, first_unit,
                            stats);
    };
  } else {
    stream.format.translate = [&scorer, &vocabs, &options, splitter](
                                  const std::vector<std::string>& units, const LineTerms&,
                                  const JobHooks& hooks, int64_t first_unit,
                                  TranslateStats* stats) {
      return translate_paragraphs(scorer, vocabs, units, options, *splitter, hooks, first_unit,
                                  stats);
    };
  }
  if (document.wrapped) {
    auto paragraphs = std::make_shared<WrappedParagraphs>();
    stream.format.read = [paragraphs](LineReader& in, std::string& unit) {
      return paragraphs->read(in, unit);
    };
  }
}

}  // namespace nmt
