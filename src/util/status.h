// Status / StatusOr: how every boundary in goose reports failure (GGUF parsing, tokenizer and
// model loading, CLI and data parsing). Messages name the file, the key/tensor and the byte
// offset where that makes sense. Inside the engine, invariants use GOOSE_CHECK (check.h) instead.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace goose {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  const std::string& message() const {
    static const std::string kOk = "OK";
    return message_ ? *message_ : kOk;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}         // NOLINT: implicit like absl::StatusOr
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT; must not be OK

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> v_;
};

// Formats like printf into a std::string (for error messages).
std::string StrFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace goose

#define GOOSE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::goose::Status goose_status_ = (expr);        \
    if (!goose_status_.ok()) return goose_status_; \
  } while (0)

#define GOOSE_CONCAT_INNER_(a, b) a##b
#define GOOSE_CONCAT_(a, b) GOOSE_CONCAT_INNER_(a, b)
#define GOOSE_ASSIGN_OR_RETURN(lhs, expr) \
  GOOSE_ASSIGN_OR_RETURN_IMPL_(GOOSE_CONCAT_(goose_statusor_, __LINE__), lhs, expr)
#define GOOSE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
