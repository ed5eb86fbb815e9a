// GgufWriter: builds a GGUF v3 file in memory and writes it (metadata in insertion order,
// tensors aligned to `general.alignment`, default 32). Used by the model synthesizer and tests.
// Tensor dims follow GGUF order (ne[0] = contiguous dimension).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/status.h"

namespace goose {

class GgufWriter {
 public:
  // Sets (or replaces) a metadata key.
  void Set(const std::string& key, GgufValue value);
  // Adds a tensor; `data` must hold exactly RowBytes(dtype, dims[0]) * prod(dims[1..]) bytes.
  void AddTensor(const std::string& name, std::vector<int64_t> dims, DType dtype,
                 std::vector<uint8_t> data);
  // Serializes to bytes / writes to a file (reports the path and errno text on failure).
  std::string Serialize() const;
  Status Write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    DType dtype;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace goose
