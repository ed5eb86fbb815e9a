#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/check.h"
#include "util/escape.h"

namespace goose {

namespace {

constexpr int kMaxArrayDepth = 16;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// Bytes a value of type `t` needs at the very least; lets us reject absurd counts before
// allocating anything. 0 for unknown types.
uint64_t MinValueBytes(uint32_t t) {
  switch (static_cast<GgufType>(t)) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
    case GgufType::kString:  // the u64 length
      return 8;
    case GgufType::kArray:  // elem type + count
      return 12;
  }
  return 0;
}

// Bounds-checked little-endian reader over the mapping. Every failure message carries the file
// name, the offset and the current context ("key 'x'", "tensor 'y'", ...).
class Cursor {
 public:
  // `budget`: bytes of memory the parsed values may take (see Charge).
  Cursor(const uint8_t* base, uint64_t size, const std::string& file, uint64_t budget)
      : base_(base), size_(size), file_(file), budget_(budget), budget_total_(budget) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  void set_context(std::string ctx) { ctx_ = std::move(ctx); }

  Status Error(const std::string& what, uint64_t at) const {
    std::string msg = StrFormat("%s: %s at offset %llu", file_.c_str(), what.c_str(),
                                static_cast<unsigned long long>(at));
    if (!ctx_.empty()) msg += " (" + ctx_ + ")";
    return Status::Error(std::move(msg));
  }

  Status Need(uint64_t n, const char* what) const {
    if (n > left()) {
      return Error(
          StrFormat("truncated: %s needs %llu bytes but only %llu are left", what,
                    static_cast<unsigned long long>(n), static_cast<unsigned long long>(left())),
          pos_);
    }
    return Status::Ok();
  }

  template <typename T>
  Status Read(T* out, const char* what) {
    GOOSE_RETURN_IF_ERROR(Need(sizeof(T), what));
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string* out, const char* what) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    GOOSE_RETURN_IF_ERROR(Read(&len, what));
    if (len > left()) {
      return Error(
          StrFormat("%s length %llu exceeds the %llu bytes left", what,
                    static_cast<unsigned long long>(len), static_cast<unsigned long long>(left())),
          at);
    }
    out->assign(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

  // Accounts for `bytes` of memory about to be allocated for parsed values; an error once the
  // total passes the budget, so a malformed file can never make Parse allocate much more than
  // the file's own size.
  Status Charge(uint64_t bytes, uint64_t at) {
    if (bytes > budget_) {
      return Error(StrFormat("metadata and tensor directory would need more than %llu bytes of "
                             "memory (%llux the file size + 1 MiB)",
                             static_cast<unsigned long long>(budget_total_),
                             static_cast<unsigned long long>(GgufFile::kMaxMetadataExpansion)),
                   at);
    }
    budget_ -= bytes;
    return Status::Ok();
  }

  Status ReadValue(uint32_t type, int depth, GgufValue* v);

 private:
  Status ReadArray(int depth, GgufValue* v);

  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& file_;
  std::string ctx_;
  uint64_t budget_;
  uint64_t budget_total_;
};

Status Cursor::ReadValue(uint32_t type, int depth, GgufValue* v) {
  v->type = static_cast<GgufType>(type);
  switch (v->type) {
    case GgufType::kUint8: {
      uint8_t x;
      GOOSE_RETURN_IF_ERROR(Read(&x, "uint8 value"));
      v->u = x;
      return Status::Ok();
    }
    case GgufType::kInt8: {
      int8_t x;
      GOOSE_RETURN_IF_ERROR(Read(&x, "int8 value"));
      v->i = x;
      return Status::Ok();
    }
    case GgufType::kUint16: {
      uint16_t x;
      GOOSE_RETURN_IF_ERROR(Read(&x, "uint16 value"));
      v->u = x;
      return Status::Ok();
    }
    case GgufType::kInt16: {
      int16_t x;
      GOOSE_RETURN_IF_ERROR(Read(&x, "int16 value"));
      v->i = x;
      return Status::Ok();
    }
    case GgufType::kUint32: {
      uint32_t x;
      GOOSE_RETURN_IF_ERROR(Read(&x, "uint32 value"));
      v->u = x;
      return Status::Ok();
    }
    case GgufType::kInt32: {
      int32_t x;
      GOOSE_RETURN_IF_ERROR(Read(&x, "int32 value"));
      v->i = x;
      return Status::Ok();
    }
    case GgufType::kFloat32: {
      float x;
      GOOSE_RETURN_IF_ERROR(Read(&x, "float32 value"));
      v->f = x;
      return Status::Ok();
    }
    case GgufType::kBool: {
      const uint64_t at = pos_;
      uint8_t x;
      GOOSE_RETURN_IF_ERROR(Read(&x, "bool value"));
      if (x > 1) return Error(StrFormat("bool value %u is neither 0 nor 1", x), at);
      v->u = x;
      return Status::Ok();
    }
    case GgufType::kString:
      return ReadString(&v->str, "string");
    case GgufType::kUint64:
      return Read(&v->u, "uint64 value");
    case GgufType::kInt64:
      return Read(&v->i, "int64 value");
    case GgufType::kFloat64:
      return Read(&v->f, "float64 value");
    case GgufType::kArray:
      return ReadArray(depth, v);
  }
  return Error(StrFormat("unknown value type %u", type), pos_ - 4);
}

Status Cursor::ReadArray(int depth, GgufValue* v) {
  const uint64_t at = pos_;
  if (depth >= kMaxArrayDepth) {
    return Error(StrFormat("arrays nested deeper than %d", kMaxArrayDepth), at);
  }
  uint32_t elem = 0;
  GOOSE_RETURN_IF_ERROR(Read(&elem, "array element type"));
  const uint64_t min_bytes = MinValueBytes(elem);
  if (min_bytes == 0) return Error(StrFormat("unknown array element type %u", elem), at);
  v->elem_type = static_cast<GgufType>(elem);
  uint64_t count = 0;
  const uint64_t count_at = pos_;
  GOOSE_RETURN_IF_ERROR(Read(&count, "array count"));
  if (count > left() / min_bytes) {
    return Error(StrFormat("array count %llu of %s cannot fit in the %llu bytes left",
                           static_cast<unsigned long long>(count),
                           std::string(GgufTypeName(v->elem_type)).c_str(),
                           static_cast<unsigned long long>(left())),
                 count_at);
  }
  if (const size_t elem_bytes = GgufScalarBytes(v->elem_type)) {  // packed as in the file
    const uint64_t n_bytes = count * elem_bytes;                  // <= left(): no overflow
    GOOSE_RETURN_IF_ERROR(Charge(n_bytes, count_at));
    v->packed.assign(base_ + pos_, base_ + pos_ + n_bytes);
    if (v->elem_type == GgufType::kBool) {
      for (uint64_t k = 0; k < count; ++k) {
        if (v->packed[k] > 1) {
          return Error(StrFormat("bool element %llu is %u, neither 0 nor 1",
                                 static_cast<unsigned long long>(k), v->packed[k]),
                       pos_ + k);
        }
      }
    }
    pos_ += n_bytes;
    return Status::Ok();
  }
  if (v->elem_type == GgufType::kString) {
    GOOSE_RETURN_IF_ERROR(Charge(count * sizeof(std::string), count_at));
    v->strings.resize(count);
    for (std::string& s : v->strings) {
      const uint64_t s_at = pos_;
      GOOSE_RETURN_IF_ERROR(ReadString(&s, "string"));
      GOOSE_RETURN_IF_ERROR(Charge(s.size(), s_at));
    }
    return Status::Ok();
  }
  GOOSE_RETURN_IF_ERROR(Charge(count * sizeof(GgufValue), count_at));
  v->arrays.resize(count);
  for (GgufValue& e : v->arrays) {
    e.type = GgufType::kArray;
    GOOSE_RETURN_IF_ERROR(ReadArray(depth + 1, &e));
  }
  return Status::Ok();
}

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

// ---- GgufValue ----

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

static bool IsUnsigned(GgufType t) {
  return t == GgufType::kUint8 || t == GgufType::kUint16 || t == GgufType::kUint32 ||
         t == GgufType::kUint64 || t == GgufType::kBool;
}

int64_t GgufValue::AsInt() const {
  if (IsUnsigned(type)) return static_cast<int64_t>(u);
  if (is_integer()) return i;
  if (is_float()) {
    // A float from a file may be anything; converting one outside int64's range is UB.
    if (std::isnan(f)) return 0;
    if (f >= 0x1p63) return std::numeric_limits<int64_t>::max();
    if (f < -0x1p63) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(f);
  }
  return 0;
}

double GgufValue::AsDouble() const {
  if (is_float()) return f;
  if (IsUnsigned(type)) return static_cast<double>(u);
  if (is_integer()) return static_cast<double>(i);
  return 0;
}

GgufValue GgufValue::U32(uint32_t v) {
  GgufValue x;
  x.type = GgufType::kUint32;
  x.u = v;
  return x;
}
GgufValue GgufValue::I32(int32_t v) {
  GgufValue x;
  x.type = GgufType::kInt32;
  x.i = v;
  return x;
}
GgufValue GgufValue::U64(uint64_t v) {
  GgufValue x;
  x.type = GgufType::kUint64;
  x.u = v;
  return x;
}
GgufValue GgufValue::F32(float v) {
  GgufValue x;
  x.type = GgufType::kFloat32;
  x.f = v;
  return x;
}
GgufValue GgufValue::Bool(bool v) {
  GgufValue x;
  x.type = GgufType::kBool;
  x.u = v ? 1 : 0;
  return x;
}
GgufValue GgufValue::String(std::string v) {
  GgufValue x;
  x.type = GgufType::kString;
  x.str = std::move(v);
  return x;
}
size_t GgufScalarBytes(GgufType t) {
  switch (t) {
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
    default:
      return static_cast<size_t>(MinValueBytes(static_cast<uint32_t>(t)));
  }
}

size_t GgufValue::size() const {
  if (type != GgufType::kArray) return 0;
  if (elem_type == GgufType::kString) return strings.size();
  if (elem_type == GgufType::kArray) return arrays.size();
  const size_t elem_bytes = GgufScalarBytes(elem_type);
  return elem_bytes ? packed.size() / elem_bytes : 0;
}

namespace {

template <typename T>
T Unpack(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void Pack(std::vector<uint8_t>* out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof(T));
}

}  // namespace

GgufValue GgufValue::At(size_t idx) const {
  GOOSE_CHECK(type == GgufType::kArray && elem_type != GgufType::kArray && idx < size());
  GgufValue x;
  x.type = elem_type;
  if (elem_type == GgufType::kString) {
    x.str = strings[idx];
    return x;
  }
  const uint8_t* p = packed.data() + idx * GgufScalarBytes(elem_type);
  switch (elem_type) {
    case GgufType::kUint8:
      x.u = Unpack<uint8_t>(p);
      break;
    case GgufType::kInt8:
      x.i = Unpack<int8_t>(p);
      break;
    case GgufType::kUint16:
      x.u = Unpack<uint16_t>(p);
      break;
    case GgufType::kInt16:
      x.i = Unpack<int16_t>(p);
      break;
    case GgufType::kUint32:
      x.u = Unpack<uint32_t>(p);
      break;
    case GgufType::kInt32:
      x.i = Unpack<int32_t>(p);
      break;
    case GgufType::kFloat32:
      x.f = Unpack<float>(p);
      break;
    case GgufType::kBool:
      x.u = Unpack<uint8_t>(p);
      break;
    case GgufType::kUint64:
      x.u = Unpack<uint64_t>(p);
      break;
    case GgufType::kInt64:
      x.i = Unpack<int64_t>(p);
      break;
    case GgufType::kFloat64:
      x.f = Unpack<double>(p);
      break;
    case GgufType::kString:
    case GgufType::kArray:
      break;
  }
  return x;
}

void GgufValue::Append(const GgufValue& e) {
  GOOSE_CHECK(type == GgufType::kArray);
  const int64_t n = e.AsInt();  // unsigned values wrap back below
  switch (elem_type) {
    case GgufType::kUint8:
      Pack<uint8_t>(&packed, static_cast<uint8_t>(n));
      break;
    case GgufType::kInt8:
      Pack<int8_t>(&packed, static_cast<int8_t>(n));
      break;
    case GgufType::kUint16:
      Pack<uint16_t>(&packed, static_cast<uint16_t>(n));
      break;
    case GgufType::kInt16:
      Pack<int16_t>(&packed, static_cast<int16_t>(n));
      break;
    case GgufType::kUint32:
      Pack<uint32_t>(&packed, static_cast<uint32_t>(n));
      break;
    case GgufType::kInt32:
      Pack<int32_t>(&packed, static_cast<int32_t>(n));
      break;
    case GgufType::kFloat32:
      Pack<float>(&packed, static_cast<float>(e.AsDouble()));
      break;
    case GgufType::kBool:
      Pack<uint8_t>(&packed, n != 0 ? 1 : 0);
      break;
    case GgufType::kUint64:
      Pack<uint64_t>(&packed, static_cast<uint64_t>(n));
      break;
    case GgufType::kInt64:
      Pack<int64_t>(&packed, n);
      break;
    case GgufType::kFloat64:
      Pack<double>(&packed, e.AsDouble());
      break;
    case GgufType::kString:
      strings.push_back(e.str);
      break;
    case GgufType::kArray:
      arrays.push_back(e);
      break;
  }
}

GgufValue GgufValue::Array(GgufType elem_type, const std::vector<GgufValue>& elems) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.elem_type = elem_type;
  for (const GgufValue& e : elems) x.Append(e);
  return x;
}
GgufValue GgufValue::StringArray(std::vector<std::string> v) {
  GgufValue x = Array(GgufType::kString, {});
  x.strings = std::move(v);
  return x;
}
GgufValue GgufValue::F32Array(const std::vector<float>& v) {
  GgufValue x = Array(GgufType::kFloat32, {});
  for (float f : v) Pack<float>(&x.packed, f);
  return x;
}
GgufValue GgufValue::I32Array(const std::vector<int32_t>& v) {
  GgufValue x = Array(GgufType::kInt32, {});
  for (int32_t i : v) Pack<int32_t>(&x.packed, i);
  return x;
}

std::string_view GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "unknown";
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---- GgufFile ----

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::Error(StrFormat("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Error(StrFormat("%s: cannot stat: %s", path.c_str(), std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(StrFormat("%s: not a regular file", path.c_str()));
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status::Error(StrFormat("%s: mmap failed: %s", path.c_str(), std::strerror(err)));
    }
    f->base_ = static_cast<const uint8_t*>(p);
    f->mmapped_ = true;
  }
  ::close(fd);  // the mapping keeps the file alive
  GOOSE_RETURN_IF_ERROR(f->Parse());
  return f;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::string_view bytes,
                                                        const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->owned_.assign(bytes.data(), bytes.size());
  f->base_ = reinterpret_cast<const uint8_t*>(f->owned_.data());
  f->size_ = f->owned_.size();
  GOOSE_RETURN_IF_ERROR(f->Parse());
  return f;
}

void GgufFile::ReleasePages(const uint8_t* p, uint64_t n) const {
  if (!mmapped_ || p < base_ || p + n > base_ + size_) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

GgufFile::~GgufFile() {
  if (mmapped_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

Status GgufFile::Parse() {
  Cursor c(base_, size_, path_, kMaxMetadataExpansion * size_ + (1u << 20));

  // Header.
  if (size_ < 4 || std::memcmp(base_, "GGUF", 4) != 0) {
    return c.Error(size_ < 4 ? "file too short for the GGUF magic" : "bad magic (not a GGUF file)",
                   0);
  }
  uint32_t magic;
  GOOSE_RETURN_IF_ERROR(c.Read(&magic, "magic"));
  const uint64_t version_at = c.pos();
  GOOSE_RETURN_IF_ERROR(c.Read(&version_, "version"));
  if (version_ == 1) {
    return c.Error("GGUF version 1 is not supported (only v2 and v3)", version_at);
  }
  if (version_ != 2 && version_ != 3) {
    return c.Error(StrFormat("unsupported GGUF version %u (only v2 and v3)", version_), version_at);
  }
  uint64_t n_tensors = 0, n_kv = 0;
  const uint64_t n_tensors_at = c.pos();
  GOOSE_RETURN_IF_ERROR(c.Read(&n_tensors, "tensor count"));
  const uint64_t n_kv_at = c.pos();
  GOOSE_RETURN_IF_ERROR(c.Read(&n_kv, "metadata count"));
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor entry at least
  // 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset).
  if (n_kv > c.left() / 13) {
    return c.Error(
        StrFormat("metadata count %llu cannot fit in the %llu bytes left",
                  static_cast<unsigned long long>(n_kv), static_cast<unsigned long long>(c.left())),
        n_kv_at);
  }
  if (n_tensors > c.left() / 32) {
    return c.Error(StrFormat("tensor count %llu cannot fit in the %llu bytes left",
                             static_cast<unsigned long long>(n_tensors),
                             static_cast<unsigned long long>(c.left())),
                   n_tensors_at);
  }

  // Memory per key-value pair and per tensor besides their strings and arrays: the entry, and
  // the index's copy of the name in a hash node.
  constexpr uint64_t kIndexEntryBytes = sizeof(std::string) + 32;
  constexpr uint64_t kKvBytes = sizeof(std::pair<std::string, GgufValue>) + kIndexEntryBytes;
  constexpr uint64_t kTensorBytes = sizeof(GgufTensorInfo) + kIndexEntryBytes;
  GOOSE_RETURN_IF_ERROR(c.Charge(n_kv * kKvBytes + n_tensors * kTensorBytes, n_tensors_at));

  // Metadata.
  kv_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    c.set_context(StrFormat("key #%llu", static_cast<unsigned long long>(k)));
    const uint64_t key_at = c.pos();
    std::string key;
    GOOSE_RETURN_IF_ERROR(c.ReadString(&key, "key"));
    c.set_context(StrFormat("key #%llu '%s'", static_cast<unsigned long long>(k),
                            EscapeForMessage(key).c_str()));
    if (kv_index_.count(key)) {
      return c.Error("duplicate key '" + EscapeForMessage(key) + "'", key_at);
    }
    GOOSE_RETURN_IF_ERROR(c.Charge(2 * key.size(), key_at));
    const uint64_t type_at = c.pos();
    uint32_t type = 0;
    GOOSE_RETURN_IF_ERROR(c.Read(&type, "value type"));
    if (MinValueBytes(type) == 0) return c.Error(StrFormat("unknown value type %u", type), type_at);
    GgufValue v;
    GOOSE_RETURN_IF_ERROR(c.ReadValue(type, 0, &v));
    GOOSE_RETURN_IF_ERROR(c.Charge(v.str.size(), type_at));
    if (key == "general.alignment") {
      if (!v.is_integer()) {
        return c.Error(
            "general.alignment must be an integer, not " + std::string(GgufTypeName(v.type)),
            type_at);
      }
      if (v.AsInt() <= 0 || !IsPowerOfTwo(static_cast<uint64_t>(v.AsInt()))) {
        return c.Error(StrFormat("general.alignment %lld is not a power of two",
                                 static_cast<long long>(v.AsInt())),
                       type_at);
      }
      alignment_ = static_cast<uint64_t>(v.AsInt());
    }
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  // Tensor directory.
  tensors_.reserve(n_tensors);
  for (uint64_t t = 0; t < n_tensors; ++t) {
    c.set_context(StrFormat("tensor #%llu", static_cast<unsigned long long>(t)));
    const uint64_t name_at = c.pos();
    GgufTensorInfo info;
    GOOSE_RETURN_IF_ERROR(c.ReadString(&info.name, "tensor name"));
    c.set_context(StrFormat("tensor #%llu '%s'", static_cast<unsigned long long>(t),
                            EscapeForMessage(info.name).c_str()));
    if (tensor_index_.count(info.name)) {
      return c.Error("duplicate tensor name '" + EscapeForMessage(info.name) + "'", name_at);
    }
    GOOSE_RETURN_IF_ERROR(c.Charge(2 * info.name.size() + kMaxDims * sizeof(int64_t), name_at));
    const uint64_t ndims_at = c.pos();
    uint32_t n_dims = 0;
    GOOSE_RETURN_IF_ERROR(c.Read(&n_dims, "n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return c.Error(StrFormat("n_dims %u is not in 1..%u", n_dims, kMaxDims), ndims_at);
    }
    int64_t n_elem = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = c.pos();
      uint64_t ne = 0;
      GOOSE_RETURN_IF_ERROR(c.Read(&ne, "dimension"));
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return c.Error(
            StrFormat("dimension %u is %lld (must be > 0)", d, static_cast<long long>(ne)), dim_at);
      }
      if (static_cast<int64_t>(ne) > std::numeric_limits<int64_t>::max() / n_elem) {
        return c.Error("element count overflows int64", dim_at);
      }
      n_elem *= static_cast<int64_t>(ne);
      info.dims.push_back(static_cast<int64_t>(ne));
    }
    const uint64_t type_at = c.pos();
    uint32_t type_id = 0;
    GOOSE_RETURN_IF_ERROR(c.Read(&type_id, "tensor type"));
    const DTypeInfo dt = GetDTypeInfo(type_id);
    if (dt.block_size == 0) return c.Error(StrFormat("unknown tensor type %u", type_id), type_at);
    info.dtype = static_cast<DType>(type_id);
    if (info.dims[0] % dt.block_size != 0) {
      return c.Error(StrFormat("ne[0] = %lld is not a multiple of the %s block size %lld",
                               static_cast<long long>(info.dims[0]), std::string(dt.name).c_str(),
                               static_cast<long long>(dt.block_size)),
                     type_at);
    }
    // n_bytes = blocks * block_bytes, checked against overflow.
    const uint64_t blocks = static_cast<uint64_t>(n_elem / dt.block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dt.block_bytes)) {
      return c.Error("tensor byte size overflows", type_at);
    }
    info.n_bytes = blocks * static_cast<uint64_t>(dt.block_bytes);
    const uint64_t offset_at = c.pos();
    GOOSE_RETURN_IF_ERROR(c.Read(&info.offset, "tensor offset"));
    if (info.offset % alignment_ != 0) {
      return c.Error(StrFormat("tensor offset %llu is not a multiple of the alignment %llu",
                               static_cast<unsigned long long>(info.offset),
                               static_cast<unsigned long long>(alignment_)),
                     offset_at);
    }
    tensor_index_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }
  c.set_context("");

  // Data section: starts at the first aligned offset after the directory.
  const uint64_t dir_end = c.pos();
  const uint64_t data_start = (dir_end + alignment_ - 1) / alignment_ * alignment_;
  if (data_start < dir_end) return c.Error("data section offset overflows", dir_end);
  data_offset_ = data_start;
  for (GgufTensorInfo& info : tensors_) {
    const uint64_t avail = data_start <= size_ ? size_ - data_start : 0;
    if (data_start > size_ || info.offset > avail || info.n_bytes > avail - info.offset) {
      return Status::Error(StrFormat(
          "%s: tensor '%s' data [%llu, %llu) relative to the data section at offset %llu runs "
          "past the end of the file (%llu bytes)",
          path_.c_str(), EscapeForMessage(info.name).c_str(),
          static_cast<unsigned long long>(info.offset),
          static_cast<unsigned long long>(info.offset + info.n_bytes),
          static_cast<unsigned long long>(data_start), static_cast<unsigned long long>(size_)));
    }
    info.data = base_ + data_start + info.offset;
  }
  return Status::Ok();
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v || !(v->is_integer() || v->type == GgufType::kBool)) return std::nullopt;
  return v->AsInt();
}

std::optional<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v || !(v->is_integer() || v->is_float())) return std::nullopt;
  return v->AsDouble();
}

std::optional<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v || v->type != GgufType::kString) return std::nullopt;
  return v->str;
}

const GgufValue* GgufFile::GetArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v != nullptr && v->type == GgufType::kArray ? v : nullptr;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace goose
