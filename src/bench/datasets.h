// Benchmark prompt sets (../shared/data, see its SOURCES.md) and the SPEC syntax that names them.
//
// Contract
// - ParseDataSpecs("spec_bench:summarization:20,tinystories:40") -> one DataSpec per item:
//   name[:category][:count]. A lone number after the name is a count. Unknown names, empty
//   items, bad counts and categories on sets without categories are errors naming the item.
// - LoadDataSet() reads the set's file under data_dir and returns up to `limit` prompts in file
//   order (limit <= 0: all). Which field becomes the prompt:
//     spec_bench   turns[0]   (category = the record's "category"; without one the set is
//                             split into Spec-Bench's six groups, see ExpandDataSpec)
//     mt_bench     turns[0]   (category = "category")
//     humaneval    prompt     (gzip JSONL)
//     gsm8k        question
//     alpaca_eval  instruction (one JSON array; category = "dataset")
//     tinystories  BOS + the first 48 tokens of the tokenized story (docs/methods.md §7,
//                  convention 14);
//                  needs the model's tokenizer, so its prompts come as ids.
//     PATH.jsonl   prompt, and the optional "prediction" (the text the answer is expected to
//                  reproduce, as OpenAI's Predicted Outputs): a file of one's own (edits, say);
//                  its label is the file's name without .jsonl. A path must not hold ':' or ','.
// - Every malformed record is an error naming the file and the line (or array index) and what
//   was wrong; an unreadable file names the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace goose {

struct DataSpec {
  std::string name;      // spec_bench | mt_bench | humaneval | gsm8k | alpaca_eval | tinystories
                         // | a .jsonl file's path
  std::string category;  // empty = all
  int count = -1;        // -1 = the --n-prompts default
};

struct BenchPrompt {
  std::string id;               // e.g. "gsm8k:3" (the 0-based record index in the file)
  std::string text;             // empty when the prompt comes as ids
  std::vector<int32_t> tokens;  // set for tinystories (BOS + story prefix)
  std::string prediction;       // the expected answer (a .jsonl file's "prediction"), or empty
};

// What the benchmark reports as one data set: a label plus its prompts.
struct DataSet {
  std::string label;  // "gsm8k", "spec_bench/summarization", "spec_bench/multi_turn", ...
  std::vector<BenchPrompt> prompts;
};

StatusOr<std::vector<DataSpec>> ParseDataSpecs(const std::string& text);
const std::vector<std::string>& KnownDataSets();

// Path of a set's file under data_dir.
std::string DataSetPath(const std::string& data_dir, const std::string& name);

// The records of one set (category-filtered), up to limit (<= 0: all). `tok` is needed only for
// tinystories. `path_override` (tests) reads that file instead of the standard one.
StatusOr<std::vector<BenchPrompt>> LoadDataSet(const DataSpec& spec, const std::string& data_dir,
                                               const Tokenizer* tok, int limit,
                                               const std::string& path_override = "");

// spec_bench without a category becomes Spec-Bench's six groups (multi_turn = the eight MT-Bench
// categories, translation, summarization, qa, math_reasoning, rag), `limit` prompts each; every
// other spec is one data set.
StatusOr<std::vector<DataSet>> ExpandDataSpec(const DataSpec& spec, const std::string& data_dir,
                                              const Tokenizer* tok, int limit);

// The prompt length of tinystories prompts after BOS (convention 14).
constexpr int kTinyStoriesPrefixTokens = 48;

}  // namespace goose
