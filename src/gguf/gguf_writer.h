// GgufWriter: builds a GGUF v3 file and writes it (metadata in insertion order, tensors aligned
// to `general.alignment`, default 32). Used by the model synthesizer and tests.
// Tensor dims follow GGUF order (ne[0] = contiguous dimension).
// Tensors are either given as bytes (AddTensor) or produced on demand while writing
// (AddTensorLazy), so a multi-GB model can be streamed to disk one tensor at a time.
// Misuse (wrong data size, ne[0] not a multiple of the block size) is a GOOSE_CHECK failure.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/status.h"

namespace goose {

class GgufWriter {
 public:
  // Fills exactly the tensor's byte size at `out`.
  using Producer = std::function<void(uint8_t* out)>;

  // Sets (or replaces) a metadata key.
  void Set(const std::string& key, GgufValue value);
  // Adds a tensor; `data` must hold exactly RowBytes(dtype, dims[0]) * prod(dims[1..]) bytes.
  void AddTensor(const std::string& name, std::vector<int64_t> dims, DType dtype,
                 std::vector<uint8_t> data);
  // Adds a tensor whose bytes are produced only when serializing/writing.
  void AddTensorLazy(const std::string& name, std::vector<int64_t> dims, DType dtype,
                     Producer produce);
  // Serializes to bytes / writes to a file (reports the path and errno text on failure). Write
  // goes through `<path>.tmp.<pid>` renamed over `path`: a failed write leaves no partial file.
  std::string Serialize() const;
  Status Write(const std::string& path) const;

  // Byte size of a tensor of these dims and dtype.
  static uint64_t TensorBytes(const std::vector<int64_t>& dims, DType dtype);

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    DType dtype;
    std::vector<uint8_t> data;
    Producer produce;  // set for lazy tensors
    uint64_t n_bytes = 0;
  };
  uint64_t Alignment() const;
  // Header, metadata and tensor directory, padded up to the data section.
  std::string SerializeHeader() const;
  // Streams the whole file to `sink` in chunks.
  void Emit(const std::function<void(const void*, size_t)>& sink) const;

  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace goose
