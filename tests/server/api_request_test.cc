#include "server/api_request.h"
#include "server/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace goose::server {
namespace {

CompletionRequest Ok(const std::string& body, ApiKind kind = ApiKind::kCompletion) {
  ApiOr<CompletionRequest> r = ParseCompletionRequest(body, kind);
  EXPECT_TRUE(r.ok()) << body << " -> " << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : CompletionRequest{};
}

// The error for `body`; fails the test if it parsed.
ApiError Err(const std::string& body, ApiKind kind = ApiKind::kCompletion) {
  ApiOr<CompletionRequest> r = ParseCompletionRequest(body, kind);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? ApiError{} : r.error();
}

void ExpectError(const std::string& body, const std::string& param, const std::string& says,
                 ApiKind kind = ApiKind::kCompletion) {
  const ApiError e = Err(body, kind);
  EXPECT_EQ(e.status, 400) << body;
  EXPECT_EQ(e.param, param) << body << " -> " << e.message;
  EXPECT_NE(e.message.find(says), std::string::npos) << body << " -> " << e.message;
}

TEST(ApiRequest, DefaultsAreGooseGenerates) {
  const CompletionRequest r = Ok(R"({"prompt": "Once"})");
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_FALSE(r.prompt_is_tokens);
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_EQ(r.temperature, 0.0f);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_FLOAT_EQ(r.top_p, 0.95f);
  EXPECT_EQ(r.seed, 0u);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_TRUE(r.spec.empty());
  EXPECT_FALSE(r.budget.has_value());
}

TEST(ApiRequest, ReadsEveryParameter) {
  const CompletionRequest r = Ok(R"({"model": "m", "prompt": ["Hi"], "max_tokens": 7,
      "temperature": 0.5, "top_p": 0.9, "top_k": 3, "seed": 42, "stop": ["a", "bc"], "n": 1,
      "stream": true, "stream_options": {"include_usage": true}, "user": "x",
      "frequency_penalty": 0, "logprobs": null, "goose": {"spec": "balanced+k5", "budget": 8}})");
  EXPECT_EQ(r.prompt, "Hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.top_k, 3);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.spec, "balanced+k5");
  ASSERT_TRUE(r.budget.has_value());
  EXPECT_EQ(*r.budget, 8);
  EXPECT_EQ(Ok(R"({"prompt": "x", "stop": "end"})").stop, std::vector<std::string>{"end"});
  EXPECT_EQ(Ok(R"({"prompt": "x", "max_completion_tokens": 5})").max_tokens, 5);
  EXPECT_EQ(Ok(R"({"prompt": "x", "max_tokens": 16.0})").max_tokens, 16);
  EXPECT_EQ(Ok(R"({"prompt": "x", "seed": -1})").seed, ~uint64_t{0});
  EXPECT_TRUE(Ok(R"({"prompt": "x", "goose": {"budget": "auto"}})").budget_auto);
  // null means "not set".
  EXPECT_EQ(Ok(R"({"prompt": "x", "temperature": null, "stop": null})").temperature, 0.0f);
}

TEST(ApiRequest, PromptForms) {
  const CompletionRequest ids = Ok(R"({"prompt": [1, 403, 407]})");
  EXPECT_TRUE(ids.prompt_is_tokens);
  EXPECT_EQ(ids.prompt_tokens, (std::vector<int32_t>{1, 403, 407}));
  ExpectError(R"({"max_tokens": 3})", "prompt", "'prompt' is required");
  ExpectError(R"({"prompt": 5})", "prompt", "must be a string or an array");
  ExpectError(R"({"prompt": []})", "prompt", "empty array");
  ExpectError(R"({"prompt": ["a", "b"]})", "prompt", "one prompt per request");
  ExpectError(R"({"prompt": [[1, 2]]})", "prompt", "one prompt per request");
  ExpectError(R"({"prompt": [1, -2]})", "prompt", "'prompt[1]' = -2 is not a token id");
  ExpectError(R"({"prompt": [1, "x"]})", "prompt", "'prompt[1]' must be a token id");
}

TEST(ApiRequest, ChatMessages) {
  const CompletionRequest r = Ok(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}],
       "name": "bob"}, {"role": "assistant", "content": null}]})",
                                 ApiKind::kChat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hello");
  EXPECT_EQ(r.messages[2].content, "");
  const ApiKind chat = ApiKind::kChat;
  ExpectError(R"({"prompt": "x"})", "messages", "'messages' is required", chat);
  ExpectError(R"({"messages": []})", "messages", "empty", chat);
  ExpectError(R"({"messages": {"role": "user"}})", "messages", "must be an array", chat);
  ExpectError(R"({"messages": ["hi"]})", "messages", "messages[0] must be an object", chat);
  ExpectError(R"({"messages": [{"content": "hi"}]})", "messages", "messages[0].role is required",
              chat);
  ExpectError(R"({"messages": [{"role": "wizard", "content": "hi"}]})", "messages",
              "messages[0].role is \"wizard\"", chat);
  ExpectError(R"({"messages": [{"role": "user"}]})", "messages", "content is required", chat);
  ExpectError(R"({"messages": [{"role": "user", "content": 3}]})", "messages",
              "must be a string or an array of text parts", chat);
  ExpectError(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages",
              "reads text only", chat);
  ExpectError(R"({"messages": [{"role": "tool", "content": "1"}]})", "messages", "tool calling",
              chat);
}

TEST(ApiRequest, RejectsOutOfRangeAndWrongTypes) {
  ExpectError(R"({"prompt": "x", "max_tokens": -1})", "max_tokens", "from 0 to 16777216");
  ExpectError(R"({"prompt": "x", "max_tokens": 1e12})", "max_tokens", "from 0 to");
  ExpectError(R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens", "integer");
  ExpectError(R"({"prompt": "x", "max_tokens": "10"})", "max_tokens", "must be an integer");
  ExpectError(R"({"prompt": "x", "temperature": -0.1})", "temperature", "from 0 to 100");
  ExpectError(R"({"prompt": "x", "temperature": 1000})", "temperature", "from 0 to 100");
  ExpectError(R"({"prompt": "x", "temperature": "hot"})", "temperature", "must be a number");
  ExpectError(R"({"prompt": "x", "top_p": 1.5})", "top_p", "from 0 to 1");
  ExpectError(R"({"prompt": "x", "top_k": -3})", "top_k", "integer from 0");
  ExpectError(R"({"prompt": "x", "seed": "7"})", "seed", "must be an integer");
  ExpectError(R"({"prompt": "x", "stream": "yes"})", "stream", "true or false");
  ExpectError(R"({"prompt": "x", "stream_options": 1})", "stream_options", "must be an object");
  ExpectError(R"({"prompt": "x", "stop": 3})", "stop", "string or an array of strings");
  ExpectError(R"({"prompt": "x", "stop": ["a", 3]})", "stop", "string or an array of strings");
  std::string seventeen = R"({"prompt": "x", "stop": ["s0")";
  for (int i = 1; i < 17; ++i) seventeen += ", \"s" + std::to_string(i) + "\"";
  ExpectError(seventeen + "]}", "stop", "the limit is 16");
  ExpectError(R"({"prompt": "x", "stop": ")" + std::string(300, 'z') + "\"}", "stop",
              "the limit is 256");
}

TEST(ApiRequest, NMustBeOne) {
  ExpectError(R"({"prompt": "x", "n": 2})", "n", "'n' must be 1");
  ExpectError(R"({"prompt": "x", "n": 0})", "n", "'n' must be 1");
  ExpectError(R"({"prompt": "x", "n": "1"})", "n", "'n' must be 1");
  EXPECT_EQ(Ok(R"({"prompt": "x", "n": 1})").prompt, "x");
}

TEST(ApiRequest, UnsupportedParametersAreErrorsNotSilence) {
  for (const char* body :
       {R"({"prompt": "x", "presence_penalty": 0.5})", R"({"prompt": "x", "frequency_penalty": 1})",
        R"({"prompt": "x", "logit_bias": {"5": 10}})", R"({"prompt": "x", "logprobs": 3})",
        R"({"prompt": "x", "best_of": 2})", R"({"prompt": "x", "echo": true})",
        R"({"prompt": "x", "suffix": "end"})",
        R"({"prompt": "x", "response_format": {"type": "json_object"}})",
        R"({"prompt": "x", "tools": [{"type": "function"}]})"}) {
    const ApiError e = Err(body);
    EXPECT_EQ(e.code, "unsupported_parameter") << body;
    EXPECT_NE(e.message.find("not supported by goose"), std::string::npos) << e.message;
  }
  EXPECT_EQ(Ok(R"({"prompt": "x", "response_format": {"type": "text"}, "tools": []})").prompt, "x");
}

TEST(ApiRequest, GooseExtension) {
  ExpectError(R"({"prompt": "x", "goose": {"spec": "warp"}})", "goose.spec", "unknown method");
  ExpectError(R"({"prompt": "x", "goose": {"spec": "goose+k9"}})", "goose.spec", "goose.spec");
  ExpectError(R"({"prompt": "x", "goose": {"spec": 3}})", "goose.spec", "must be a method name");
  ExpectError(R"({"prompt": "x", "goose": {"budget": 129}})", "goose.budget", "from 0 to 128");
  ExpectError(R"({"prompt": "x", "goose": {"budget": "max"}})", "goose.budget", "\"auto\"");
  ExpectError(R"({"prompt": "x", "goose": {"spce": "pld"}})", "goose", "unknown field");
  ExpectError(R"({"prompt": "x", "goose": "pld"})", "goose", "must be an object");
  EXPECT_EQ(Ok(R"({"prompt": "x", "goose": {"spec": "pld"}})").spec, "pld");
}

// OpenAI's Predicted Outputs: a string or text parts; every other shape names the field.
TEST(ApiRequest, Prediction) {
  EXPECT_FALSE(Ok(R"({"prompt": "a"})").prediction.has_value());
  EXPECT_FALSE(Ok(R"({"prompt": "a", "prediction": null})").prediction.has_value());
  EXPECT_EQ(
      Ok(R"({"prompt": "a", "prediction": {"type": "content", "content": "x = 1"}})").prediction,
      "x = 1");
  EXPECT_EQ(Ok(R"({"messages": [{"role": "user", "content": "hi"}], "prediction": {"type":
                "content", "content": [{"type": "text", "text": "a"}, {"type": "text",
                "text": "b"}]}})",
               ApiKind::kChat)
                .prediction,
            "ab");
  EXPECT_EQ(Ok(R"({"prompt": "a", "prediction": {"type": "content", "content": ""}})").prediction,
            "");
  ExpectError(R"({"prompt": "a", "prediction": "x"})", "prediction", "must be {");
  ExpectError(R"({"prompt": "a", "prediction": {"content": "x"}})", "prediction",
              "prediction.type must be \"content\"");
  ExpectError(R"({"prompt": "a", "prediction": {"type": "text", "content": "x"}})", "prediction",
              "not \"text\"");
  ExpectError(R"({"prompt": "a", "prediction": {"type": "content"}})", "prediction",
              "prediction.content is required");
  ExpectError(R"({"prompt": "a", "prediction": {"type": "content", "content": 7}})", "prediction",
              "not an integer");
  ExpectError(R"({"prompt": "a", "prediction": {"type": "content", "content": [{"type":
              "image_url", "image_url": {"url": "x"}}]}})",
              "prediction", "prediction.content[0] must be");
}

TEST(ApiRequest, BodiesThatAreNotJsonObjects) {
  ExpectError("", "", "not valid JSON");
  ExpectError("{\"prompt\": ", "", "not valid JSON");
  ExpectError("[1, 2]", "", "must be a JSON object, not an array");
  ExpectError("\"prompt\"", "", "must be a JSON object, not a string");
  ExpectError("{\"prompt\": \"a\xff\"}", "", "not valid UTF-8 (byte 13)");
  ExpectError("{\"prompt\": \"\xc0\xaf\"}", "", "not valid UTF-8");  // overlong '/'
  ExpectError(R"({"prompt": "\ud800"})", "", "not valid JSON");      // lone surrogate escape
  // What the JSON parser quotes of the body, and a long or odd bad value, never end inside a
  // character nor hold DEL (found by fuzz_api_request): the message is one line of UTF-8.
  for (const std::string& body :
       {std::string("{\"x\": \"\xc3\xa9\" \xc3\xa9}"),
        R"({"messages": [{"role": ")" + std::string(55, 'x') + "\xc3\xa9\xc3\xa9\xc3\xa9\"}]}",
        std::string("{\"messages\": [{\"role\": \"a\x7f\"}]}")}) {
    const ApiError e = Err(body, ApiKind::kChat);
    EXPECT_TRUE(IsValidUtf8(e.message)) << e.message;
    EXPECT_EQ(e.message.find_first_of("\n\x7f"), std::string::npos) << e.message;
  }
  // Nesting is bounded before parsing (the old parse of 100,000 levels was fine, but quoting
  // the value in the message recursed once per level and overflowed the stack), in any field.
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  for (const char* field : {"prompt", "n", "stop", "user"}) {
    SCOPED_TRACE(field);
    const std::string key = std::string("{\"") + field + "\": ";
    ExpectError(key + nested(100000) + "}", "", "more than 32 deep");
    const ApiOr<CompletionRequest> fits =
        ParseCompletionRequest(key + nested(31) + "}", ApiKind::kCompletion);
    EXPECT_TRUE(fits.ok() || fits.error().message.find("deep") == std::string::npos)
        << fits.error().message;
  }
  ExpectError(R"({"goose": {"budget": )" + nested(31) + "}}", "", "more than 32 deep (byte 51)");
  // Brackets in strings, escaped quotes included, are not nesting.
  EXPECT_EQ(Ok(R"({"prompt": ")" + std::string(100, '[') + R"(\"[[{{"})").prompt,
            std::string(100, '[') + "\"[[{{");
  // A bad value is quoted short whatever its size: an array by its type, a string cut.
  std::string many = "[1";
  for (int i = 0; i < 100000; ++i) many += ",1";
  EXPECT_EQ(Err(R"({"prompt": "x", "n": )" + many + "]}").message,
            "'n' must be 1: goose answers one choice per request (got an array)");
  const ApiError long_value = Err(R"({"prompt": "x", "n": ")" + std::string(4 << 20, 'x') + "\"}");
  EXPECT_LT(long_value.message.size(), 200u) << long_value.message;
  EXPECT_NE(long_value.message.find("xxx..."), std::string::npos) << long_value.message;
}

TEST(ApiRequest, TokenizeAndDetokenize) {
  ApiOr<TokenizeRequest> t = ParseTokenizeRequest(R"({"content": "hi", "with_pieces": true})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value().content, "hi");
  EXPECT_TRUE(t.value().with_pieces);
  EXPECT_FALSE(t.value().add_special);
  EXPECT_TRUE(t.value().parse_special);
  EXPECT_FALSE(ParseTokenizeRequest(R"({"text": "hi"})").ok());
  EXPECT_EQ(ParseTokenizeRequest(R"({"content": "hi", "add_special": 1})").error().param,
            "add_special");
  ApiOr<DetokenizeRequest> d = ParseDetokenizeRequest(R"({"tokens": [1, 2, -3]})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value().tokens, (std::vector<int64_t>{1, 2, -3}));
  EXPECT_EQ(ParseDetokenizeRequest(R"({"tokens": ["a"]})").error().param, "tokens");
  EXPECT_EQ(ParseDetokenizeRequest(R"({"tokens": 5})").error().param, "tokens");
}

}  // namespace
}  // namespace goose::server
