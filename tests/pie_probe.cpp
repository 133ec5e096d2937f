// Built as ordinary PIE code on purpose: std::cout is then copy-relocated into this executable,
// and the SentencePiece loader must refuse with a clear error instead of crashing.
#include <iostream>

#include "text/spm.h"
#include "util/util.h"

int main() {
  std::cout << "probe\n";  // makes the executable reference (and copy-relocate) std::cout
  try {
    nmt::spm_shim_path();
  } catch (const nmt::Error& e) {
    std::cout << e.what() << "\n";
    return 3;
  }
  std::cout << "shim loaded\n";
  return 0;
}
