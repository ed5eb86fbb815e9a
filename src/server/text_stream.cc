#include "server/text_stream.h"

#include <algorithm>

#include "server/utf8.h"

namespace goose::server {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop)
    : decoder_(tok), stop_(std::move(stop)) {
  stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
}

std::string TextStream::Push(int32_t token) {
  if (stopped_) return "";
  text_ += decoder_.Push(token);
  return Release(/*at_end=*/false);
}

std::string TextStream::Finish() {
  if (stopped_) return "";
  text_ += decoder_.Flush();
  return Release(/*at_end=*/true);
}

std::string TextStream::Release(bool at_end) {
  // The stop occurrence that ends first. text_ holds no complete occurrence from earlier calls
  // (it would have stopped), so any occurrence found here ends in the newest bytes.
  size_t best_end = std::string::npos, best_start = 0;
  for (const std::string& s : stop_) {
    const size_t at = text_.find(s);
    if (at == std::string::npos) continue;
    const size_t end = at + s.size();
    if (end < best_end || (end == best_end && at < best_start)) {
      best_end = end;
      best_start = at;
      stop_string_ = s;
    }
  }
  std::string out;
  if (best_end != std::string::npos) {
    stopped_ = true;
    out = ToValidUtf8(std::string_view(text_).substr(0, best_start));
    text_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of a stop string.
  size_t hold = 0;
  if (!at_end) {
    for (const std::string& s : stop_) {
      for (size_t len = std::min(s.size() - 1, text_.size()); len > hold; --len) {
        if (text_.compare(text_.size() - len, len, s, 0, len) == 0) {
          hold = len;
          break;
        }
      }
    }
  }
  const size_t n = text_.size() - hold;
  out = ToValidUtf8(std::string_view(text_).substr(0, n));
  text_.erase(0, n);
  return out;
}

}  // namespace goose::server
