// TransitionTable implementation: dense unigram tier + bounded open-addressing bigram tier.
#include "draft/transition_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "ops/ops.h"
#include "util/check.h"
#include "util/rng.h"

namespace goose {
namespace {

// A bigram key never equals 0 because prev + 1 >= 1 is stored in the high half.
uint64_t BigramKey(int32_t prev, int32_t tok) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(prev) + 1u) << 32) |
         static_cast<uint32_t>(tok);
}

// Probe window: a key lives in one of kProbe consecutive slots after its home slot. When all are
// taken by other keys the home slot is overwritten (replace on collision), so memory stays fixed.
constexpr int kProbe = 4;

// NaN logits sort below everything (treated as -inf minus epsilon) so a bad row cannot break
// the strict weak ordering of the comparison.
bool Better(float a, int32_t ia, float b, int32_t ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return nb;
  if (!na && a != b) return a > b;
  return ia < ib;
}

constexpr char kMagic[8] = {'G', 'O', 'O', 'S', 'E', 'T', 'T', '1'};
constexpr uint32_t kVersion = 2;  // 2: model fingerprint

}  // namespace

void RankedSoftmax(const float* ranked_logits, int n, float* scores) {
  // In double and in rank order (deterministic); may run in place (scores == ranked_logits).
  double sum = 0.0;
  const double top = n > 0 ? ranked_logits[0] : 0.0;
  for (int i = 0; i < n; ++i) {
    const double e = std::isnan(ranked_logits[i]) ? 0.0 : std::exp(ranked_logits[i] - top);
    scores[i] = static_cast<float>(e);
    sum += e;
  }
  for (int i = 0; i < n; ++i) {
    scores[i] = (sum > 0.0 && std::isfinite(sum)) ? static_cast<float>(scores[i] / sum)
                                                  : (i == 0 ? 1.0f : 0.0f);
  }
}

void TopK(const float* logits, int n_vocab, int k, int32_t* ids, float* scores) {
  if (k <= 0) return;
  const int kk = std::min(k, std::max(n_vocab, 0));
  // Insertion into a sorted window of kk: O(V) when most logits lose to the current k-th.
  // Once the window is full and its last entry is a number, a later logit gets in exactly when
  // it is greater (a tie loses on the id, a NaN loses to any number): a vectorized scan finds
  // the next such logit.
  int filled = 0;
  for (int32_t v = 0; v < n_vocab; ++v) {
    if (filled == kk && !std::isnan(logits[ids[kk - 1]])) {
      v += FirstAbove(logits + v, n_vocab - v, logits[ids[kk - 1]]);
      if (v == n_vocab) break;
    }
    const float x = logits[v];
    if (filled == kk && !Better(x, v, logits[ids[kk - 1]], ids[kk - 1])) continue;
    int pos = filled < kk ? filled++ : kk - 1;
    while (pos > 0 && Better(x, v, logits[ids[pos - 1]], ids[pos - 1])) {
      ids[pos] = ids[pos - 1];
      --pos;
    }
    ids[pos] = v;
  }
  for (int i = 0; i < kk; ++i) scores[i] = logits[ids[i]];
  RankedSoftmax(scores, kk, scores);
  for (int i = kk; i < k; ++i) {  // vocab smaller than k: pad (filtered by Successors)
    ids[i] = -1;
    scores[i] = 0.0f;
  }
}

TransitionTable::TransitionTable(int n_vocab, int k, int bigram_log2_slots, bool use_bigram,
                                 uint64_t model_fingerprint)
    : n_vocab_(n_vocab), k_(k), use_bigram_(use_bigram), fingerprint_(model_fingerprint) {
  GOOSE_CHECK(n_vocab > 0 && k > 0);
  GOOSE_CHECK(bigram_log2_slots >= 0 && bigram_log2_slots <= 30);
  uni_ids_.assign(static_cast<size_t>(n_vocab) * k, 0);
  uni_scores_.assign(static_cast<size_t>(n_vocab) * k, 0.0f);
  observed_.assign(n_vocab, 0);
  if (use_bigram_) {
    const size_t slots = size_t{1} << bigram_log2_slots;
    bi_keys_.assign(slots, 0);
    bi_ids_.assign(slots * k, -1);
    bi_scores_.assign(slots * k, 0.0f);
  }
}

size_t TransitionTable::FindSlot(uint64_t key) const {
  const size_t mask = bi_keys_.size() - 1;
  const size_t home = Mix64(key) & mask;
  for (int p = 0; p < kProbe; ++p) {
    const size_t s = (home + p) & mask;
    if (bi_keys_[s] == key) return s;
    if (bi_keys_[s] == 0) return kNoSlot;  // never deleted, so the chain ends here
  }
  return kNoSlot;
}

void TransitionTable::Harvest(int32_t prev, int32_t tok, std::span<const int32_t> ids,
                              std::span<const float> scores) {
  GOOSE_CHECK(tok >= 0 && tok < n_vocab_);
  GOOSE_CHECK(ids.size() == scores.size());
  // Sort a copy by score descending (stable: equal scores keep the caller's order, which for
  // TopK output is lower id first). Missing entries are padded with id -1, score 0.
  const int n = static_cast<int>(std::min<size_t>(ids.size(), k_));
  std::vector<int> order(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) order[i] = static_cast<int>(i);
  auto score_key = [&](int i) {  // NaN sorts last instead of breaking the ordering
    return std::isnan(scores[i]) ? -std::numeric_limits<float>::infinity() : scores[i];
  };
  auto by_score = [&](int a, int b) { return score_key(a) > score_key(b); };
  if (!std::is_sorted(order.begin(), order.end(), by_score)) {  // TopK rows already are
    std::stable_sort(order.begin(), order.end(), by_score);
  }
  int32_t* row_ids = &uni_ids_[static_cast<size_t>(tok) * k_];
  float* row_scores = &uni_scores_[static_cast<size_t>(tok) * k_];
  for (int i = 0; i < k_; ++i) {
    const bool have = i < n && ids[order[i]] >= 0 && ids[order[i]] < n_vocab_;
    row_ids[i] = have ? ids[order[i]] : -1;
    row_scores[i] = have ? scores[order[i]] : 0.0f;
  }
  observed_[tok] = 1;
  if (!use_bigram_ || prev < 0 || prev >= n_vocab_) return;

  const uint64_t key = BigramKey(prev, tok);
  const size_t mask = bi_keys_.size() - 1;
  const size_t home = Mix64(key) & mask;
  size_t slot = home;  // replace-on-collision target if the window is full of other keys
  for (int p = 0; p < kProbe; ++p) {
    const size_t s = (home + p) & mask;
    if (bi_keys_[s] == key || bi_keys_[s] == 0) {
      slot = s;
      break;
    }
  }
  if (bi_keys_[slot] == 0) ++bigram_count_;
  bi_keys_[slot] = key;
  std::copy(row_ids, row_ids + k_, &bi_ids_[slot * k_]);
  std::copy(row_scores, row_scores + k_, &bi_scores_[slot * k_]);
}

const int32_t* TransitionTable::FindRow(int32_t tok, int32_t prev, const float** scores) const {
  if (tok < 0 || tok >= n_vocab_) return nullptr;
  if (use_bigram_ && prev >= 0 && prev < n_vocab_) {
    const size_t s = FindSlot(BigramKey(prev, tok));
    if (s != kNoSlot) {
      *scores = &bi_scores_[s * k_];
      return &bi_ids_[s * k_];
    }
  }
  if (!observed_[tok]) return nullptr;
  *scores = &uni_scores_[static_cast<size_t>(tok) * k_];
  return &uni_ids_[static_cast<size_t>(tok) * k_];
}

std::vector<Candidate> TransitionTable::Successors(int32_t tok, int32_t prev) const {
  std::vector<Candidate> out;
  const float* scores = nullptr;
  const int32_t* ids = FindRow(tok, prev, &scores);
  if (ids == nullptr) return out;
  out.reserve(k_);
  for (int i = 0; i < k_; ++i) {
    if (ids[i] >= 0) out.push_back({ids[i], scores[i]});
  }
  return out;  // rows are stored sorted by score descending
}

bool TransitionTable::HasSuccessors(int32_t tok, int32_t prev) const {
  const float* scores = nullptr;
  const int32_t* ids = FindRow(tok, prev, &scores);
  return ids != nullptr && std::any_of(ids, ids + k_, [](int32_t id) { return id >= 0; });
}

bool TransitionTable::HasBigram(int32_t tok, int32_t prev) const {
  return use_bigram_ && tok >= 0 && tok < n_vocab_ && prev >= 0 && prev < n_vocab_ &&
         FindSlot(BigramKey(prev, tok)) != kNoSlot;
}

bool TransitionTable::Observed(int32_t tok) const {
  return tok >= 0 && tok < n_vocab_ && observed_[tok] != 0;
}

std::span<const int32_t> TransitionTable::UnigramIds(int32_t tok) const {
  GOOSE_CHECK(tok >= 0 && tok < n_vocab_);
  return {&uni_ids_[static_cast<size_t>(tok) * k_], static_cast<size_t>(k_)};
}

std::span<const float> TransitionTable::UnigramScores(int32_t tok) const {
  GOOSE_CHECK(tok >= 0 && tok < n_vocab_);
  return {&uni_scores_[static_cast<size_t>(tok) * k_], static_cast<size_t>(k_)};
}

void TransitionTable::Clear() {
  std::fill(uni_ids_.begin(), uni_ids_.end(), 0);
  std::fill(uni_scores_.begin(), uni_scores_.end(), 0.0f);
  std::fill(observed_.begin(), observed_.end(), 0);
  std::fill(bi_keys_.begin(), bi_keys_.end(), 0);
  std::fill(bi_ids_.begin(), bi_ids_.end(), -1);
  std::fill(bi_scores_.begin(), bi_scores_.end(), 0.0f);
  bigram_count_ = 0;
}

size_t TransitionTable::memory_bytes() const {
  return uni_ids_.capacity() * sizeof(int32_t) + uni_scores_.capacity() * sizeof(float) +
         observed_.capacity() + bi_keys_.capacity() * sizeof(uint64_t) +
         bi_ids_.capacity() * sizeof(int32_t) + bi_scores_.capacity() * sizeof(float);
}

size_t TransitionTable::bigram_entries() const { return bigram_count_; }

// File layout (little-endian, native widths):
//   char magic[8] = "GOOSETT1"; u32 version = 2; u64 model_fingerprint; i32 n_vocab; i32 k;
//   u32 use_bigram; u64 slots;
//   i32 uni_ids[n_vocab*k]; f32 uni_scores[n_vocab*k]; u8 observed[n_vocab];
//   u64 bi_keys[slots]; i32 bi_ids[slots*k]; f32 bi_scores[slots*k].
namespace {

constexpr size_t kHeaderBytes = 8 + 4 + 8 + 4 + 4 + 4 + 8;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

template <typename Vec>
bool WriteVec(std::FILE* f, const Vec& v) {
  return v.empty() || std::fwrite(v.data(), sizeof(v[0]), v.size(), f) == v.size();
}

}  // namespace

Status TransitionTable::Save(const std::string& path) const {
  FilePtr f(std::fopen(path.c_str(), "wb"));
  if (!f) return Status::Error(StrFormat("%s: cannot open for writing", path.c_str()));
  const uint32_t version = kVersion, use_bigram = use_bigram_ ? 1 : 0;
  const uint64_t slots = bi_keys_.size();
  bool ok = std::fwrite(kMagic, 1, 8, f.get()) == 8 && std::fwrite(&version, 4, 1, f.get()) == 1 &&
            std::fwrite(&fingerprint_, 8, 1, f.get()) == 1 &&
            std::fwrite(&n_vocab_, 4, 1, f.get()) == 1 && std::fwrite(&k_, 4, 1, f.get()) == 1 &&
            std::fwrite(&use_bigram, 4, 1, f.get()) == 1 && std::fwrite(&slots, 8, 1, f.get()) == 1;
  ok = ok && WriteVec(f.get(), uni_ids_) && WriteVec(f.get(), uni_scores_) &&
       WriteVec(f.get(), observed_) && WriteVec(f.get(), bi_keys_) && WriteVec(f.get(), bi_ids_) &&
       WriteVec(f.get(), bi_scores_);
  if (std::fflush(f.get()) != 0) ok = false;
  if (!ok) return Status::Error(StrFormat("%s: write failed", path.c_str()));
  return Status::Ok();
}

Status TransitionTable::Load(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return Status::Error(StrFormat("%s: cannot open for reading", path.c_str()));
  const char* p = path.c_str();
  size_t offset = 0;
  auto read = [&](void* dst, size_t bytes, const char* what) -> Status {
    if (bytes == 0) return Status::Ok();
    const size_t got = std::fread(dst, 1, bytes, f.get());
    if (got != bytes) {
      return Status::Error(
          StrFormat("%s: truncated file: %s needs %zu bytes at offset %zu, %zu "
                    "available",
                    p, what, bytes, offset, got));
    }
    offset += bytes;
    return Status::Ok();
  };
  char magic[8];
  GOOSE_RETURN_IF_ERROR(read(magic, 8, "magic"));
  if (std::memcmp(magic, kMagic, 8) != 0) {
    return Status::Error(StrFormat("%s: bad magic at offset 0 (not a goose transition table)", p));
  }
  uint32_t version = 0, use_bigram = 0;
  uint64_t fingerprint = 0, slots = 0;
  int32_t n_vocab = 0, k = 0;
  GOOSE_RETURN_IF_ERROR(read(&version, 4, "version"));
  if (version != kVersion) {
    return Status::Error(
        StrFormat("%s: unsupported version %u at offset 8 (expected %u)", p, version, kVersion));
  }
  GOOSE_RETURN_IF_ERROR(read(&fingerprint, 8, "model fingerprint"));
  GOOSE_RETURN_IF_ERROR(read(&n_vocab, 4, "n_vocab"));
  GOOSE_RETURN_IF_ERROR(read(&k, 4, "k"));
  GOOSE_RETURN_IF_ERROR(read(&use_bigram, 4, "use_bigram"));
  GOOSE_RETURN_IF_ERROR(read(&slots, 8, "bigram slots"));
  // The header must describe exactly this table: nothing is adopted from the file.
  if (fingerprint != fingerprint_) {
    return Status::Error(
        StrFormat("%s: model mismatch at offset 12: the table was saved for "
                  "model %016llx, this is model %016llx",
                  p, static_cast<unsigned long long>(fingerprint),
                  static_cast<unsigned long long>(fingerprint_)));
  }
  if (n_vocab != n_vocab_) {
    return Status::Error(
        StrFormat("%s: vocab mismatch at offset 20: file has n_vocab %d, table "
                  "has %d",
                  p, n_vocab, n_vocab_));
  }
  if (k != k_) {
    return Status::Error(
        StrFormat("%s: K mismatch at offset 24: file has k %d, table has %d", p, k, k_));
  }
  const uint32_t want_bigram = use_bigram_ ? 1 : 0;
  const uint64_t want_slots = bi_keys_.size();
  if (use_bigram != want_bigram || slots != want_slots) {
    return Status::Error(
        StrFormat("%s: bigram tier mismatch at offset 28: file has use_bigram "
                  "%u with %llu slots, table has use_bigram %u with %llu slots",
                  p, use_bigram, static_cast<unsigned long long>(slots), want_bigram,
                  static_cast<unsigned long long>(want_slots)));
  }
  // The exact size, before allocating anything the header asks for.
  const size_t nk = static_cast<size_t>(n_vocab) * k;
  const size_t want_bytes =
      kHeaderBytes + nk * 8 + static_cast<size_t>(n_vocab) + slots * 8 + slots * k * 8;
  if (std::fseek(f.get(), 0, SEEK_END) != 0) return Status::Error(StrFormat("%s: cannot seek", p));
  const long file_bytes = std::ftell(f.get());
  if (file_bytes < 0 || static_cast<size_t>(file_bytes) != want_bytes) {
    return Status::Error(
        StrFormat("%s: file is %ld bytes, the header at offset 0 implies %zu "
                  "(truncated or trailing bytes)",
                  p, file_bytes, want_bytes));
  }
  if (std::fseek(f.get(), static_cast<long>(offset), SEEK_SET) != 0) {
    return Status::Error(StrFormat("%s: cannot seek", p));
  }
  // Read into temporaries so a bad file leaves the table unchanged.
  std::vector<int32_t> uni_ids(nk);
  std::vector<float> uni_scores(nk);
  std::vector<uint8_t> observed(n_vocab);
  Slots<int32_t> bi_ids(slots * k);
  Slots<float> bi_scores(slots * k);
  Slots<uint64_t> bi_keys(slots);
  const size_t uni_ids_off = offset;
  GOOSE_RETURN_IF_ERROR(read(uni_ids.data(), nk * 4, "unigram ids"));
  GOOSE_RETURN_IF_ERROR(read(uni_scores.data(), nk * 4, "unigram scores"));
  const size_t observed_off = offset;
  GOOSE_RETURN_IF_ERROR(read(observed.data(), n_vocab, "observed bits"));
  const size_t keys_off = offset;
  GOOSE_RETURN_IF_ERROR(read(bi_keys.data(), slots * 8, "bigram keys"));
  const size_t bi_ids_off = offset;
  GOOSE_RETURN_IF_ERROR(read(bi_ids.data(), slots * k * 4, "bigram ids"));
  GOOSE_RETURN_IF_ERROR(read(bi_scores.data(), slots * k * 4, "bigram scores"));
  // Content validation: every id must be a token or the -1 padding, so a drafted id can never
  // index outside the vocab.
  for (size_t i = 0; i < nk; ++i) {
    if (uni_ids[i] < -1 || uni_ids[i] >= n_vocab) {
      return Status::Error(StrFormat("%s: unigram id %d out of range at offset %zu", p, uni_ids[i],
                                     uni_ids_off + 4 * i));
    }
  }
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (observed[i] > 1) {
      return Status::Error(StrFormat("%s: observed flag %u at offset %zu is not 0/1", p,
                                     observed[i], observed_off + i));
    }
  }
  size_t count = 0;
  for (size_t s = 0; s < slots; ++s) {
    const uint64_t key = bi_keys[s];
    if (key == 0) continue;
    ++count;
    const uint64_t prev1 = key >> 32, tok = key & 0xffffffffu;
    if (prev1 == 0 || prev1 > static_cast<uint64_t>(n_vocab) ||
        tok >= static_cast<uint64_t>(n_vocab)) {
      return Status::Error(StrFormat("%s: bigram key %llx out of range at offset %zu", p,
                                     static_cast<unsigned long long>(key), keys_off + 8 * s));
    }
  }
  for (size_t i = 0; i < bi_ids.size(); ++i) {
    if (bi_ids[i] < -1 || bi_ids[i] >= n_vocab) {
      return Status::Error(StrFormat("%s: bigram id %d out of range at offset %zu", p, bi_ids[i],
                                     bi_ids_off + 4 * i));
    }
  }
  // Scores as Harvest stores TopK's softmax: in [0, 1] (no NaN, no infinity) and, padding ids
  // aside, non-increasing along a row, which the tree builders rely on (a huge score would
  // overflow EdgeAcceptance::ScoreBin's integer bin).
  auto check_scores = [&](std::span<const int32_t> ids, std::span<const float> scores,
                          size_t scores_off, const char* tier) -> Status {
    for (size_t row = 0; row * k < ids.size(); ++row) {
      float prev = 1.0f;
      for (size_t i = row * k; i < (row + 1) * k; ++i) {
        if (!(scores[i] >= 0.0f && scores[i] <= 1.0f)) {
          return Status::Error(StrFormat("%s: %s score %g at offset %zu is not in [0, 1]", p, tier,
                                         scores[i], scores_off + 4 * i));
        }
        if (ids[i] < 0) continue;
        if (scores[i] > prev) {
          return Status::Error(
              StrFormat("%s: %s score %g at offset %zu is above the one before "
                        "it (rows are sorted by score)",
                        p, tier, scores[i], scores_off + 4 * i));
        }
        prev = scores[i];
      }
    }
    return Status::Ok();
  };
  GOOSE_RETURN_IF_ERROR(check_scores(uni_ids, uni_scores, uni_ids_off + nk * 4, "unigram"));
  GOOSE_RETURN_IF_ERROR(check_scores(bi_ids, bi_scores, bi_ids_off + slots * k * 4, "bigram"));
  uni_ids_ = std::move(uni_ids);
  uni_scores_ = std::move(uni_scores);
  observed_ = std::move(observed);
  bi_keys_ = std::move(bi_keys);
  bi_ids_ = std::move(bi_ids);
  bi_scores_ = std::move(bi_scores);
  bigram_count_ = count;
  return Status::Ok();
}

}  // namespace goose
