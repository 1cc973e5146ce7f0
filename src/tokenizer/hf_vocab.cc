// Vocab::from_hf: a Hugging Face tokenizer.json (byte-level BPE) and its
// tokenizer_config.json read into the same Vocab a GGUF file gives, so that
// the tokenizer above it does not know the format. What the file asks for and
// folio cannot do (another model type, byte fallback, a pre-tokenizer or
// normalizer it does not implement, stripping added tokens) is refused with
// an Error naming it, never approximated.
#include <fmt/format.h>

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/hf_config.h"
#include "tokenizer/vocab.h"

namespace folio {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// The regex of the ByteLevel pre-tokenizer with use_regex (GPT-2's).
constexpr const char* kByteLevelRegex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr TokenId kMaxTokens = 1 << 30;

// tokenizer.json must be there; tokenizer_config.json may be missing (null).
Json read_json(const fs::path& path, bool required) {
  if (!required && !fs::exists(path)) return Json();
  if (!fs::exists(path))
    fail("cannot read {}; folio reads the tokenizer of a Hugging Face directory from its tokenizer.json",
         path.string());
  return read_json_object(path.string());
}

// A pre-tokenizer of tokenizer.json as regexes for PreTokenizer, each
// splitting the pieces the previous one left, matches kept as pieces
// (tokenizers' "Isolated" behaviour).
class PreTokenizerReader {
 public:
  explicit PreTokenizerReader(std::string source) : source_(std::move(source)) {}

  void read(const Json& p) {
    if (!p.is_object()) fail("{}: pre_tokenizer must be an object", source_);
    const std::string type = p.value("type", "");
    if (byte_level_) fail("{}: pre-tokenizer {} after ByteLevel is not supported", source_, type);
    if (type == "Sequence") {
      auto list = p.find("pretokenizers");
      if (list == p.end() || !list->is_array()) fail("{}: a Sequence pre-tokenizer needs its list", source_);
      for (const Json& item : *list) read(item);
    } else if (type == "ByteLevel") {
      if (p.value("add_prefix_space", false)) fail("{}: ByteLevel with add_prefix_space is not supported", source_);
      if (p.value("use_regex", true)) regexes_.push_back(kByteLevelRegex);
      byte_level_ = true;
    } else if (type == "Split") {
      if (p.value("invert", false)) fail("{}: an inverted Split pre-tokenizer is not supported", source_);
      const std::string behavior = p.value("behavior", "");
      if (behavior != "Isolated") fail("{}: Split behaviour \"{}\" is not supported (Isolated is)", source_, behavior);
      const Json& pattern = p.value("pattern", Json::object());
      if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
        regexes_.push_back(pattern["Regex"].get<std::string>());
      } else if (pattern.contains("String") && pattern["String"].is_string()) {
        regexes_.push_back("\\Q" + pattern["String"].get<std::string>() + "\\E");
      } else {
        fail("{}: a Split pre-tokenizer needs a Regex or String pattern", source_);
      }
    } else if (type == "Digits") {
      regexes_.push_back(p.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
    } else {
      fail("{}: pre-tokenizer \"{}\" is not supported (ByteLevel, Split, Digits and Sequence are)", source_, type);
    }
  }

  std::vector<std::string> finish() {
    if (!byte_level_)
      fail("{}: the pre-tokenizer has no ByteLevel step; folio reads byte-level BPE tokenizers only", source_);
    return std::move(regexes_);
  }

 private:
  std::string source_;
  std::vector<std::string> regexes_;
  bool byte_level_ = false;
};

bool read_normalizer(const Json& n, const std::string& source) {
  if (n.is_null()) return false;
  const std::string type = n.is_object() ? n.value("type", "") : "";
  if (type == "NFC") return true;
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    bool nfc = false;
    for (const Json& item : n["normalizers"]) nfc = read_normalizer(item, source) || nfc;
    return nfc;
  }
  fail("{}: normalizer \"{}\" is not supported (NFC or none are)", source, type);
}

// A special token's text in tokenizer_config.json: a string, an AddedToken
// object or null.
std::string token_text(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

TokenId id_of(const Vocab& v, const std::string& text, const char* key, const std::string& source) {
  if (text.empty()) return -1;
  for (std::size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == text) return static_cast<TokenId>(i);
  fail("{}: {} \"{}\" is not a token of the vocab", source, key, text);
}

// add_bos / add_eos from a TemplateProcessing post-processor: the special
// tokens around the single sequence $A.
void read_post_processor(const Json& p, std::string& bos, std::string& eos, const std::string& source) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    for (const Json& item : p.value("processors", Json::array())) read_post_processor(item, bos, eos, source);
    return;
  }
  if (type == "ByteLevel") return;  // offsets only
  if (type != "TemplateProcessing")
    fail("{}: post-processor \"{}\" is not supported (TemplateProcessing, ByteLevel are)", source, type);
  bool seen_sequence = false;
  for (const Json& item : p.value("single", Json::array())) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
    } else if (item.contains("SpecialToken")) {
      std::string& slot = seen_sequence ? eos : bos;
      if (!slot.empty()) fail("{}: the post-processor adds more than one token on a side", source);
      slot = item["SpecialToken"].value("id", "");
    }
  }
}

}  // namespace

Vocab Vocab::from_hf(const std::string& dir, std::int64_t min_size) {
  const fs::path root(dir);
  const std::string source = (root / "tokenizer.json").string();
  const Json tok = read_json(root / "tokenizer.json", true);
  const Json config = read_json(root / "tokenizer_config.json", false);

  const Json& model = tok.value("model", Json::object());
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") fail("{}: tokenizer model \"{}\" is not supported (BPE is)", source, type);
  if (model.value("byte_fallback", false))
    fail(
        "{}: BPE with byte_fallback (SentencePiece style) is not supported from tokenizer.json; convert the "
        "model to GGUF",
        source);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty())
      fail("{}: BPE {} is not supported", source, key);
  }
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0)
    fail("{}: BPE dropout is not supported", source);

  Vocab v;
  v.kind = VocabKind::kBytePairGpt2;
  v.model = "gpt2";
  v.pre = "tokenizer.json";
  v.ignore_merges = model.value("ignore_merges", false);

  // Ids: the vocab, then the added tokens (which may repeat vocab entries).
  const Json& vocab = model.value("vocab", Json::object());
  if (!vocab.is_object() || vocab.empty()) fail("{}: model.vocab is missing or empty", source);
  std::vector<std::pair<TokenId, std::string>> entries;
  auto add_entry = [&](const Json& id, const std::string& text) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= kMaxTokens)
      fail("{}: token \"{}\" has id {}, not one from 0 to {}", source, text, id.dump(), kMaxTokens - 1);
    entries.emplace_back(static_cast<TokenId>(id.get<std::int64_t>()), text);
  };
  for (const auto& [text, id] : vocab.items()) add_entry(id, text);
  struct Added {
    TokenId id;
    bool special;
  };
  std::vector<Added> added;
  for (const Json& a : tok.value("added_tokens", Json::array())) {
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string())
      fail("{}: an added token has no content", source);
    const std::string text = a["content"].get<std::string>();
    if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false))
      fail(
          "{}: added token \"{}\" strips spaces or matches single words only (lstrip, rstrip, single_word), "
          "which folio's tokenizer does not do yet",
          source, text);
    add_entry(a.value("id", Json()), text);
    added.push_back({entries.back().first, a.value("special", false)});
  }
  TokenId size = static_cast<TokenId>(std::min<std::int64_t>(min_size, kMaxTokens));
  for (const auto& [id, text] : entries) size = std::max(size, id + 1);
  v.tokens.assign(static_cast<std::size_t>(size), std::string());
  std::vector<bool> named(static_cast<std::size_t>(size), false);
  for (const auto& [id, text] : entries) {
    if (named[id] && v.tokens[id] != text)
      fail("{}: id {} names both \"{}\" and \"{}\"", source, id, v.tokens[id], text);
    v.tokens[id] = text;
    named[id] = true;
  }
  v.types.assign(v.tokens.size(), TokenType::kNormal);
  for (TokenId id = 0; id < size; ++id) {
    if (named[id]) continue;
    v.tokens[id] = fmt::format("[PAD{}]", id);  // as GGUF converters fill a padded vocab
    v.types[id] = TokenType::kUnused;
  }
  for (const Added& a : added) v.types[a.id] = a.special ? TokenType::kControl : TokenType::kUserDefined;

  const Json& merges = model.value("merges", Json::array());
  if (!merges.is_array()) fail("{}: model.merges is not a list", source);
  v.merges.reserve(merges.size());
  for (const Json& m : merges) {
    if (m.is_string()) {
      v.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      const std::string a = m[0].get<std::string>(), b = m[1].get<std::string>();
      if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
        fail("{}: merge [\"{}\", \"{}\"] holds a space, which byte-level BPE never does", source, a, b);
      v.merges.push_back(a + " " + b);
    } else {
      fail("{}: merge {} is neither \"a b\" nor [\"a\", \"b\"]", source, m.dump());
    }
  }

  v.normalize_nfc = read_normalizer(tok.value("normalizer", Json()), source);
  PreTokenizerReader pre(source);
  pre.read(tok.value("pre_tokenizer", Json::object()));
  v.pre_regexes = pre.finish();
  const Json& decoder = tok.value("decoder", Json());
  bool byte_level_decoder = decoder.is_object() && decoder.value("type", "") == "ByteLevel";
  if (decoder.is_object() && decoder.value("type", "") == "Sequence")
    for (const Json& d : decoder.value("decoders", Json::array()))
      byte_level_decoder = byte_level_decoder || (d.is_object() && d.value("type", "") == "ByteLevel");
  if (!byte_level_decoder) fail("{}: the decoder is not ByteLevel; folio reads byte-level BPE tokenizers only", source);

  // Special tokens: tokenizer_config.json names them; BOS/EOS are added as it
  // says, or as the post-processor's template does.
  std::string bos_text, eos_text;
  read_post_processor(tok.value("post_processor", Json()), bos_text, eos_text, source);
  const std::string config_source = (root / "tokenizer_config.json").string();
  const std::string config_bos = token_text(config, "bos_token");
  const std::string config_eos = token_text(config, "eos_token");
  v.bos_id = id_of(v, config_bos.empty() ? bos_text : config_bos, "bos_token", config_source);
  v.eos_id = id_of(v, config_eos.empty() ? eos_text : config_eos, "eos_token", config_source);
  v.unk_id = id_of(v, token_text(config, "unk_token"), "unk_token", config_source);
  v.pad_id = id_of(v, token_text(config, "pad_token"), "pad_token", config_source);
  const bool template_bos = !bos_text.empty(), template_eos = !eos_text.empty();
  if (template_bos && id_of(v, bos_text, "post-processor token", source) != v.bos_id)
    fail("{}: the post-processor adds \"{}\" but bos_token is \"{}\"", source, bos_text, config_bos);
  if (template_eos && id_of(v, eos_text, "post-processor token", source) != v.eos_id)
    fail("{}: the post-processor adds \"{}\" but eos_token is \"{}\"", source, eos_text, config_eos);
  auto flag = [&](const char* key, bool fallback) {
    auto it = config.is_object() ? config.find(key) : config.end();
    if (it == config.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail("{}: {} must be true or false", config_source, key);
    return it->get<bool>();
  };
  v.add_bos = flag("add_bos_token", template_bos);
  v.add_eos = flag("add_eos_token", template_eos);
  v.clean_spaces = flag("clean_up_tokenization_spaces", false);
  v.add_space_prefix = false;
  v.promote_markers = false;

  v.finish(source);
  return v;
}

}  // namespace folio
