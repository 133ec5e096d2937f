// The sentence splitter alone, for scripts/splitter_check.py: reads paragraphs (one a line) from
// standard input and prints each one's sentences, one a line, and an empty line after each.
//   build/nmt_split_sentences [LANGUAGE]   (default en)
#include <iostream>
#include <string>
#include <string_view>

#include "text/sentences.h"

int main(int argc, char** argv) {
  const nmt::SentenceSplitter splitter(argc > 1 ? argv[1] : "en");
  std::string line;
  while (std::getline(std::cin, line)) {
    for (const auto& s : splitter.split(line))
      std::cout << std::string_view(line).substr(s.begin, s.end - s.begin) << '\n';
    std::cout << '\n';
  }
  return 0;
}
