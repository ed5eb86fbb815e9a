// Each chat family rendered for the conversation llama.cpp's test-chat-template uses (a system
// turn, two exchanges, an assistant turn with surrounding spaces, a last user turn), against the
// text its reference Jinja template produces; and detection of real template texts.
#include "server/chat_template.h"

#include <gtest/gtest.h>

#include <vector>

#include "gguf/gguf_file.h"

namespace goose::server {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

std::string Render(ChatFamily f, const std::vector<ChatMessage>& m = kConversation) {
  ChatTemplate t;
  t.family = f;
  StatusOr<std::string> r = RenderChat(t, m);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : "";
}

TEST(ChatTemplate, ChatMl) {
  EXPECT_EQ(Render(ChatFamily::kChatMl),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there<|im_end|>\n"
            "<|im_start|>user\nWho are you<|im_end|>\n"
            "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n"
            "<|im_start|>user\nAnother question<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, ChatMlDefaultSystemOnlyWithoutSystemMessage) {
  ChatTemplate t;
  t.family = ChatFamily::kChatMl;
  t.default_system = "You are Qwen.";
  const std::vector<ChatMessage> user_only = {{"user", "Hi"}};
  EXPECT_EQ(*RenderChat(t, user_only),
            "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  const std::vector<ChatMessage> with_system = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(*RenderChat(t, with_system),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3TrimsContent) {
  EXPECT_EQ(Render(ChatFamily::kLlama3),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Meta's Llama-2-chat template: BOS + [INST] per user turn (the first BOS is the prompt's own),
// ' ' + stripped answer + ' ' + EOS per assistant turn, the system text in <<SYS>> inside the
// first turn.
TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(Render(ChatFamily::kLlama2),
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>"
            "<s>[INST] Who are you [/INST] I am an assistant </s>"
            "<s>[INST] Another question [/INST]");
  ChatTemplate t;
  t.family = ChatFamily::kLlama2;
  t.bos_text = "<BOS>";
  t.eos_text = "<EOS>";
  const std::vector<ChatMessage> m = {{"user", " a "}, {"assistant", "b"}, {"user", "c"}};
  EXPECT_EQ(*RenderChat(t, m), "[INST] a [/INST] b <EOS><BOS>[INST] c [/INST]");
}

TEST(ChatTemplate, MistralFoldsSystemIntoFirstUserTurn) {
  EXPECT_EQ(Render(ChatFamily::kMistral),
            "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>"
            "[INST] Who are you [/INST]   I am an assistant   </s>"
            "[INST] Another question [/INST]");
}

TEST(ChatTemplate, GemmaUsesModelRoleAndTrims) {
  EXPECT_EQ(Render(ChatFamily::kGemma),
            "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
            "<start_of_turn>model\nHi there<end_of_turn>\n"
            "<start_of_turn>user\nWho are you<end_of_turn>\n"
            "<start_of_turn>model\nI am an assistant<end_of_turn>\n"
            "<start_of_turn>user\nAnother question<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplate, Phi3) {
  EXPECT_EQ(Render(ChatFamily::kPhi3),
            "<|system|>\nYou are a helpful assistant<|end|>\n"
            "<|user|>\nHello<|end|>\n"
            "<|assistant|>\nHi there<|end|>\n"
            "<|user|>\nWho are you<|end|>\n"
            "<|assistant|>\n   I am an assistant   <|end|>\n"
            "<|user|>\nAnother question<|end|>\n"
            "<|assistant|>\n");
}

TEST(ChatTemplate, DeveloperIsSystemAndUnknownRolesAreErrors) {
  const std::vector<ChatMessage> dev = {{"developer", "Rules."}, {"user", "Hi"}};
  EXPECT_EQ(Render(ChatFamily::kChatMl, dev),
            "<|im_start|>system\nRules.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  ChatTemplate t;
  const std::vector<ChatMessage> bad = {{"user", "Hi"}, {"wizard", "x"}};
  StatusOr<std::string> r = RenderChat(t, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("messages[1].role is 'wizard'"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(RenderChat(t, std::vector<ChatMessage>{}).ok());
  // A role is the client's text: quoted escaped, the message stays one line (fuzz_chat_template).
  const std::vector<ChatMessage> odd = {{"wiz\nard\xff", "x"}};
  r = RenderChat(t, odd);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("role is 'wiz\\nard\\xFF'"), std::string::npos)
      << r.status().message();
}

TEST(ChatTemplate, NamesRoundTrip) {
  for (ChatFamily f : {ChatFamily::kChatMl, ChatFamily::kLlama3, ChatFamily::kLlama2,
                       ChatFamily::kMistral, ChatFamily::kGemma, ChatFamily::kPhi3}) {
    auto back = ChatFamilyByName(ChatFamilyName(f));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, f);
  }
  EXPECT_FALSE(ChatFamilyByName("jinja").has_value());
  EXPECT_EQ(ChatFamilyNames(), "chatml, llama3, llama2, mistral, gemma, phi3");
}

// Template texts as models ship them (abridged to their distinctive parts).
TEST(ChatTemplate, DetectsFamiliesFromTheirTemplates) {
  struct Case {
    const char* jinja;
    ChatFamily family;
  };
  const Case cases[] = {
      {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
       "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
       "{{ '<|im_start|>assistant\\n' }}{% endif %}",
       ChatFamily::kChatMl},
      {"{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
       "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
       "trim + '<|eot_id|>' %}{{ content }}{% endfor %}",
       ChatFamily::kLlama3},
      {"{% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] %}"
       "{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = "
       "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% endif %}"
       "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}",
       ChatFamily::kLlama2},
      {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
       "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
       "{{ message['content'] + eos_token}}{% endif %}{% endfor %}",
       ChatFamily::kMistral},
      {"{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + "
       "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt "
       "%}{{'<start_of_turn>model\\n'}}{% endif %}",
       ChatFamily::kGemma},
      {"{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + "
       "message['content'] + '<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
       "{{ '<|assistant|>\\n' }}{% endif %}",
       ChatFamily::kPhi3},
  };
  for (const Case& c : cases) {
    auto t = DetectChatTemplate(c.jinja);
    ASSERT_TRUE(t.has_value()) << c.jinja;
    EXPECT_EQ(ChatFamilyName(t->family), std::string(ChatFamilyName(c.family))) << c.jinja;
  }
  EXPECT_FALSE(DetectChatTemplate("{% for m in messages %}{{ m['content'] }}{% endfor %}"));
  EXPECT_FALSE(DetectChatTemplate(""));
}

TEST(ChatTemplate, ReadsQwenDefaultSystemPrompt) {
  const char* qwen25 =
      "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == "
      "'system' %}\n        {{- messages[0]['content'] }}\n    {%- else %}\n        {{- 'You are "
      "Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n"
      "{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>"
      "system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n        {{- "
      "'<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}";
  auto t = DetectChatTemplate(qwen25);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->family, ChatFamily::kChatMl);
  EXPECT_EQ(t->default_system,
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  // Plain ChatML writes no system turn of its own.
  auto plain = DetectChatTemplate("{{'<|im_start|>' + message['role'] + '\\n'}}");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->default_system, "");
}

TEST(ChatTemplate, DetectsTheTemplateOfARealPhi3Vocabulary) {
  auto gguf = GgufFile::Open(std::string(GOOSE_SHARED_DIR) + "/vocab/ggml-vocab-phi-3.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  auto jinja = (*gguf)->GetString("tokenizer.chat_template");
  ASSERT_TRUE(jinja.has_value());
  auto t = DetectChatTemplate(*jinja);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->family, ChatFamily::kPhi3);
}

}  // namespace
}  // namespace goose::server
