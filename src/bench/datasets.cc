#include "bench/datasets.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

namespace goose {

namespace {

using nlohmann::json;

struct SetInfo {
  const char* name;
  const char* file;
  const char* field;     // the prompt field (tinystories: "text")
  const char* category;  // the category field, or nullptr
  bool array;            // one JSON array instead of JSONL
};

const SetInfo kSets[] = {
    {"spec_bench", "spec_bench/question.jsonl", "turns", "category", false},
    {"mt_bench", "mt_bench/question.jsonl", "turns", "category", false},
    {"humaneval", "humaneval/HumanEval.jsonl.gz", "prompt", nullptr, false},
    {"gsm8k", "gsm8k/test.jsonl", "question", nullptr, false},
    {"alpaca_eval", "alpaca_eval/alpaca_eval_text_davinci_003.json", "instruction", "dataset",
     true},
    {"tinystories", "tinystories/validation.jsonl", "text", nullptr, false},
};

const std::set<std::string> kMultiTurn = {"writing", "roleplay",   "reasoning", "math",
                                          "coding",  "extraction", "stem",      "humanities"};

// A .jsonl file of one's own: {"prompt": ..., "prediction": ...} per line.
const SetInfo kFileSet = {"", "", "prompt", nullptr, false};

bool IsFileName(const std::string& name) {
  return name.size() > 6 && name.compare(name.size() - 6, 6, ".jsonl") == 0;
}

const SetInfo* FindSet(const std::string& name) {
  if (IsFileName(name)) return &kFileSet;
  for (const SetInfo& s : kSets) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

// Whole file, gunzipped if it is gzip (zlib reads plain files transparently).
StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Status::Error("cannot open '" + path + "': " + std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int err = 0;
      const std::string msg = gzerror(f, &err);
      gzclose(f);
      return Status::Error("cannot read '" + path + "': " + msg);
    }
    if (n == 0) break;
    out.append(buf, n);
  }
  // gzclose reports a truncated gzip stream (missing trailer) that gzread let through.
  if (gzclose(f) != Z_OK) return Status::Error("'" + path + "': truncated or corrupt gzip data");
  return out;
}

bool CategoryMatches(const std::string& want, const std::string& have) {
  if (want.empty()) return true;
  if (want == "multi_turn") return kMultiTurn.count(have) > 0;
  return want == have;
}

// The prompt text of one record, or an error naming `where`.
StatusOr<std::string> PromptField(const json& rec, const SetInfo& set, const std::string& where) {
  if (!rec.is_object()) return Status::Error(where + ": record is not a JSON object");
  auto it = rec.find(set.field);
  if (it == rec.end()) return Status::Error(where + ": missing field \"" + set.field + "\"");
  if (std::string(set.field) == "turns") {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string()) {
      return Status::Error(where + ": \"turns\" must be a non-empty array of strings");
    }
    return (*it)[0].get<std::string>();
  }
  if (!it->is_string()) return Status::Error(where + ": \"" + set.field + "\" is not a string");
  return it->get<std::string>();
}

StatusOr<std::string> CategoryField(const json& rec, const SetInfo& set, const std::string& where) {
  if (!set.category) return std::string();
  auto it = rec.find(set.category);
  if (it == rec.end() || !it->is_string()) {
    return Status::Error(where + ": missing string field \"" + set.category + "\"");
  }
  return it->get<std::string>();
}

}  // namespace

const std::vector<std::string>& KnownDataSets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const SetInfo& s : kSets) v.push_back(s.name);
    return v;
  }();
  return names;
}

std::string DataSetPath(const std::string& data_dir, const std::string& name) {
  if (IsFileName(name)) return name;
  const SetInfo* set = FindSet(name);
  return set ? data_dir + "/" + set->file : "";
}

StatusOr<std::vector<DataSpec>> ParseDataSpecs(const std::string& text) {
  std::vector<DataSpec> out;
  size_t start = 0;
  auto known = [] {
    std::string s;
    for (const std::string& n : KnownDataSets()) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) return Status::Error("--data: empty item in '" + text + "'");
    std::vector<std::string> parts;
    for (size_t p = 0;;) {
      const size_t colon = item.find(':', p);
      parts.push_back(item.substr(p, colon == std::string::npos ? std::string::npos : colon - p));
      if (colon == std::string::npos) break;
      p = colon + 1;
    }
    if (parts.size() > 3) {
      return Status::Error("--data item '" + item + "': expected name[:category][:count]");
    }
    DataSpec spec;
    spec.name = parts[0];
    const SetInfo* set = FindSet(spec.name);
    if (!set) {
      return Status::Error("--data item '" + item + "': unknown data set '" + spec.name +
                           "' (known: " + known() + ", or a file ending in .jsonl)");
    }
    auto is_number = [](const std::string& s) {
      return !s.empty() &&
             std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    auto parse_count = [&](const std::string& s, int* n) -> Status {
      if (!is_number(s) || s.size() > 9 || std::stoi(s) <= 0) {
        return Status::Error("--data item '" + item + "': count '" + s +
                             "' is not a positive integer (name[:category][:count], e.g. " +
                             spec.name + ":10)");
      }
      *n = std::stoi(s);
      return Status::Ok();
    };
    if (parts.size() == 3) {
      spec.category = parts[1];
      GOOSE_RETURN_IF_ERROR(parse_count(parts[2], &spec.count));
    } else if (parts.size() == 2) {
      if (is_number(parts[1])) {
        GOOSE_RETURN_IF_ERROR(parse_count(parts[1], &spec.count));
      } else {
        spec.category = parts[1];
      }
    }
    if (parts.size() >= 2 && parts[1].empty()) {
      return Status::Error("--data item '" + item + "': empty category");
    }
    if (!spec.category.empty() && !set->category) {
      return Status::Error("--data item '" + item + "': data set '" + spec.name +
                           "' has no categories (name[:count], e.g. " + spec.name + ":10)");
    }
    out.push_back(spec);
    if (comma == text.size()) break;
  }
  return out;
}

StatusOr<std::vector<BenchPrompt>> LoadDataSet(const DataSpec& spec, const std::string& data_dir,
                                               const Tokenizer* tok, int limit,
                                               const std::string& path_override) {
  const SetInfo* set = FindSet(spec.name);
  if (!set) return Status::Error("unknown data set '" + spec.name + "'");
  const bool stories = spec.name == "tinystories";
  if (stories && !tok) return Status::Error("tinystories prompts need the model's tokenizer");
  const std::string path =
      !path_override.empty() ? path_override : DataSetPath(data_dir, spec.name);
  GOOSE_ASSIGN_OR_RETURN(const std::string content, ReadMaybeGzip(path));

  std::vector<BenchPrompt> out;
  auto add = [&](const json& rec, const std::string& where, int index) -> Status {
    GOOSE_ASSIGN_OR_RETURN(std::string text, PromptField(rec, *set, where));
    if (!spec.category.empty()) {  // the category field is read only when filtering on it
      GOOSE_ASSIGN_OR_RETURN(const std::string category, CategoryField(rec, *set, where));
      if (!CategoryMatches(spec.category, category)) return Status::Ok();
    }
    BenchPrompt p;
    p.id = spec.name + ":" + std::to_string(index);
    if (auto pred = rec.find("prediction"); pred != rec.end() && !pred->is_null()) {
      if (!pred->is_string()) return Status::Error(where + ": \"prediction\" is not a string");
      p.prediction = pred->get<std::string>();
    }
    if (stories) {
      // Convention 14 (docs/methods.md §7): BOS + the first 48 tokens of the story (tokenized
      // without BOS).
      std::vector<int32_t> ids = tok->Encode(text, false);
      if (ids.size() > static_cast<size_t>(kTinyStoriesPrefixTokens)) {
        ids.resize(kTinyStoriesPrefixTokens);
      }
      if (tok->bos() >= 0) p.tokens.push_back(tok->bos());
      p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
    } else {
      p.text = std::move(text);
    }
    out.push_back(std::move(p));
    return Status::Ok();
  };
  auto full = [&] { return limit > 0 && static_cast<int>(out.size()) >= limit; };

  if (set->array) {
    json doc;
    try {
      doc = json::parse(content);
    } catch (const json::parse_error& e) {
      return Status::Error(path + ": not valid JSON at byte " + std::to_string(e.byte) + ": " +
                           e.what());
    }
    if (!doc.is_array()) return Status::Error(path + ": expected one JSON array of records");
    for (size_t i = 0; i < doc.size() && !full(); ++i) {
      GOOSE_RETURN_IF_ERROR(add(doc[i], path + ": record " + std::to_string(i), i));
    }
  } else {
    size_t pos = 0;
    int line_no = 0, index = 0;
    while (pos < content.size() && !full()) {
      size_t nl = content.find('\n', pos);
      if (nl == std::string::npos) nl = content.size();
      std::string line = content.substr(pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines
      const std::string where = path + ":" + std::to_string(line_no);
      json rec;
      try {
        rec = json::parse(line);
      } catch (const json::parse_error& e) {
        return Status::Error(where + ": not valid JSON (column " + std::to_string(e.byte) + ")");
      }
      GOOSE_RETURN_IF_ERROR(add(rec, where, index++));
    }
  }
  if (out.empty()) {
    return Status::Error(path + ": no prompts" +
                         (spec.category.empty() ? "" : " in category '" + spec.category + "'"));
  }
  return out;
}

StatusOr<std::vector<DataSet>> ExpandDataSpec(const DataSpec& spec, const std::string& data_dir,
                                              const Tokenizer* tok, int limit) {
  const int n = spec.count > 0 ? spec.count : limit;
  std::vector<DataSet> out;
  if (spec.name == "spec_bench" && spec.category.empty()) {
    for (const char* group :
         {"multi_turn", "translation", "summarization", "qa", "math_reasoning", "rag"}) {
      DataSpec g = spec;
      g.category = group;
      GOOSE_ASSIGN_OR_RETURN(auto prompts, LoadDataSet(g, data_dir, tok, n));
      out.push_back({"spec_bench/" + g.category, std::move(prompts)});
    }
    return out;
  }
  GOOSE_ASSIGN_OR_RETURN(auto prompts, LoadDataSet(spec, data_dir, tok, n));
  std::string label = spec.category.empty() ? spec.name : spec.name + "/" + spec.category;
  if (IsFileName(spec.name)) {  // the file's name without its folder and .jsonl
    const size_t slash = spec.name.rfind('/');
    label = spec.name.substr(slash == std::string::npos ? 0 : slash + 1);
    label.resize(label.size() - 6);
  }
  out.push_back({label, std::move(prompts)});
  return out;
}

}  // namespace goose
