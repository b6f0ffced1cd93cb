// `gdn tokenize`: JSON Lines text -> ids (or ids -> text with --decode) through any tokenizer gdn
// reads: a Hugging Face tokenizer.json or model directory, a tokenizer.model, or byte. The work
// is gdn::data::tokenize_jsonl; this file maps the flags and prints the summary.
#include <cstdio>

#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/data/tokenize_file.h"
#include "src/data/tokenizer_file.h"

namespace gdn::cli {

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tokenize", "Encode a JSON Lines file's texts to ids, or decode ids to text (--decode)");
  auto o = std::make_shared<data::TokenizeFileOptions>();
  auto tokenizer = std::make_shared<std::string>();
  cmd->add_option("--tokenizer", *tokenizer,
                  "a tokenizer.json, a directory holding one (a Hugging Face model directory) or "
                  "a tokenizer.model, a tokenizer.model file, or byte")
      ->required()
      ->check(non_empty());
  cmd->add_option("--input", o->input,
                  "JSON Lines: {\"TEXT_FIELD\": ...} per line (--decode: "
                  "{\"ids\": [...]})")
      ->required();
  cmd->add_option("--out", o->out,
                  "JSON Lines: {\"ids\": [...]} per line (--decode: "
                  "{\"text\": ...}); line i of the input is line i here")
      ->required();
  cmd->add_option("--text-field", o->text_field, "the field holding each line's text")
      ->capture_default_str();
  cmd->add_flag("--decode", o->decode, "ids to text");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")
      ->check(whole_number(0, 4096))
      ->capture_default_str();
  cmd->callback([o, tokenizer] {
    const auto tok = data::open_named_tokenizer(*tokenizer);
    const data::TokenizeFileSummary s = data::tokenize_jsonl(*tok, *o);
    std::fprintf(
        stderr,
        "gdn tokenize: %lld lines, %lld tokens, %.1f MB of text in %.2fs (%.1f MB/s) -> %s\n",
        (long long)s.lines, (long long)s.tokens, double(s.bytes) / 1e6, s.seconds,
        s.seconds > 0 ? double(s.bytes) / 1e6 / s.seconds : 0.0, o->out.c_str());
  });
}

}  // namespace gdn::cli
