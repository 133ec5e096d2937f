// HTML input for `translate --format html`: the text of a line (or --wrapped paragraph) of HTML
// is translated without its markup, and the markup is put back on the translation through word
// alignments, as Bergamot does (browsermt/bergamot-translator, src/translator/html.cpp). Pure
// string work, unit-tested by hand; the caller splits blocks into sentences and aligns words.
//
// Whitespace, as implemented:
// - Outside blocks (between block tags, around untranslated parts) every byte is kept.
// - A block keeps the whitespace before its first tag or word and after its last one.
// - Inside a block, target words are joined by single spaces; opening inline tags go right
//   before their first word, closing tags right after their last word, so whitespace the source
//   had just inside an inline tag moves outside it (`<b> x </b> y` gives `<b>x</b> y`; at the
//   block's end it goes), and runs of spaces and newlines become one space. Tags and atoms that
//   the source glued to a word stay glued (`<b>world</b>.` gives `<b>Welt</b>.`); an atom keeps
//   whether the source had whitespace before it and between it and the word after it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

// One input unit (a line, or with --wrapped a paragraph) of HTML.
//
// Blocks: block tags (p, div, li, td, h1-h6, br, hr, title, option, ...), doctypes and
// untranslated block parts end a block; an inline element that holds a block boundary
// (`<a><div>..</div></a>`) counts as a block element (its tags are kept in place and never
// moved). Untranslated, kept byte for byte and in no block: script, style, pre (its layout is
// whitespace), code, kbd, samp, var, math, svg, any element with translate="no", and inline
// elements that hold no visible text (`<b></b>`, `<a href=x><img src=y></a>`, `<i>&nbsp;</i>`).
// Atoms (void tags, comments, processing instructions, CDATA and those untranslated parts) inside
// a block stay next to the word they preceded (or followed with no space between), or at the end.
class HtmlDocument {
 public:
  // Parses `html`. Malformed markup (a closing tag that matches no open element, or closes one
  // while a non-optional element inside it is open; an unterminated tag, comment, doctype,
  // processing instruction, attribute quote or script/style; an element left open at the end,
  // except those whose end tag HTML makes optional: p, li, td, tr, option, html, body, ...) throws
  // Error("line L, column C: ...") (L = first_line + the line inside html, C = 1-based column in
  // code points). With lenient it is copied through as text instead: its '<' becomes "&lt;"
  // wherever it is, so the output is well-formed. A '<' that starts no markup (`a < b`) is text,
  // as in HTML. Iterative throughout: nesting depth costs no stack.
  HtmlDocument(std::string_view html, bool lenient, int64_t first_line = 1);

  // The text to translate, one string per block: entities decoded (U+00A0 of &nbsp; stays
  // inside its word), words (runs of other than ASCII whitespace, as words_of reads them) one
  // space apart. Parts with no visible character (only spaces, &nbsp;, markup) are no block.
  const std::vector<std::string>& blocks() const { return block_text_; }

  // The document rebuilt with translations[b] in place of blocks()[b]. target_to_source[b][j]:
  // the word of blocks()[b] that word j of translations[b] is aligned to, or -1 (the word then
  // takes the tags of the previous target word, or of the next for the first). Every inline
  // element of the source appears exactly once: it opens before the first target word aligned
  // to one of its words and closes after the last (or later, while an element opened after it
  // is still open: tags nest); one whose words got no target word is put empty (`<b></b>`, with
  // its empty descendants) before the target word of the next source word that has one, or at
  // the end. A source word's atoms go, once, with the first target word aligned to it (or to
  // the next source word that has one). Text is re-escaped (& < >); tags, attributes, comments
  // and untranslated parts are copied byte for byte. Tags inside a word only where the source
  // had them: a target word that starts or ends with a tagged piece of its source word keeps
  // that piece's tags (a copied word comes back as it was), one equal to a piece takes that
  // piece's. Throws Error on a count or index that does not fit the blocks.
  std::string restore(const std::vector<std::string>& translations,
                      const std::vector<std::vector<int64_t>>& target_to_source) const;

 private:
  // A run of a word's text under one set of inline elements, or an atom (markup kept whole).
  struct Piece {
    std::string text;                     // decoded; empty for an atom
    size_t atom_begin = 0, atom_end = 0;  // an atom's bytes in html_
    int32_t element = -1;                 // innermost inline element over it, -1 for none
    bool space_before = false;            // the source had whitespace right before it
    bool separates = false;  // an atom that ends a word: an element of only spaces, `<b> </b>`
    bool is_atom() const { return atom_end > atom_begin; }
  };
  struct Word {
    std::vector<Piece> pieces;  // at least one text piece
    std::string text() const;
  };
  // An inline element inside one block; ids are in the order of the opening tags, so parents
  // come before their children and an element's descendants are the ids up to subtree_end.
  struct Element {
    int32_t parent = -1;
    int32_t subtree_end = 0;
    size_t open_begin = 0, open_end = 0, close_begin = 0, close_end = 0;
    int64_t last_word = -1;  // the last source word with text under it
  };
  struct Block {
    std::string prefix, suffix;  // the source's whitespace around the block
    std::vector<Word> words;
    std::vector<Piece> trailing;  // atoms after the last word
    std::vector<Element> elements;
  };
  // Part of the rebuilt document: html_[begin, end) verbatim, or blocks_[block] when block >= 0.
  struct Segment {
    size_t begin = 0, end = 0;
    int64_t block = -1;
  };
  class Builder;   // one block from the tokens of its part of the input
  class Restorer;  // one block's translation with the block's tags

  std::string html_;
  std::vector<Segment> segments_;
  std::vector<Block> blocks_;
  std::vector<std::string> block_text_;
};

}  // namespace nmt
