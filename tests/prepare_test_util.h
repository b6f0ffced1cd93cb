// The data-preparation tests' shared options (tests/test_data.cpp, test_prepare_inputs.cpp).
#pragma once
#include "src/data/prepare.h"

namespace gdn::test {

// o with the SentencePiece tokenizer of 300 pieces, trained on one thread.
inline data::PrepareOptions with_sentencepiece(data::PrepareOptions o) {
  o.tokenizer = "sentencepiece";
  o.vocab_size = 300;
  o.threads = 1;
  return o;
}

}  // namespace gdn::test
