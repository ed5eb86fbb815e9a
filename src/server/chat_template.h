// Chat templates: OpenAI-style messages -> the prompt text a chat model was trained on.
//
// Contract
// - The families goose renders, by name: chatml (ChatML, Qwen), llama3, llama2 (Llama-2-chat's
//   [INST] with <<SYS>>), mistral ([INST] without <<SYS>>), gemma, phi3. C++ code renders each
//   exactly as the family's reference Jinja template does with add_generation_prompt = true;
//   no Jinja engine runs, so nothing in a template can execute.
// - DetectChatTemplate() recognises a GGUF `tokenizer.chat_template` by markers only that family
//   writes (<|start_header_id|>, <|im_start|>, <start_of_turn>, <|assistant|> + <|end|>,
//   [INST] with or without <<SYS>>); nullopt when none matches (the caller then needs
//   --chat-template). For ChatML it also reads the system turn the template inserts when the
//   conversation has none (Qwen's "You are Qwen, created by Alibaba Cloud. ...").
// - The rendered text never starts with BOS: the prompt is encoded with BOS like every goose
//   prompt, so a template's leading {{ bos_token }} is that BOS. Later BOS/EOS markers (Llama-2
//   and Mistral turns) are written as the vocabulary's token texts (bos_text, eos_text), which the
//   server encodes as special tokens.
// - Roles: system, user, assistant; developer is system (OpenAI's newer name). Any other role is
//   an error naming it. Families without a system turn put system text in front of the next
//   user message: mistral with a newline, gemma with a blank line (as llama.cpp renders them);
//   llama2 puts a leading system message in <<SYS>> and later ones in a turn of their own.
// - Pure functions of their inputs; thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "util/status.h"

namespace goose::server {

enum class ChatFamily { kChatMl, kLlama3, kLlama2, kMistral, kGemma, kPhi3 };

struct ChatTemplate {
  ChatFamily family = ChatFamily::kChatMl;
  std::string default_system;     // ChatML: system turn added when the messages have none
  std::string bos_text = "<s>";   // llama2 / mistral: written before every later [INST]
  std::string eos_text = "</s>";  // llama2 / mistral: written after every assistant turn
};

struct ChatMessage {
  std::string role;
  std::string content;
};

const char* ChatFamilyName(ChatFamily family);
// "chatml, llama3, llama2, mistral, gemma, phi3"
std::string ChatFamilyNames();
std::optional<ChatFamily> ChatFamilyByName(std::string_view name);

std::optional<ChatTemplate> DetectChatTemplate(std::string_view jinja);

// The prompt for `messages` followed by the assistant's generation prompt. Error: an unknown
// role (the message names it and its index) or no messages.
StatusOr<std::string> RenderChat(const ChatTemplate& tmpl, std::span<const ChatMessage> messages);

}  // namespace goose::server
