// Fuzz target transition_table: a persisted Token Recycling table (`--tr-cache FILE`) through
// TransitionTable::Load, which reads a path (the bytes go through an in-memory file).
//
// Load only accepts a file whose header equals the table's own (model fingerprint, n_vocab, K,
// bigram tier), so the input is loaded twice: into a table built from the file's own header
// when its sizes are small (n_vocab <= 32, K <= 16, at most 2^6 bigram slots), which reaches the
// body's validation, and into a fixed default table, which exercises the mismatch checks.
// Properties once a file loads:
// - Save writes back exactly the bytes that were loaded (the format has no slack);
// - every (tok, prev) gives successors inside the vocabulary, sorted by score descending, with
//   finite scores in [0, 1] (what Harvest stores: TopK's softmax), and HasSuccessors agrees;
// - a Harvest afterwards is found again (bigram and unigram), whatever the file left in the
//   bigram tier;
// - a failed Load leaves the table unchanged, and its error is one clean line naming the file.
// run-fuzz flags: -max_len=16384
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "draft/transition_table.h"
#include "fuzz_util.h"

namespace goose::fuzz {
namespace {

struct Header {
  uint64_t fingerprint = 0;
  int32_t n_vocab = 0, k = 0;
  uint32_t use_bigram = 0;
  uint64_t slots = 0;
};

// Reads the header fields (layout in transition_table.cc) where the input has them.
bool ReadHeader(std::string_view b, Header* h) {
  if (b.size() < 40) return false;
  std::memcpy(&h->fingerprint, b.data() + 12, 8);
  std::memcpy(&h->n_vocab, b.data() + 20, 4);
  std::memcpy(&h->k, b.data() + 24, 4);
  std::memcpy(&h->use_bigram, b.data() + 28, 4);
  std::memcpy(&h->slots, b.data() + 32, 8);
  return true;
}

void CheckError(const Status& st, const MemFile& file) {
  FUZZ_CHECK(!st.ok(), "expected an error");
  FUZZ_CHECK(st.message().rfind(file.path() + ": ", 0) == 0, "error does not name the file: %s",
             st.message().c_str());
  FUZZ_CHECK(IsOneCleanLine(st.message()), "error is not one clean line: %s", st.message().c_str());
}

// Everything a drafter reads from a loaded table.
void CheckRows(const TransitionTable& t) {
  const int n = t.n_vocab();
  for (int32_t tok = -1; tok <= n; ++tok) {
    for (int32_t prev = -2; prev <= n; ++prev) {
      const std::vector<Candidate> c = t.Successors(tok, prev);
      FUZZ_CHECK(t.HasSuccessors(tok, prev) == !c.empty(), "HasSuccessors(%d, %d)", tok, prev);
      for (size_t i = 0; i < c.size(); ++i) {
        FUZZ_CHECK(c[i].token >= 0 && c[i].token < n, "successor id %d", c[i].token);
        FUZZ_CHECK(std::isfinite(c[i].score) && c[i].score >= 0 && c[i].score <= 1,
                   "successor score %g of (%d, %d)", c[i].score, tok, prev);
        FUZZ_CHECK(i == 0 || c[i - 1].score >= c[i].score, "successors of (%d, %d) not sorted", tok,
                   prev);
      }
    }
  }
}

// Snapshot of what a table answers, to see that a failed Load changed nothing.
std::vector<float> Answers(const TransitionTable& t) {
  std::vector<float> out;
  for (int32_t tok = 0; tok < t.n_vocab(); ++tok) {
    for (int32_t prev = -1; prev < t.n_vocab(); prev += 3) {
      for (const Candidate& c : t.Successors(tok, prev)) {
        out.push_back(static_cast<float>(c.token));
        out.push_back(c.score);
      }
    }
  }
  return out;
}

void LoadInto(TransitionTable* t, std::string_view bytes, MemFile* file, MemFile* saved) {
  const std::vector<float> before = Answers(*t);
  const Status st = t->Load(file->path());
  if (!st.ok()) {
    CheckError(st, *file);
    FUZZ_CHECK(Answers(*t) == before, "a failed Load changed the table");
    return;
  }
  const Status save = t->Save(saved->path());
  FUZZ_CHECK(save.ok(), "Save: %s", save.message().c_str());
  FUZZ_CHECK(saved->Read() == bytes, "Save does not write back the loaded bytes");
  CheckRows(*t);

  // Harvest a few rows over whatever the file left, then read them back.
  const int n = t->n_vocab(), k = t->k();
  for (int32_t tok = 0; tok < n; tok += 5) {
    const int32_t prev = (tok * 7 + 3) % n;
    std::vector<int32_t> ids(k);
    std::vector<float> scores(k);
    for (int i = 0; i < k; ++i) {
      ids[i] = (tok + i) % n;
      scores[i] = 1.0f / static_cast<float>(i + 2);
    }
    t->Harvest(prev, tok, ids, scores);
    FUZZ_CHECK(t->Observed(tok), "harvested row not observed");
    FUZZ_CHECK(!t->use_bigram() || t->HasBigram(tok, prev), "harvested bigram not found");
    const std::vector<Candidate> c = t->Successors(tok, prev);
    FUZZ_CHECK(!c.empty() && c[0].token == ids[0], "harvested row not read back");
  }
  CheckRows(*t);
}

}  // namespace
}  // namespace goose::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goose;
  using namespace goose::fuzz;
  static MemFile* file = new MemFile("tr-cache");
  static MemFile* saved = new MemFile("tr-saved");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  file->Write(bytes);

  Header h;
  if (ReadHeader(bytes, &h) && h.n_vocab >= 1 && h.n_vocab <= 32 && h.k >= 1 && h.k <= 16 &&
      h.use_bigram <= 1) {
    int log2_slots = -1;
    for (int l = 0; l <= 6; ++l) {
      if (h.slots == (uint64_t{1} << l)) log2_slots = l;
    }
    if (h.use_bigram == 0 && h.slots == 0) log2_slots = 0;
    if (log2_slots >= 0) {
      TransitionTable t(h.n_vocab, h.k, log2_slots, h.use_bigram == 1, h.fingerprint);
      LoadInto(&t, bytes, file, saved);
    }
  }
  TransitionTable fixed(/*n_vocab=*/8, /*k=*/2, /*bigram_log2_slots=*/2, /*use_bigram=*/true);
  LoadInto(&fixed, bytes, file, saved);
  return 0;
}
