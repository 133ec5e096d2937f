// Putting a block's tags back on its translation through the word alignments.
#include "doc/html.h"

#include <algorithm>
#include <limits>

#include "doc/html_parts.h"
#include "util/util.h"

namespace nmt {

namespace {

using html_parts::is_space;
using html_parts::kNone;

void append_escaped(std::string& out, std::string_view text) {
  for (const char c : text) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t begin = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > begin) words.emplace_back(s.substr(begin, i - begin));
  }
  return words;
}

}  // namespace

// Puts one block's tags on its translation. Target words become units (text, or an atom kept
// whole), each with the inline elements over it; every element then opens before the first
// unit it covers and closes after the last, so it appears once and the tags nest.
class HtmlDocument::Restorer {
 public:
  Restorer(const HtmlDocument& doc, const Block& block) : doc_(doc), block_(block) {}

  void run(const std::string& translation, const std::vector<int64_t>& alignment,
           std::string& out) {
    const std::vector<std::string> target = split_words(translation);
    if (alignment.size() != target.size())
      throw Error("html: " + std::to_string(target.size()) + " target words but " +
                  std::to_string(alignment.size()) + " alignment entries");
    const auto words = static_cast<int64_t>(block_.words.size());
    for (const int64_t a : alignment)
      if (a < -1 || a >= words)
        throw Error("html: alignment to source word " + std::to_string(a) + " of " +
                    std::to_string(words));
    place(target, alignment);
    inherit(alignment);
    std::vector<char> space;
    hulls(flatten(space));
    add_anchors();
    const std::vector<const Unit*> units = flatten(space);
    hulls(units);
    emit(units, space, out);
  }

 private:
  struct Unit {
    std::string text;                     // a target word or part of one; empty for an atom
    size_t atom_begin = 0, atom_end = 0;  // an atom's bytes
    std::vector<int32_t> elements;        // the innermost elements over it
    bool space = false;                   // the source had whitespace before it
    bool separates = false;               // an atom that stands for whitespace
    bool is_anchor() const { return text.empty() && atom_end == atom_begin; }
  };

  static Unit text_unit(std::string text) {
    Unit u;
    u.text = std::move(text);
    return u;
  }

  static Unit piece_unit(const Piece& p, std::string text) {
    Unit u;
    u.text = std::move(text);
    u.atom_begin = p.atom_begin;
    u.atom_end = p.atom_end;
    if (p.element >= 0) u.elements.push_back(p.element);
    u.space = p.space_before;
    u.separates = p.separates;
    return u;
  }

  // Slot j holds target word j with what goes before it; the last slot what goes at the end.
  // A source word's atoms go, once, with the first target word aligned to it, or to the next
  // source word that has one.
  void place(const std::vector<std::string>& target, const std::vector<int64_t>& alignment) {
    const size_t n = block_.words.size(), slots = target.size();
    slots_.assign(slots + 1, {});
    std::vector<int64_t> first(n, -1);
    for (size_t j = 0; j < slots; ++j)
      if (alignment[j] >= 0 && first[alignment[j]] < 0) first[alignment[j]] = j;
    next_slot_.assign(n + 1, slots);
    for (size_t k = n; k-- > 0;) next_slot_[k] = first[k] >= 0 ? first[k] : next_slot_[k + 1];
    std::vector<Unit> carry;
    for (size_t k = 0; k < n; ++k) {
      if (first[k] < 0) {
        for (const Piece& p : block_.words[k].pieces)
          if (p.is_atom()) carry.push_back(piece_unit(p, ""));
        continue;
      }
      auto& slot = slots_[first[k]];
      slot.insert(slot.end(), carry.begin(), carry.end());
      carry.clear();
      word_units(block_.words[k], target[first[k]], true, slot);
    }
    for (size_t j = 0; j < slots; ++j) {
      const int64_t a = alignment[j];
      if (a < 0) {
        slots_[j].push_back(text_unit(target[j]));
      } else if (first[a] != static_cast<int64_t>(j)) {
        word_units(block_.words[a], target[j], false, slots_[j]);
      }
    }
    for (const Piece& p : block_.trailing) carry.push_back(piece_unit(p, ""));
    slots_[slots] = std::move(carry);
  }

  // The units of a target word aligned to `word`. Text pieces the target word starts or ends
  // with keep their own tags, so a copied word comes back as it was and "Welt." for
  // `<b>world</b>.` gives `<b>Welt</b>.`; the rest takes the elements over the rest of the
  // source word, with its atoms before it (or after it, those the source word ended with).
  void word_units(const Word& word, std::string_view target, bool with_atoms,
                  std::vector<Unit>& out) const {
    const auto& p = word.pieces;
    std::vector<size_t> text;
    for (size_t i = 0; i < p.size(); ++i)
      if (!p[i].is_atom()) text.push_back(i);
    size_t lo = 0, hi = text.size();
    for (size_t t = 0; t < text.size() && text.size() > 1; ++t) {
      if (p[text[t]].text != target) continue;  // the word is one of the pieces: "." of "world."
      for (size_t i = 0; i < p.size(); ++i) {
        if (i == text[t] || (with_atoms && p[i].is_atom())) out.push_back(piece_unit(p[i], ""));
        if (i == text[t]) out.back().text = p[i].text;
      }
      return;
    }
    for (; hi - lo > 1 && target.size() > p[text[lo]].text.size(); ++lo) {
      if (target.compare(0, p[text[lo]].text.size(), p[text[lo]].text) != 0) break;
      target.remove_prefix(p[text[lo]].text.size());
    }
    for (; hi - lo > 1 && target.size() > p[text[hi - 1]].text.size(); --hi) {
      const std::string& piece = p[text[hi - 1]].text;
      if (target.compare(target.size() - piece.size(), piece.size(), piece) != 0) break;
      target.remove_suffix(piece.size());
    }
    const size_t mid_begin = text[lo], mid_end = text[hi - 1];
    Unit middle = text_unit(std::string(target));
    middle.space = p[mid_begin].space_before;
    for (size_t i = 0; i < p.size(); ++i) {
      const bool inside = i >= mid_begin && i <= mid_end;
      if (p[i].is_atom()) {
        if (with_atoms) out.push_back(piece_unit(p[i], ""));
      } else if (!inside) {
        out.push_back(piece_unit(p[i], p[i].text));
      } else if (p[i].element >= 0 && std::find(middle.elements.begin(), middle.elements.end(),
                                                p[i].element) == middle.elements.end()) {
        middle.elements.push_back(p[i].element);
      }
      if (i == mid_end) out.push_back(std::move(middle));
    }
  }

  static bool is_text(const Unit& u) { return !u.text.empty(); }

  // An unaligned target word takes the elements of the previous target word, or the next.
  void inherit(const std::vector<int64_t>& alignment) {
    const size_t n = alignment.size();
    std::vector<char> done(n);
    for (size_t j = 0; j < n; ++j) done[j] = alignment[j] >= 0;
    for (size_t j = 1; j < n; ++j) {
      if (done[j] || !done[j - 1]) continue;
      const auto& prev = slots_[j - 1];
      slots_[j][0].elements = std::find_if(prev.rbegin(), prev.rend(), is_text)->elements;
      done[j] = 1;
    }
    for (size_t j = n; j-- > 1;) {
      if (done[j - 1] || !done[j]) continue;
      const auto& next = slots_[j];
      slots_[j - 1][0].elements = std::find_if(next.begin(), next.end(), is_text)->elements;
      done[j - 1] = 1;
    }
  }

  // The units in order, and whether a space goes before each: target words are one space apart
  // (an atom that stands for whitespace is the space where the source had no other), the units
  // of one word and those at the end as the source had them. An empty element put in place of
  // its lost words sticks to what follows it.
  std::vector<const Unit*> flatten(std::vector<char>& space) const {
    std::vector<const Unit*> units;
    space.clear();
    const size_t last = slots_.size() - 1;
    for (size_t j = 0; j <= last; ++j) {
      bool first = true;
      size_t anchors = kNone;  // the first of the anchors right before this unit
      for (const Unit& u : slots_[j]) {
        units.push_back(&u);
        space.push_back(0);
        if (u.is_anchor()) {
          if (anchors == kNone) anchors = units.size() - 1;
          continue;
        }
        bool s = u.space;
        if (first && j < last) s = j > 0 && !(u.separates && !u.space);
        if (first && j == last) s = s && last > 0;
        first = false;
        space[anchors == kNone ? units.size() - 1 : anchors] = s;
        anchors = kNone;
      }
    }
    return units;
  }

  // The first and last unit each element covers, its descendants' included; -1 for none.
  void hulls(const std::vector<const Unit*>& units) {
    const size_t n = block_.elements.size();
    first_.assign(n, std::numeric_limits<int64_t>::max());
    last_.assign(n, -1);
    for (size_t u = 0; u < units.size(); ++u) {
      for (const int32_t e : units[u]->elements) {
        first_[e] = std::min<int64_t>(first_[e], u);
        last_[e] = std::max<int64_t>(last_[e], u);
      }
    }
    for (size_t e = n; e-- > 0;) {
      const int32_t parent = block_.elements[e].parent;
      if (parent < 0 || last_[e] < 0) continue;
      first_[parent] = std::min(first_[parent], first_[e]);
      last_[parent] = std::max(last_[parent], last_[e]);
    }
  }

  // An element whose words got no target word is put empty, with its (empty) descendants,
  // before the target word that the source word after it went to, or at the end.
  void add_anchors() {
    const auto& elements = block_.elements;
    std::vector<std::vector<Unit>> anchors(slots_.size());
    for (int32_t e = 0; e < static_cast<int32_t>(elements.size());) {
      if (last_[e] >= 0) {
        ++e;
        continue;
      }
      auto& slot = anchors[next_slot_[elements[e].last_word + 1]];
      for (int32_t d = e; d < elements[e].subtree_end; ++d) {
        slot.emplace_back();
        slot.back().elements.push_back(d);
      }
      e = elements[e].subtree_end;
    }
    for (size_t j = 0; j < slots_.size(); ++j)
      slots_[j].insert(slots_[j].begin(), anchors[j].begin(), anchors[j].end());
  }

  void emit(const std::vector<const Unit*>& units, const std::vector<char>& space,
            std::string& out) const {
    const auto& elements = block_.elements;
    const std::string& html = doc_.html_;
    std::vector<std::vector<int32_t>> opens(units.size());
    for (size_t e = 0; e < elements.size(); ++e)
      if (last_[e] >= 0) opens[first_[e]].push_back(static_cast<int32_t>(e));
    std::vector<int32_t> stack;
    const auto close = [&] {
      const Element& e = elements[stack.back()];
      out.append(html, e.close_begin, e.close_end - e.close_begin);
      stack.pop_back();
    };
    for (size_t u = 0; u < units.size(); ++u) {
      while (!stack.empty() && last_[stack.back()] < static_cast<int64_t>(u)) close();
      if (space[u]) out += ' ';
      for (const int32_t e : opens[u]) {
        out.append(html, elements[e].open_begin, elements[e].open_end - elements[e].open_begin);
        stack.push_back(e);
      }
      const Unit& unit = *units[u];
      out.append(html, unit.atom_begin, unit.atom_end - unit.atom_begin);
      append_escaped(out, unit.text);
    }
    while (!stack.empty()) close();
  }

  const HtmlDocument& doc_;
  const Block& block_;
  std::vector<std::vector<Unit>> slots_;
  std::vector<int64_t> next_slot_;  // by source word: the slot of its atoms (one past: the end)
  std::vector<int64_t> first_, last_;
};

std::string HtmlDocument::restore(const std::vector<std::string>& translations,
                                  const std::vector<std::vector<int64_t>>& target_to_source) const {
  if (translations.size() != blocks_.size() || target_to_source.size() != blocks_.size())
    throw Error("html: " + std::to_string(translations.size()) + " translations and " +
                std::to_string(target_to_source.size()) + " alignments for " +
                std::to_string(blocks_.size()) + " blocks");
  std::string out;
  out.reserve(html_.size() * 2);
  for (const Segment& s : segments_) {
    if (s.block < 0) {
      out.append(html_, s.begin, s.end - s.begin);
      continue;
    }
    const Block& block = blocks_[s.block];
    out += block.prefix;
    try {
      Restorer(*this, block).run(translations[s.block], target_to_source[s.block], out);
    } catch (const Error& e) {
      throw Error("block " + std::to_string(s.block) + ": " + e.what());
    }
    out += block.suffix;
  }
  return out;
}

}  // namespace nmt
