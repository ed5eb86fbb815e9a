// Fuzz target chat_template: a GGUF's tokenizer.chat_template (or a --chat-template name) and
// arbitrary messages through DetectChatTemplate and RenderChat (server/chat_template.h), as goose
// serve uses them for a chat request.
//
// Input: the template text, then messages, each after a 0x1E byte, written "role 0x1F content"
// (a message without 0x1F is a user message). The text is also tried as a family name.
// Properties besides "no crash, leak, hang, UB":
// - a name ChatFamilyByName accepts is the family's ChatFamilyName;
// - a recognised template's ChatML default system text holds no <|im_end|>, and other families
//   have none;
// - with every family (and the recognised template): no messages or an unknown role is an
//   error that is one clean line; otherwise the prompt holds every message's content (stripped
//   where the family strips it) and, for the families that end with one, the assistant's
//   generation prompt.
// run-fuzz flags: -max_len=4096
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "server/chat_template.h"

namespace goose::fuzz {
namespace {

using server::ChatFamily;
using server::ChatMessage;
using server::ChatTemplate;

std::string Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(kSpace) - b + 1));
}

bool EndsWith(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

// The generation prompt a family's render ends with ("" for llama2 / mistral, which end with
// the last turn).
std::string_view GenerationPrompt(ChatFamily f) {
  switch (f) {
    case ChatFamily::kChatMl:
      return "<|im_start|>assistant\n";
    case ChatFamily::kLlama3:
      return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFamily::kGemma:
      return "<start_of_turn>model\n";
    case ChatFamily::kPhi3:
      return "<|assistant|>\n";
    default:
      return "";
  }
}

void CheckRender(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  bool valid = !messages.empty();
  for (const ChatMessage& m : messages) {
    valid &=
        m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "developer";
  }
  const auto out = server::RenderChat(t, messages);
  const char* name = server::ChatFamilyName(t.family);
  if (!out.ok()) {
    FUZZ_CHECK(!valid, "%s refused a valid chat: %s", name, out.status().message().c_str());
    FUZZ_CHECK(IsOneCleanLine(out.status().message()), "error is not one clean line: %s",
               out.status().message().c_str());
    return;
  }
  FUZZ_CHECK(valid, "%s rendered an invalid chat", name);
  const std::string& text = *out;
  for (size_t i = 0; i < messages.size(); ++i) {
    FUZZ_CHECK(text.find(Trim(messages[i].content)) != std::string::npos,
               "%s lost the content of message %zu", name, i);
  }
  FUZZ_CHECK(EndsWith(text, GenerationPrompt(t.family)), "%s: no generation prompt at the end",
             name);
}

}  // namespace
}  // namespace goose::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goose;
  using namespace goose::fuzz;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t first = in.find('\x1e');
  const std::string_view jinja = in.substr(0, first);
  std::vector<server::ChatMessage> messages;
  for (size_t at = first; at != std::string_view::npos;) {
    const size_t next = in.find('\x1e', at + 1);
    const std::string_view m =
        in.substr(at + 1, next == std::string_view::npos ? next : next - at - 1);
    const size_t sep = m.find('\x1f');
    if (sep == std::string_view::npos) {
      messages.push_back({"user", std::string(m)});
    } else {
      messages.push_back({std::string(m.substr(0, sep)), std::string(m.substr(sep + 1))});
    }
    at = next;
  }

  if (const auto f = server::ChatFamilyByName(jinja)) {
    FUZZ_CHECK(server::ChatFamilyName(*f) == jinja, "name round trip");
  }
  const auto detected = server::DetectChatTemplate(jinja);
  if (detected) {
    if (detected->family == server::ChatFamily::kChatMl) {
      FUZZ_CHECK(detected->default_system.find("<|im_end|>") == std::string::npos,
                 "default system text runs past its turn");
    } else {
      FUZZ_CHECK(detected->default_system.empty(), "default system text outside ChatML");
    }
    CheckRender(*detected, messages);
  }
  for (const char* name : {"chatml", "llama3", "llama2", "mistral", "gemma", "phi3"}) {
    server::ChatTemplate t;
    t.family = *server::ChatFamilyByName(name);
    CheckRender(t, messages);
  }
  return 0;
}
