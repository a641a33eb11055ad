// The one call between zcode_core and the SentencePiece trainer module
// (libzcode_spm_trainer.so, core/spm_trainer/): both are built from this
// tree with the same compiler, so the call passes C++ objects and the module
// throws zcode::TokenizerTrainError, which the caller catches.
#pragma once

#include <zcode/core/tokenizer_train.h>

#include <cstdint>
#include <string>

namespace zcode {

/// In: options (already validated). Out: the serialized model, its piece
/// count and the sentences read.
struct SpmTrainCall {
  const TokenizerTrainOptions* options = nullptr;
  std::string proto;
  uint64_t vocab_size = 0;
  uint64_t sentences = 0;
};

}  // namespace zcode

/// The module's entry (dlsym name "zcode_spm_train"). Throws TokenizerTrainError.
extern "C" void zcode_spm_train(zcode::SpmTrainCall* call);
