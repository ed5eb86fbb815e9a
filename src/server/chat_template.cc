#include "server/chat_template.h"

#include <array>
#include <utility>
#include <vector>

#include "util/escape.h"

namespace goose::server {

namespace {

constexpr std::array<std::pair<ChatFamily, const char*>, 6> kFamilies = {{
    {ChatFamily::kChatMl, "chatml"},
    {ChatFamily::kLlama3, "llama3"},
    {ChatFamily::kLlama2, "llama2"},
    {ChatFamily::kMistral, "mistral"},
    {ChatFamily::kGemma, "gemma"},
    {ChatFamily::kPhi3, "phi3"},
}};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Jinja's `trim` and Python's str.strip() on ASCII whitespace.
std::string Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(kSpace);
  return std::string(s.substr(b, e - b + 1));
}

// The literal system text a ChatML template writes when the conversation has none: the first
// '<|im_start|>system' + newline followed by plain text (no quote, brace or '+', so not an
// expression) up to '<|im_end|>'. The newline may be written as the escape \n (Jinja source) or
// as a real one.
std::string ChatMlDefaultSystem(std::string_view jinja) {
  constexpr std::string_view kHead = "<|im_start|>system";
  constexpr std::string_view kEnd = "<|im_end|>";
  for (size_t at = jinja.find(kHead); at != std::string_view::npos;
       at = jinja.find(kHead, at + 1)) {
    size_t p = at + kHead.size();
    if (jinja.substr(p, 2) == "\\n") {
      p += 2;
    } else if (jinja.substr(p, 1) == "\n") {
      p += 1;
    } else {
      continue;
    }
    const size_t end = jinja.find(kEnd, p);
    if (end == std::string_view::npos) break;
    const std::string_view text = jinja.substr(p, end - p);
    if (text.empty() || text.find_first_of("'\"{}+") != std::string_view::npos) continue;
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
        out += '\n';
        ++i;
      } else {
        out += text[i];
      }
    }
    return out;
  }
  return "";
}

// System text for the families without a system turn: every system message's content, joined
// in front of the next user message.
struct Turn {
  std::string role;  // "user" or "assistant"
  std::string content;
};

std::vector<Turn> FoldSystemIntoUser(std::span<const ChatMessage> messages,
                                     std::string_view separator) {
  std::vector<Turn> turns;
  std::string pending_system;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      pending_system += pending_system.empty() ? m.content : "\n" + m.content;
      continue;
    }
    Turn t{m.role, m.content};
    if (m.role == "user" && !pending_system.empty()) {
      t.content = pending_system + std::string(separator) + m.content;
      pending_system.clear();
    }
    turns.push_back(std::move(t));
  }
  // A system message after the last user turn still reaches the model as a user turn.
  if (!pending_system.empty()) turns.push_back({"user", pending_system});
  return turns;
}

std::string RenderChatMl(const ChatTemplate& t, std::span<const ChatMessage> messages) {
  std::string out;
  if (!t.default_system.empty() && messages[0].role != "system") {
    out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  return out + "<|im_start|>assistant\n";
}

std::string RenderLlama3(std::span<const ChatMessage> messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out +=
        "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + Trim(m.content) + "<|eot_id|>";
  }
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// Meta's Llama-2-chat template: a leading system message goes into the first turn inside
// <<SYS>>; user turns are BOS [INST] text [/INST], assistant turns ' text ' EOS, both stripped.
std::string RenderLlama2(const ChatTemplate& t, std::span<const ChatMessage> messages) {
  std::span<const ChatMessage> loop = messages;
  std::string system;
  bool has_system = false;
  if (messages[0].role == "system") {
    system = messages[0].content;
    has_system = true;
    loop = messages.subspan(1);
  }
  std::vector<ChatMessage> rest(loop.begin(), loop.end());
  std::string out;
  for (size_t i = 0; i < rest.size(); ++i) {
    std::string content = rest[i].content;
    if (i == 0 && has_system) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (rest[i].role == "assistant") {
      out += " " + Trim(content) + " " + t.eos_text;
    } else {  // user, and later system messages, which the template has no turn for
      if (!out.empty()) out += t.bos_text;
      out += "[INST] " + Trim(content) + " [/INST]";
    }
  }
  if (rest.empty() && has_system) out = "[INST] <<SYS>>\n" + system + "\n<</SYS>>\n\n [/INST]";
  return out;
}

std::string RenderMistral(const ChatTemplate& t, std::span<const ChatMessage> messages) {
  std::string out;
  for (const Turn& turn : FoldSystemIntoUser(messages, "\n")) {
    if (turn.role == "user") {
      out += "[INST] " + turn.content + " [/INST]";
    } else {
      out += turn.content + t.eos_text;
    }
  }
  return out;
}

std::string RenderGemma(std::span<const ChatMessage> messages) {
  std::string out;
  for (const Turn& turn : FoldSystemIntoUser(messages, "\n\n")) {
    const char* role = turn.role == "assistant" ? "model" : "user";
    out += std::string("<start_of_turn>") + role + "\n" + Trim(turn.content) + "<end_of_turn>\n";
  }
  return out + "<start_of_turn>model\n";
}

std::string RenderPhi3(std::span<const ChatMessage> messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  return out + "<|assistant|>\n";
}

}  // namespace

const char* ChatFamilyName(ChatFamily family) {
  for (const auto& [f, name] : kFamilies) {
    if (f == family) return name;
  }
  return "?";
}

std::string ChatFamilyNames() {
  std::string out;
  for (const auto& [f, name] : kFamilies) out += out.empty() ? name : std::string(", ") + name;
  return out;
}

std::optional<ChatFamily> ChatFamilyByName(std::string_view name) {
  for (const auto& [f, n] : kFamilies) {
    if (name == n) return f;
  }
  return std::nullopt;
}

std::optional<ChatTemplate> DetectChatTemplate(std::string_view jinja) {
  ChatTemplate t;
  if (Contains(jinja, "<|start_header_id|>") && Contains(jinja, "<|end_header_id|>")) {
    t.family = ChatFamily::kLlama3;
  } else if (Contains(jinja, "<|im_start|>")) {
    t.family = ChatFamily::kChatMl;
    t.default_system = ChatMlDefaultSystem(jinja);
  } else if (Contains(jinja, "<start_of_turn>")) {
    t.family = ChatFamily::kGemma;
  } else if (Contains(jinja, "<|assistant|>") && Contains(jinja, "<|end|>")) {
    t.family = ChatFamily::kPhi3;
  } else if (Contains(jinja, "[INST]") && Contains(jinja, "<<SYS>>")) {
    t.family = ChatFamily::kLlama2;
  } else if (Contains(jinja, "[INST]")) {
    t.family = ChatFamily::kMistral;
  } else {
    return std::nullopt;
  }
  return t;
}

StatusOr<std::string> RenderChat(const ChatTemplate& tmpl, std::span<const ChatMessage> messages) {
  if (messages.empty()) {
    return Status::Error("messages is empty: a chat needs at least one message");
  }
  std::vector<ChatMessage> norm(messages.begin(), messages.end());
  for (size_t i = 0; i < norm.size(); ++i) {
    std::string& role = norm[i].role;
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant") {
      // The role is the client's text: quoted escaped, so the message stays one line.
      return Status::Error(StrFormat(
          "messages[%zu].role is '%s'; the roles are system, user, assistant (and developer)", i,
          EscapeForMessage(role, 40).c_str()));
    }
  }
  switch (tmpl.family) {
    case ChatFamily::kChatMl:
      return RenderChatMl(tmpl, norm);
    case ChatFamily::kLlama3:
      return RenderLlama3(norm);
    case ChatFamily::kLlama2:
      return RenderLlama2(tmpl, norm);
    case ChatFamily::kMistral:
      return RenderMistral(tmpl, norm);
    case ChatFamily::kGemma:
      return RenderGemma(norm);
    case ChatFamily::kPhi3:
      return RenderPhi3(norm);
  }
  return Status::Error("unknown chat template family");
}

}  // namespace goose::server
