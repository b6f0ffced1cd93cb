// `gdn prepare-data`: text inputs (plain text, JSON Lines, gzip-compressed or not) -> tokenizer +
// train/val token shards + meta.json (the work is gdn::data::prepare_data; this file maps flags
// onto PrepareOptions and prints the summary).
#include <cstdio>

#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/data/prepare.h"

namespace gdn::cli {

void add_prepare_data_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "prepare-data",
      "tokenize text (plain text or JSON Lines files, gzip or not) into train/val token shards "
      "(default corpus: the Python standard library sources)");
  auto o = std::make_shared<data::PrepareOptions>();
  auto no_eos = std::make_shared<bool>(false);
  auto no_byte_fallback = std::make_shared<bool>(false);
  cmd->add_option("--input", o->inputs,
                  "files, directories or glob patterns (quote them): NAME.jsonl[.gz] are JSON "
                  "Lines (one document per line), anything else plain text (one document per "
                  "file; NAME.gz decompressed); default: the Python standard library "
                  "(/usr/lib/python3.X)");
  cmd->add_option("--text-field", o->text_field,
                  "JSON Lines: the field holding each document's text")
      ->capture_default_str();
  cmd->add_option("--prompt-field", o->prompt_field,
                  "JSON Lines: a fine-tuning pair's prompt (a line with the completion field is "
                  "a pair: the loss scores only its completion and eos; see train.mask.bin)")
      ->capture_default_str();
  cmd->add_option("--completion-field", o->completion_field,
                  "JSON Lines: a fine-tuning pair's completion")
      ->capture_default_str();
  cmd->add_flag("--skip-bad-lines", o->skip_bad_lines,
                "JSON Lines: skip (and count) lines that are not JSON objects with a string "
                "text field, instead of stopping at the first");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "byte, sentencepiece (trained on the inputs), or the path of a Hugging Face "
                  "tokenizer.json, a model directory holding one, or a tokenizer.model")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--bos", o->specials.bos,
                  "tokenizer.json: the added token that is bos (default: tokenizer_config.json "
                  "beside it, else the one known name such as <s> or <|begin_of_text|>)");
  cmd->add_option("--eos", o->specials.eos,
                  "tokenizer.json: the added token appended after each document (default: "
                  "tokenizer_config.json beside it, else the one known name such as </s> or "
                  "<|endoftext|>)");
  cmd->add_option("--vocab-size", o->vocab_size,
                  "sentencepiece: vocabulary size (default 8192); byte: 256, or 258 for bos/eos")
      ->check(whole_number(1));
  cmd->add_option("--out", o->out_dir, "output directory")->required();
  cmd->add_option("--val-fraction", o->val_fraction,
                  "share of the bytes for validation, by whole documents (ranked by a hash of the "
                  "path, and line); a single document is split at a tail of its tokens")
      ->check(real_number(0, 1, /*above_min=*/false, /*below_max=*/true))
      ->capture_default_str();
  cmd->add_option("--max-bytes", o->max_bytes, "read at most this much text (0: all)")
      ->check(whole_number(0))
      ->capture_default_str();
  cmd->add_option("--sp-model-type", o->sp_model_type, "sentencepiece model: bpe or unigram")
      ->check(CLI::IsMember({"bpe", "unigram"}))
      ->capture_default_str();
  cmd->add_option("--sp-sample-bytes", o->sp_sample_bytes,
                  "train sentencepiece on a deterministic sample of about this much text")
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_flag("--no-byte-fallback", *no_byte_fallback,
                "sentencepiece: map unseen characters to <unk> instead of byte pieces");
  cmd->add_flag("--no-eos", *no_eos, "do not append the eos token after each document");
  cmd->add_option("--seed", o->seed, "seed of the sentencepiece training sample")
      ->check(whole_number(0))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "tokenizer threads (0: all cores)")
      ->check(whole_number(0, 4096))
      ->capture_default_str();
  cmd->callback([o, no_eos, no_byte_fallback] {
    o->append_eos = !*no_eos;
    o->sp_byte_fallback = !*no_byte_fallback;
    const data::PrepareSummary s = data::prepare_data(*o);
    std::fputs(data::format_summary(s).c_str(), stdout);
  });
}

}  // namespace gdn::cli
