// Model inflation: a small real llama GGUF (the tiny TinyStories model) turned into a model that
// writes the same text but costs like a big one, so that speculative decoding's speedup can be
// measured end to end without downloading anything (`goose synth --inflate`, `goose demo`).
//
// Construction (exact in real arithmetic; the same as ../shared/tools/inflate_gguf.py):
// - residual dims 0..d-1 carry the small model; dim d carries a constant c; the others stay 0;
// - every RMS norm: eps' = (d eps - c^2) / D and weight' = weight sqrt(d / D) (0 at dim d), so
//   the normalised small dims equal the small model's;
// - small head h -> big head (h / g) G + h % g (g, G: GQA group sizes); small head-dim pair
//   (2i, 2i+1) -> big dims (2si, 2si+1), s = big / small head dim, whose RoPE frequency is the
//   same (n_rot = head dim); Wq scaled by sqrt(big hd / small hd) for the 1/sqrt(hd) scale;
// - weights that only ever meet a zero input are random (the matmuls do real work); weights
//   that would write into the residual stream from unmapped units are zero (Wo, W_down);
// - layers past the small model's: random Wq/Wk/Wv/gate/up, zero Wo/W_down;
// - extra vocabulary entries are control tokens "<unused_N>" whose output rows read dim d with
//   weight -1000: their logits are about -1000 and they are never chosen.
// At f32 the big model writes the small model's text; quantized (q8_0), the text of the small
// model quantized the same way. `drop_layers` first removes layers of the small model: a weaker
// drafter of the same family (the 260K model without its 4th layer agrees with it on ~60% of
// next tokens). Shape "keep" writes the (layer-dropped) small model as it is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/dtype.h"
#include "util/status.h"

namespace goose {

struct InflateParams {
  std::string source;                // small llama GGUF with F32 tensors
  std::string shape = "small-0.5b";  // InflateShapes() or "keep"
  DType dtype = DType::kQ8_0;        // matrices; norms and rows Q8_0 cannot block stay F32
  std::vector<int> drop_layers;      // layers of the small model to remove first
  uint64_t seed = 1;
  int n_ctx = 0;  // context length written to the file (0 = the source's): RoPE runs at any
                  // position, so a long-prompt benchmark can go past what the source trained on
};

// The shape names and what they cost like: "small-0.5b" (0.44B, 32000 vocab), "llama-1b"
// (1.5B, 128256 vocab), "draft-45m" (a drafter at ~1/20 of small-0.5b's cost), "tiny-test".
std::vector<std::string> InflateShapes();

// Writes the inflated model to `out_path` (streamed, one tensor in memory at a time). Errors
// name the source and what does not fit (another architecture, a non-F32 tensor, a shape
// smaller than the source, a layer to drop that does not exist).
Status InflateModel(const InflateParams& p, const std::string& out_path);

}  // namespace goose
