#include "gguf/gguf_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "util/check.h"

namespace goose {

namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutString(std::string* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

// Writes the payload of `v` as type `type` (arrays use their own elem_type).
void PutValue(std::string* out, GgufType type, const GgufValue& v) {
  switch (type) {
    case GgufType::kUint8:
      Put<uint8_t>(out, static_cast<uint8_t>(v.u));
      break;
    case GgufType::kInt8:
      Put<int8_t>(out, static_cast<int8_t>(v.i));
      break;
    case GgufType::kUint16:
      Put<uint16_t>(out, static_cast<uint16_t>(v.u));
      break;
    case GgufType::kInt16:
      Put<int16_t>(out, static_cast<int16_t>(v.i));
      break;
    case GgufType::kUint32:
      Put<uint32_t>(out, static_cast<uint32_t>(v.u));
      break;
    case GgufType::kInt32:
      Put<int32_t>(out, static_cast<int32_t>(v.i));
      break;
    case GgufType::kFloat32:
      Put<float>(out, static_cast<float>(v.f));
      break;
    case GgufType::kBool:
      Put<uint8_t>(out, v.u ? 1 : 0);
      break;
    case GgufType::kString:
      PutString(out, v.str);
      break;
    case GgufType::kUint64:
      Put<uint64_t>(out, v.u);
      break;
    case GgufType::kInt64:
      Put<int64_t>(out, v.i);
      break;
    case GgufType::kFloat64:
      Put<double>(out, v.f);
      break;
    case GgufType::kArray:
      Put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
      Put<uint64_t>(out, v.size());
      if (v.elem_type == GgufType::kString) {
        for (const std::string& e : v.strings) PutString(out, e);
      } else if (v.elem_type == GgufType::kArray) {
        for (const GgufValue& e : v.arrays) PutValue(out, GgufType::kArray, e);
      } else {
        out->append(reinterpret_cast<const char*>(v.packed.data()), v.packed.size());
      }
      break;
  }
}

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

uint64_t GgufWriter::TensorBytes(const std::vector<int64_t>& dims, DType dtype) {
  GOOSE_CHECK(!dims.empty() && dims.size() <= 4);
  const DTypeInfo info = GetDTypeInfo(dtype);
  GOOSE_CHECK(info.block_size > 0 && dims[0] % info.block_size == 0);
  uint64_t n = static_cast<uint64_t>(RowBytes(dtype, dims[0]));
  for (size_t i = 1; i < dims.size(); ++i) n *= static_cast<uint64_t>(dims[i]);
  return n;
}

void GgufWriter::Set(const std::string& key, GgufValue value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> dims, DType dtype,
                           std::vector<uint8_t> data) {
  const uint64_t n = TensorBytes(dims, dtype);
  GOOSE_CHECK(data.size() == n);
  tensors_.push_back(Tensor{name, std::move(dims), dtype, std::move(data), nullptr, n});
}

void GgufWriter::AddTensorLazy(const std::string& name, std::vector<int64_t> dims, DType dtype,
                               Producer produce) {
  const uint64_t n = TensorBytes(dims, dtype);
  tensors_.push_back(Tensor{name, std::move(dims), dtype, {}, std::move(produce), n});
}

uint64_t GgufWriter::Alignment() const {
  for (const auto& kv : kv_) {
    if (kv.first == "general.alignment" && kv.second.AsInt() > 0) {
      return static_cast<uint64_t>(kv.second.AsInt());
    }
  }
  return 32;
}

std::string GgufWriter::SerializeHeader() const {
  const uint64_t align = Alignment();
  std::string out;
  out.append("GGUF", 4);
  Put<uint32_t>(&out, 3);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, kv_.size());
  for (const auto& [key, value] : kv_) {
    PutString(&out, key);
    Put<uint32_t>(&out, static_cast<uint32_t>(value.type));
    PutValue(&out, value.type, value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(&out, static_cast<uint64_t>(d));
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dtype));
    Put<uint64_t>(&out, offset);
    offset = AlignUp(offset + t.n_bytes, align);
  }
  out.resize(AlignUp(out.size(), align), '\0');
  return out;
}

void GgufWriter::Emit(const std::function<void(const void*, size_t)>& sink) const {
  const uint64_t align = Alignment();
  const std::string header = SerializeHeader();
  sink(header.data(), header.size());
  static const char kZeros[256] = {};
  std::vector<uint8_t> buf;
  for (const Tensor& t : tensors_) {
    if (t.produce) {
      buf.assign(t.n_bytes, 0);
      t.produce(buf.data());
      sink(buf.data(), buf.size());
      std::vector<uint8_t>().swap(buf);  // free before the next tensor
    } else {
      sink(t.data.data(), t.data.size());
    }
    uint64_t pad = AlignUp(t.n_bytes, align) - t.n_bytes;
    while (pad > 0) {
      const size_t n = pad < sizeof(kZeros) ? pad : sizeof(kZeros);
      sink(kZeros, n);
      pad -= n;
    }
  }
}

std::string GgufWriter::Serialize() const {
  std::string out;
  Emit([&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); });
  return out;
}

Status GgufWriter::Write(const std::string& path) const {
  // Written next to the target and renamed over it, so a failed write never leaves a partial
  // file under `path`.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    return Status::Error(StrFormat("%s: cannot create: %s", path.c_str(), std::strerror(errno)));
  }
  bool ok = true;
  int err = 0;
  Emit([&](const void* p, size_t n) {
    if (ok && n > 0 && std::fwrite(p, 1, n, f) != n) {
      ok = false;
      err = errno;
    }
  });
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return Status::Error(StrFormat("%s: write failed: %s", path.c_str(), std::strerror(err)));
  }
  return Status::Ok();
}

}  // namespace goose
