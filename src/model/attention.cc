// A pass's attention, one task at a time. Why the rows equal the sequential pass's: see
// attention.h and context.cc. Per query the keys and values go in increasing order through the
// same Dot / SoftCap / Softmax / Axpy operations whatever the task's shape; tiling the contiguous
// keys only decides which query visits a tile first (each key's score is its own dot product,
// each value is added in key order).
#include "model/attention.h"

#include <algorithm>

#include "ops/ops.h"
#include "util/prefetch.h"

namespace goose {

namespace {
// Below this many multiply-adds attention runs on the calling thread.
constexpr int64_t kMinParallelAttention = 1 << 17;
// Committed keys scored (and values accumulated) per step for all queries of a task: a tile of
// K or V rows stays in L1 while every query of the block uses it.
constexpr int kKeyTile = 64;
// Query rows (queries x heads sharing a KV head) per attention task.
constexpr int kRowsPerTask = 32;

int QueriesPerTask(const LlamaConfig& c) {
  return std::max(1, kRowsPerTask / (c.n_head / c.n_head_kv));
}

// One task: the queries [i0, i1) of one sequence, with every head that shares KV head g. Its
// score rows are m = (i - i0) * group + h for query i and the group's h-th head. T: the KV
// cache's element (float, or uint16_t for f16 halves, which the kernels convert exactly as
// they load).
template <class T>
class HeadTask {
 public:
  HeadTask(const LlamaConfig& c, const AttentionSequence& s, int layer, int window, int g, int i0,
           int i1, const float* q, float* out, float* scores, int width, const void** anc)
      : c_(c),
        s_(s),
        window_(window),
        g_(g),
        i0_(i0),
        i1_(i1),
        group_(c.n_head / c.n_head_kv),
        kv_dim_(c.n_head_kv * c.head_dim),
        q_dim_(c.n_head * c.head_dim),
        q_(q),
        out_(out),
        scores_(scores),
        width_(width),
        anc_(reinterpret_cast<const T**>(anc)),
        k_head_(static_cast<const T*>(s.k_cache) + layer * s.layer_stride +
                static_cast<size_t>(g) * c.head_dim),
        v_head_(static_cast<const T*>(s.v_cache) + layer * s.layer_stride +
                static_cast<size_t>(g) * c.head_dim) {}

  void Run() {
    int first = s_.n_past, end = 0;  // the block's contiguous keys: [first, end)
    for (int i = i0_; i < i1_; ++i) {
      first = std::min(first, FirstKey(i));
      end = std::max(end, KeysEnd(i));
    }
    ScoreContiguous(first, end);
    ScoreAncestorsAndNormalize();
    AccumulateContiguous(first, end);
    AccumulateAncestors();
  }

 private:
  int rows() const { return (i1_ - i0_) * group_; }
  int query_of(int m) const { return i0_ + m / group_; }
  size_t head_offset(int m) const {
    return static_cast<size_t>(s_.row0 + query_of(m)) * q_dim_ +
           static_cast<size_t>(g_ * group_ + m % group_) * c_.head_dim;
  }
  const float* Query(int m) const { return q_ + head_offset(m); }
  float* Output(int m) const { return out_ + head_offset(m); }
  float* Scores(int m) const { return scores_ + static_cast<size_t>(m) * width_; }
  // Rows m and m + 1 are two heads of one query: the same keys, so one load serves both.
  bool PairsWithNext(int m) const { return m + 1 < rows() && query_of(m + 1) == query_of(m); }
  int Depth(int i) const { return s_.depth[s_.base + i]; }
  // The keys query i sees: the contiguous cache rows [FirstKey(i), KeysEnd(i)), then (unless
  // the pending nodes are a chain, whose ancestors are those rows' continuation) its ancestors
  // from depth FirstAncestor(i) on. With a window of w, only the positions > p - w for the
  // query's position p = n_past + depth; without one, all of them.
  int KeysEnd(int i) const { return s_.chain ? s_.n_past + Depth(i) + 1 : s_.n_past; }
  int FirstKey(int i) const {
    return window_ == 0 ? 0 : std::clamp(s_.n_past + Depth(i) - window_ + 1, 0, KeysEnd(i));
  }
  int FirstAncestor(int i) const { return window_ == 0 ? 0 : std::max(0, Depth(i) + 1 - window_); }
  // Query i's pending ancestors and itself, root first, as rows of `head` (depth order is
  // position order, whichever pass and slot each came from); returns how many.
  int Ancestors(int i, const T* head) const {
    const int n_anc = Depth(i) + 1;
    for (int j = s_.base + i, k = n_anc - 1; j >= 0; j = s_.parents[j], --k) {
      anc_[k] = head + static_cast<size_t>(s_.n_past + j) * kv_dim_;
    }
    return n_anc;
  }

  // Asks for the rows [j0, j1) of a head's cache while the tile before them is computed: a
  // head's rows are kv_dim apart, and the hardware prefetchers lose such a stream at every page.
  void Prefetch(const T* head, int j0, int j1) const {
    constexpr size_t kLine = 64;
    const size_t bytes = c_.head_dim * sizeof(T);
    for (int j = j0; j < j1; ++j) {
      const char* row = reinterpret_cast<const char*>(head + static_cast<size_t>(j) * kv_dim_);
      for (size_t b = 0; b < bytes; b += kLine) PrefetchLine</*kToL1=*/true>(row + b);
    }
  }

  // Scores of the contiguous keys, a tile at a time (each K row loaded once per tile).
  void ScoreContiguous(int first, int end) const {
    for (int j0 = first; j0 < end; j0 += kKeyTile) {
      const int j1 = std::min(j0 + kKeyTile, end);
      Prefetch(k_head_, j1, std::min(j1 + kKeyTile, end));
      for (int m = 0; m < rows(); ++m) {
        const int j = std::max(j0, FirstKey(query_of(m)));
        const int e = std::min(j1, KeysEnd(query_of(m)));
        if (j >= e) continue;
        const T* keys = k_head_ + static_cast<size_t>(j) * kv_dim_;
        // Not the first row: it brings the tile from memory with 16 keys' loads in flight at
        // once (DotBatch2 has 8: measured slower).
        if (m > 0 && PairsWithNext(m)) {
          DotBatch2(Query(m), Query(m + 1), keys, kv_dim_, e - j, c_.head_dim, c_.attn_scale,
                    Scores(m) + j, Scores(m + 1) + j);
          ++m;
        } else {
          DotBatch(Query(m), keys, kv_dim_, e - j, c_.head_dim, c_.attn_scale, Scores(m) + j);
        }
      }
    }
  }

  // Scores of the ancestors (after the contiguous ones in each row), then soft-cap and softmax
  // over exactly the visible keys; the outputs start at zero.
  void ScoreAncestorsAndNormalize() const {
    for (int i = i0_; i < i1_; ++i) {
      const int skip = FirstAncestor(i);
      const int n_anc = s_.chain ? 0 : Ancestors(i, k_head_) - skip;
      const int fk = FirstKey(i);
      const int n_keys = KeysEnd(i) - fk + n_anc;
      for (int m = (i - i0_) * group_; m < (i - i0_ + 1) * group_; ++m) {
        float* sc = Scores(m);
        if (n_anc > 0) {
          DotGather(Query(m), anc_ + skip, n_anc, c_.head_dim, c_.attn_scale, sc + s_.n_past);
        }
        if (c_.attn_softcap > 0) SoftCap(sc + fk, n_keys, c_.attn_softcap);
        Softmax(sc + fk, n_keys);
        std::fill(Output(m), Output(m) + c_.head_dim, 0.0f);
      }
    }
  }

  void AccumulateContiguous(int first, int end) const {
    for (int j0 = first; j0 < end; j0 += kKeyTile) {
      const int j1 = std::min(j0 + kKeyTile, end);
      Prefetch(v_head_, j1, std::min(j1 + kKeyTile, end));
      for (int m = 0; m < rows(); ++m) {
        const int j = std::max(j0, FirstKey(query_of(m)));
        const int e = std::min(j1, KeysEnd(query_of(m)));
        if (j >= e) continue;
        const T* values = v_head_ + static_cast<size_t>(j) * kv_dim_;
        if (PairsWithNext(m)) {
          AxpyRows2(Scores(m) + j, Scores(m + 1) + j, values, kv_dim_, e - j, c_.head_dim,
                    Output(m), Output(m + 1));
          ++m;
        } else {
          AxpyRows(Scores(m) + j, values, kv_dim_, e - j, c_.head_dim, Output(m));
        }
      }
    }
  }

  void AccumulateAncestors() const {
    if (s_.chain) return;
    for (int i = i0_; i < i1_; ++i) {
      const int skip = FirstAncestor(i);
      const int n_anc = Ancestors(i, v_head_) - skip;
      for (int m = (i - i0_) * group_; m < (i - i0_ + 1) * group_; ++m) {
        AxpyGather(Scores(m) + s_.n_past, anc_ + skip, n_anc, c_.head_dim, Output(m));
      }
    }
  }

  const LlamaConfig& c_;
  const AttentionSequence& s_;
  const int window_, g_, i0_, i1_, group_, kv_dim_, q_dim_;
  const float* q_;
  float* out_;
  float* scores_;
  const int width_;
  const T** anc_;
  const T* k_head_;
  const T* v_head_;
};

}  // namespace

void PassAttention::Plan(std::span<const AttentionSequence> seqs, int n_threads) {
  seqs_ = seqs;
  tasks_.clear();
  costs_.clear();
  width_ = anc_width_ = 0;
  work_ = 0;
  const int block = QueriesPerTask(c_);
  for (int s = 0; s < static_cast<int>(seqs.size()); ++s) {
    const AttentionSequence& q = seqs[s];
    width_ = std::max(width_, q.n_past + q.base + q.n);
    anc_width_ = std::max(anc_width_, q.base + q.n);
    work_ += int64_t{q.n} * c_.n_head * (q.n_past + 1) * c_.head_dim;
    for (int i0 = 0; i0 < q.n; i0 += block) {
      const int i1 = std::min(q.n, i0 + block);
      int64_t keys = 0;  // the block's keys: its cost (the same for each KV head)
      for (int i = i0; i < i1; ++i) keys += q.n_past + q.depth[q.base + i] + 1;
      for (int g = 0; g < c_.n_head_kv; ++g) {
        tasks_.push_back({s, i0, i1, g});
        costs_.push_back(keys);
      }
    }
  }
  SplitByCost(n_threads);
  const size_t rows = static_cast<size_t>(block) * (c_.n_head / c_.n_head_kv);
  const size_t scores = static_cast<size_t>(n_threads) * rows * width_;
  if (scores_.size() < scores) scores_.resize(scores);
  const size_t anc = static_cast<size_t>(n_threads) * anc_width_;
  if (anc_.size() < anc) anc_.resize(anc);
}

// Contiguous runs of tasks of about equal cost (sequences at different depths cost
// differently); any split gives the same bits.
void PassAttention::SplitByCost(int n_threads) {
  int64_t total = 0;
  for (int64_t c : costs_) total += c;
  split_.assign(static_cast<size_t>(n_threads) + 1, static_cast<int>(tasks_.size()));
  split_[0] = 0;
  int64_t before = 0;  // cost of tasks [0, k)
  int t = 1;
  for (int k = 0; k < static_cast<int>(tasks_.size()) && t < n_threads; ++k) {
    while (t < n_threads && before * n_threads >= total * t) split_[t++] = k;
    before += costs_[k];
  }
}

void PassAttention::Run(int layer, int window, const float* q, float* out, ThreadPool* pool) {
  const int n_tasks = static_cast<int>(tasks_.size());
  const int n_threads = static_cast<int>(split_.size()) - 1;
  if (pool == nullptr || n_threads == 1 || work_ < kMinParallelAttention) {
    return RunTasks(layer, window, q, out, 0, n_tasks, 0);
  }
  pool->Run([&](int t, int) { RunTasks(layer, window, q, out, split_[t], split_[t + 1], t); });
}

void PassAttention::RunTasks(int layer, int window, const float* q, float* out, int t0, int t1,
                             int thread) {
  const size_t rows = static_cast<size_t>(QueriesPerTask(c_)) * (c_.n_head / c_.n_head_kv);
  float* scores = scores_.data() + static_cast<size_t>(thread) * rows * width_;
  const void** anc = anc_.data() + static_cast<size_t>(thread) * anc_width_;
  for (int k = t0; k < t1; ++k) {
    const Task& t = tasks_[k];
    const AttentionSequence& s = seqs_[t.seq];
    if (s.kv_type == KvType::kF16) {
      HeadTask<uint16_t>(c_, s, layer, window, t.g, t.i0, t.i1, q, out, scores, width_, anc).Run();
    } else {
      HeadTask<float>(c_, s, layer, window, t.g, t.i0, t.i1, q, out, scores, width_, anc).Run();
    }
  }
}

}  // namespace goose
