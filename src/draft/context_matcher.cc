// ContextMatcher implementation: incremental first-occurrence n-gram index (docs/methods.md
// §2.1 step 1).
#include "draft/context_matcher.h"

#include <algorithm>
#include <numeric>

#include "util/check.h"
#include "util/rng.h"

namespace goose {
namespace {

// Tokens of pool + extra as one virtual sequence.
struct View {
  const std::vector<int32_t>& pool;
  std::span<const int32_t> extra;
  int64_t size() const { return static_cast<int64_t>(pool.size() + extra.size()); }
  int32_t operator[](int64_t i) const {
    const int64_t p = static_cast<int64_t>(pool.size());
    return i < p ? pool[i] : extra[i - p];
  }
};

uint64_t HashNgram(const View& v, int64_t start, int n) {
  uint64_t h = 0x51ed270b27a4f3c1ull ^ static_cast<uint64_t>(n);
  for (int i = 0; i < n; ++i) h = Mix64(h ^ static_cast<uint32_t>(v[start + i]));
  return h;
}

bool SameNgram(const View& v, int64_t a, int64_t b, int n) {
  for (int i = 0; i < n; ++i) {
    if (v[a + i] != v[b + i]) return false;
  }
  return true;
}

Confidence Reduced(int64_t num, int64_t den) {
  const int64_t g = std::gcd(num, den);
  return {num / g, den / g};
}

}  // namespace

Confidence MatchConfidence(int chain_len, bool consensus, int long_match) {
  if (chain_len <= 0) return {0, 1};
  if (consensus) return {1, 1};
  if (chain_len >= long_match) {
    // 0.7 + 0.2 * (len - L) / 12 = (84 + 2 * (len - L)) / 120, capped at 0.9 = 108 / 120.
    return Reduced(std::min<int64_t>(84 + 2 * int64_t{chain_len - long_match}, 108), 120);
  }
  // 0.6 * len / L = 3 * len / (5 * L).
  return Reduced(3 * int64_t{chain_len}, 5 * int64_t{long_match});
}

ContextMatcher::ContextMatcher(MatcherParams params) : params_(std::move(params)) {
  for (int n : params_.ngram_sizes) GOOSE_CHECK(n >= 1);
  indexed_ns_ = params_.ngram_sizes;
  std::sort(indexed_ns_.begin(), indexed_ns_.end());
  indexed_ns_.erase(std::unique(indexed_ns_.begin(), indexed_ns_.end()), indexed_ns_.end());
  index_.resize(indexed_ns_.size());
}

const ContextMatcher::Index* ContextMatcher::IndexFor(int n) const {
  for (size_t i = 0; i < indexed_ns_.size(); ++i) {
    if (indexed_ns_[i] == n) return &index_[i];
  }
  return nullptr;
}

void ContextMatcher::Index::Insert(uint64_t h, const Entry& e) {
  if (2 * (used + 1) > slots.size()) {
    std::vector<Slot> old(std::max<size_t>(64, 2 * slots.size()));
    old.swap(slots);
    used = 0;
    for (const Slot& s : old) {
      if (s.entry.count > 0) Insert(s.hash, s.entry);
    }
  }
  const size_t mask = slots.size() - 1;
  size_t i = h & mask;
  while (slots[i].entry.count > 0) i = (i + 1) & mask;
  slots[i] = {h, e};
  ++used;
}

void ContextMatcher::Append(int32_t token) {
  pool_.push_back(token);
  const View v{pool_, {}};
  const int64_t succ = v.size() - 1;  // position of the successor that just became known
  for (size_t i = 0; i < indexed_ns_.size(); ++i) {
    const int n = indexed_ns_[i];
    const int64_t j = succ - n;  // the n-gram pool[j, j+n) now has a successor
    if (j < 0) continue;
    const uint64_t h = HashNgram(v, j, n);
    const Entry* found = index_[i].Find(h, [&](int64_t pos) { return SameNgram(v, pos, j, n); });
    if (found == nullptr) {
      index_[i].Insert(h, Entry{j, 1, token, true});
    } else {
      Entry& e = const_cast<Entry&>(*found);  // (in index_, which this method may change)
      ++e.count;
      if (token != e.next_token) e.all_next_same = false;
    }
  }
}

void ContextMatcher::Append(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) Append(t);
}

void ContextMatcher::Clear() {
  pool_.clear();
  for (auto& idx : index_) idx = Index{};
}

ContextMatcher::Entry ContextMatcher::Lookup(int n, std::span<const int32_t> extra) const {
  const View v{pool_, extra};
  const int64_t total = v.size();
  Entry out;
  if (n < 1 || total < n + 1) return out;
  const int64_t query = total - n;
  const Index* idx = IndexFor(n);
  int64_t scan_from = 0;
  if (idx != nullptr) {
    // Indexed windows are those whose successor lies in the pool: j <= |pool| - n - 1.
    const Entry* e =
        idx->Find(HashNgram(v, query, n), [&](int64_t pos) { return SameNgram(v, pos, query, n); });
    if (e != nullptr) out = *e;
    scan_from = std::max<int64_t>(0, static_cast<int64_t>(pool_.size()) - n);
  }
  // Windows whose successor lies in `extra` (at most |extra|), or everything when unindexed.
  for (int64_t j = scan_from; j + n < total; ++j) {
    if (!SameNgram(v, j, query, n)) continue;
    const int32_t next = v[j + n];
    if (out.count == 0) {
      out = Entry{j, 1, next, true};
    } else {
      ++out.count;
      if (next != out.next_token) out.all_next_same = false;
    }
  }
  return out;
}

ContextMatcher::Match ContextMatcher::LongestMatch(std::span<const int32_t> extra) const {
  for (int n : params_.ngram_sizes) {
    Entry e = Lookup(n, extra);
    if (e.count > 0) return {n, e};
  }
  return {};
}

ContextMatch ContextMatcher::Propose(std::span<const int32_t> extra, int max_tokens) const {
  return Continuation(LongestMatch(extra), extra, max_tokens);
}

ContextMatch ContextMatcher::Continuation(const Match& m, std::span<const int32_t> extra,
                                          int max_tokens) const {
  if (max_tokens < 0) max_tokens = params_.max_chain;
  ContextMatch out;
  if (m.n == 0) return out;
  const View v{pool_, extra};
  out.ngram = m.n;
  out.start = m.entry.first_pos + m.n;
  const int64_t end = std::min<int64_t>(v.size(), out.start + max_tokens);
  for (int64_t i = out.start; i < end; ++i) out.tokens.push_back(v[i]);
  return out;
}

bool ContextMatcher::Consensus(std::span<const int32_t> extra) const {
  return IsConsensus(LongestMatch(extra));
}

bool ContextMatcher::IsConsensus(const Match& m) {
  return m.n > 0 && m.entry.count >= 2 && m.entry.all_next_same;
}

ContextMatcher::Spine ContextMatcher::ProposeSpine() const {
  Spine out;
  const Match m = LongestMatch({});  // one look-up for the match and its consensus
  const ContextMatch first = Continuation(m, {}, -1);
  out.tokens = first.tokens;
  out.ngram = first.ngram;
  out.consensus = IsConsensus(m);
  out.confidence =
      MatchConfidence(static_cast<int>(out.tokens.size()), out.consensus, params_.long_match);
  if (!out.confidence.GreaterThan(3, 5)) return out;  // CHAIN_EXTENSION_CONFIDENCE = 0.6
  const int64_t limit = out.confidence.FloorTimes(params_.max_extended_chain);
  const bool saturated = out.confidence.IsOne();
  while (static_cast<int64_t>(out.tokens.size()) < limit) {
    const Match mn = LongestMatch(out.tokens);
    const ContextMatch next = Continuation(mn, out.tokens, -1);
    if (next.tokens.empty()) break;
    bool stop = false;
    if (saturated) {
      // Confidence of this continuation at the drafted position, before appending it.
      const Confidence c = MatchConfidence(static_cast<int>(next.tokens.size()), IsConsensus(mn),
                                           params_.long_match);
      stop = !c.IsOne();
    }
    // Convention 10: append the whole continuation even past `limit`.
    out.tokens.insert(out.tokens.end(), next.tokens.begin(), next.tokens.end());
    if (stop) break;
  }
  return out;
}

std::vector<int32_t> ContextMatcher::ProposePld(int max_n, int min_n, int num_tokens) const {
  std::vector<int32_t> out;
  if (num_tokens <= 0) return out;
  const int64_t len = static_cast<int64_t>(pool_.size());
  for (int n = max_n; n >= std::max(1, min_n); --n) {
    const Entry e = Lookup(n, {});
    if (e.count == 0) continue;
    const int64_t start = e.first_pos + n;
    // Later occurrences only make both bounds worse, so the earliest one decides for this n.
    if (start < len - n && start + num_tokens <= len) {
      out.assign(pool_.begin() + start, pool_.begin() + start + num_tokens);
      return out;
    }
  }
  return out;
}

size_t ContextMatcher::memory_bytes() const {
  size_t bytes = pool_.capacity() * sizeof(int32_t);
  for (const auto& idx : index_) bytes += idx.slots.capacity() * sizeof(Index::Slot);
  return bytes;
}

}  // namespace goose
