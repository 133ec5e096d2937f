#include <gtest/gtest.h>
#include <array>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/parse.h"
#include "config/print.h"
#include "config/validate.h"
#include "helpers.h"
#include "util/util.h"

using namespace nmt;
using nlohmann::json;

namespace {
// The error message parse_config gives, or "" when it accepts the input.
std::string error_of(const std::string& json, const std::vector<std::string>& sets = {}) {
  try {
    parse_config(json, sets, "test.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
const char* kMinimal = R"({"train": {"max_steps": 10}})";
}  // namespace

TEST(Config, DefaultsAndOverridesApply) {
  const Config c =
      parse_config(R"({"model": {"d_model": 256, "heads": 4}, "train": {"max_steps": 7}})",
                   {"train.seed=42", "model.norm=pre", "train.lr_factor=2"});
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_EQ(c.model.heads, 4);
  EXPECT_EQ(c.train.max_steps, 7);
  EXPECT_EQ(c.train.seed, 42);
  EXPECT_EQ(c.model.norm, Norm::kPre);
  EXPECT_DOUBLE_EQ(c.train.lr_factor, 2.0);
  EXPECT_EQ(c.train.accum_steps, 1);  // a default
}

TEST(Config, InvalidJsonGivesLineAndColumn) {
  const auto msg = error_of("{\n  \"train\": {\n    \"max_steps\": 10,\n  }\n}");
  EXPECT_NE(msg.find("test.json:4:3: invalid JSON"), std::string::npos) << msg;
}

TEST(Config, UnknownKeySuggestsTheClosest) {
  EXPECT_EQ(error_of(R"({"train": {"max_step": 10}})"),
            "train.max_step: unknown key (did you mean \"train.max_steps\"?)");
  EXPECT_EQ(error_of(R"({"trian": {"max_steps": 10}})"),
            "trian: unknown key (did you mean \"train\"?)");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10, "colour": 1}})"), "train.colour: unknown key");
}

TEST(Config, WrongTypesNameThePath) {
  EXPECT_EQ(error_of(R"({"train": {"max_steps": "ten"}})"),
            "train.max_steps: expected an integer, got string \"ten\"");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10.5}})"),
            "train.max_steps: expected an integer, got 10.5");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "model": {"dropout": "x"}})"),
            "model.dropout: expected a number, got string \"x\"");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "vocab": {"joint": 1}})"),
            "vocab.joint: expected a boolean, got integer 1");
  EXPECT_EQ(error_of(R"({"train": 5})"), "train: expected an object, got integer 5");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 99999999999999999999}})"),
            "train.max_steps: expected an integer, got 1e+20");
}

TEST(Config, OutOfRangeValues) {
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "model": {"d_model": 512, "heads": 3}})"),
            "model.heads: 3 does not divide model.d_model 512");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": -1}})"), "train.max_steps: must be >= 0, got -1");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "model": {"dropout": 1.5}})"),
            "model.dropout: must be in [0, 1), got 1.5");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "model": {"norm": "middle"}})"),
            "model.norm: must be one of \"post\", \"pre\", got \"middle\"");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "model": {"activation_dropout": -0.5}})"),
            "model.activation_dropout: must be -1 (= model.dropout) or in [0, 1), got -0.5");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10, "cooldown": 1.5}})"),
            "train.cooldown: must be in [0, 1], got 1.5");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 0, "max_epochs": 0}})"),
            "train.max_steps: set train.max_steps, train.max_epochs or train.max_time (all are 0)");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "vocab": {"joint": false}})"),
            "model.tie_embeddings: \"all\" needs vocab.joint = true");
  EXPECT_EQ(
      error_of(R"({"train": {"max_steps": 10, "batch_tokens": 100}, "data": {"max_len": 100}})"),
      "train.batch_tokens: must exceed data.max_len (100) so every kept pair fits in a batch, "
      "got 100");
}

TEST(Config, OverridesUseTheSameValidation) {
  EXPECT_EQ(error_of(kMinimal, {"train.max_stepz=5"}),
            "train.max_stepz: unknown key (did you mean \"train.max_steps\"?)");
  EXPECT_EQ(error_of(kMinimal, {"model.heads=7"}),
            "model.heads: 7 does not divide model.d_model 512");
  EXPECT_EQ(error_of(kMinimal, {"train.max_steps=abc"}),
            "train.max_steps: expected an integer, got string \"abc\"");
  EXPECT_EQ(error_of(kMinimal, {"no_equals_sign"}),
            "--set no_equals_sign: expected key.path=value");
  EXPECT_EQ(error_of(kMinimal, {"data.train_src=corpus.en"}), "");
}

// Training files are only looked for (preparing the store counts their lines: test_store.cpp);
// the validation files' line counts are compared at once.
TEST(Config, MissingDataFileAndLineCountMismatch) {
  nmt_test::TempDir dir;
  nmt_test::write_text(dir / "a.en", "one\ntwo\nthree\n");
  nmt_test::write_text(dir / "a.de", "eins\nzwei\n");
  Config c = parse_config(kMinimal);
  c.data.valid_src = c.data.valid_tgt = "";
  c.data.training.corpora = {{dir / "missing.en", dir / "a.de", 1.0}};
  try {
    validate_data_files(c);
    FAIL() << "missing file accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "data.train_src: file not found: " + (dir / "missing.en"));
  }
  c.data.training.corpora[0].src = dir / "a.en";
  EXPECT_NO_THROW(validate_data_files(c));
  c.data.valid_src = dir / "a.en";
  c.data.valid_tgt = dir / "a.de";
  try {
    validate_data_files(c);
    FAIL() << "line count mismatch accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "data.valid_tgt: line counts differ: " + (dir / "a.en") +
                                         " has 3 lines, " + (dir / "a.de") + " has 2");
  }
}

TEST(Config, DumpRoundTripsEveryKey) {
  const Config c = parse_config(kMinimal, {"model.positional=learned", "decode.max_len_b=7"});
  const Config again = parse_config(config_to_json(c));
  EXPECT_EQ(config_to_json(again), config_to_json(c));
  EXPECT_EQ(again.model.positional, Positional::kLearned);
  EXPECT_EQ(again.decode.max_len_b, 7);
}

TEST(Config, RnnKeysLiveInTheirOwnSection) {
  const Config c = parse_config(
      R"({"model": {"arch": "rnn", "d_model": 64, "rnn": {"cell": "lstm", "hidden": 96,
          "layers": 2, "attention": "luong_general"}}, "train": {"max_steps": 1}})");
  EXPECT_EQ(c.model.arch, Arch::kRnn);
  EXPECT_EQ(c.model.rnn.cell, RnnCell::kLstm);
  EXPECT_EQ(c.model.rnn.hidden, 96);
  EXPECT_EQ(c.model.rnn.layers, 2);
  EXPECT_EQ(c.model.rnn.attention, RnnAttentionKind::kLuongGeneral);
  // The printed config has the RNN section and no Transformer keys, and parses back.
  const json printed = json::parse(config_to_json(c));
  EXPECT_TRUE(printed["model"].contains("rnn"));
  EXPECT_FALSE(printed["model"].contains("heads"));
  EXPECT_FALSE(printed["model"].contains("d_ff"));
  EXPECT_EQ(config_to_json(parse_config(config_to_json(c))), config_to_json(c));
  // A Transformer config prints exactly the keys it had before model.rnn existed.
  const json transformer = json::parse(config_to_json(parse_config(kMinimal)));
  EXPECT_FALSE(transformer["model"].contains("rnn"));
  EXPECT_TRUE(transformer["model"].contains("heads"));
  // --set reaches the nested section.
  EXPECT_EQ(parse_config(kMinimal, {"model.arch=rnn", "model.rnn.attention=luong_dot"})
                .model.rnn.attention,
            RnnAttentionKind::kLuongDot);
}

TEST(Config, KeysOfTheOtherArchitectureAreRejectedWithThePath) {
  EXPECT_EQ(error_of(R"({"model": {"arch": "rnn", "heads": 4}, "train": {"max_steps": 1}})"),
            "model.heads: a key of model.arch \"transformer\", but model.arch is \"rnn\"");
  EXPECT_EQ(error_of(R"({"model": {"rnn": {"hidden": 8}}, "train": {"max_steps": 1}})"),
            "model.rnn: a key of model.arch \"rnn\", but model.arch is \"transformer\"");
  EXPECT_EQ(error_of(kMinimal, {"model.arch=rnn", "model.norm=pre"}),
            "model.norm: a key of model.arch \"transformer\", but model.arch is \"rnn\"");
  EXPECT_EQ(error_of(kMinimal, {"model.arch=rnn", "model.rnn.cells=gru"}),
            "model.rnn.cells: unknown key (did you mean \"model.rnn.cell\"?)");
  EXPECT_EQ(error_of(kMinimal, {"model.arch=rnn", "model.rnn.hidden=7"}),
            "model.rnn.hidden: the two encoder directions share it, so it must be even, got 7");
  EXPECT_EQ(error_of(kMinimal, {"model.arch=rnn", "model.rnn.attention=luong"}),
            "model.rnn.attention: must be one of \"bahdanau\", \"luong_dot\", "
            "\"luong_general\", got \"luong\"");
  EXPECT_EQ(error_of(kMinimal, {"model.arch=cnn"}),
            "model.arch: must be one of \"transformer\", \"rnn\", got \"cnn\"");
  EXPECT_EQ(error_of(kMinimal, {"train.lr_schedule=cosine"}),
            "train.lr_schedule: must be one of \"noam\", \"inverse_sqrt\", \"constant\", got "
            "\"cosine\"");
  // Shared keys stay valid for both; the width rule of sinusoids is the Transformer's only.
  EXPECT_EQ(error_of(kMinimal, {"model.arch=rnn", "model.d_model=33", "model.dropout=0.3"}), "");
}

TEST(Config, ShippedConfigsAreValid) {
  for (const char* name : {"configs/quickstart.json", "configs/multi30k_en_de_base.json",
                           "configs/quickstart_rnn.json", "configs/multi30k_en_de_rnn.json",
                           "configs/multi30k_en_de_rnn_luong.json",
                           "configs/multi30k_en_de_student.json"}) {
    const Config c = load_config_file(nmt_test::source_dir() + "/" + name);
    EXPECT_GT(c.train.max_steps + c.train.max_epochs, 0) << name;
  }
  // The quality recipes promise a result within two hours of training on the reference machine,
  // on the direction their name says, with averaging and the beam they were tuned with.
  for (const auto& [direction, src, tgt] : std::vector<std::array<std::string, 3>>{
           {"en_de", "en", "de"}, {"de_en", "de", "en"}, {"en_fr", "en", "fr"}}) {
    const Config c =
        load_config_file(nmt_test::source_dir() + "/configs/multi30k_" + direction + ".json");
    EXPECT_GT(c.train.max_time.seconds, 0) << direction;
    EXPECT_LE(c.train.max_time.seconds, 2 * 3600) << direction;
    EXPECT_EQ(c.data.train_src, "data/multi30k/train." + src) << direction;
    EXPECT_EQ(c.data.train_tgt, "data/multi30k/train." + tgt) << direction;
    EXPECT_EQ(c.data.valid_src, "data/multi30k/val." + src) << direction;
    EXPECT_EQ(c.data.valid_tgt, "data/multi30k/val." + tgt) << direction;
    EXPECT_GE(c.train.average_last, 2) << direction;
    EXPECT_GT(c.decode.beam_size, 1) << direction;
  }
  const Config m = load_config_file(nmt_test::source_dir() + "/configs/multi30k_en_de_base.json");
  EXPECT_EQ(m.model.d_model, 256);
  EXPECT_EQ(m.model.heads, 4);
  EXPECT_EQ(m.model.encoder_layers, 3);
  EXPECT_EQ(m.model.decoder_layers, 3);
  EXPECT_EQ(m.model.d_ff, 1024);
  EXPECT_EQ(m.vocab.size, 8000);
  EXPECT_TRUE(m.vocab.joint);
  EXPECT_EQ(m.train.batch_tokens, 4096);
}

TEST(Config, ReferenceDocIsUpToDate) {
  const std::string doc = nmt_test::read_text(nmt_test::source_dir() + "/docs/config.md");
  EXPECT_NE(doc.find(config_reference_markdown()), std::string::npos)
      << "docs/config.md is stale; regenerate the table with `nmt train --print-config-reference`";
}

// Found by the config fuzzer (test_fuzz.cpp): each of these once crashed, or escaped as a raw
// library exception instead of an nmt error.
TEST(Config, DeepNestingIsRefusedWithoutRecursion) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  auto msg = error_of(R"({"model": )" + deep + "}");  // printing it back overflowed the stack
  EXPECT_NE(msg.find("test.json: JSON nested deeper than 32 levels"), std::string::npos) << msg;
  msg = error_of(kMinimal, {"model.d_model=" + deep});
  EXPECT_NE(msg.find("nested deeper than 32 levels"), std::string::npos) << msg.substr(0, 200);
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "x": [[[1]]]})"),
            "x: unknown key");  // shallow nesting still parses
}

TEST(Config, NumberOverflowIsAnErrorNamingTheFile) {
  const auto msg = error_of(R"({"train": {"max_steps": 1e400}})");
  EXPECT_EQ(msg.rfind("test.json: invalid JSON: number overflow", 0), 0u) << msg;
}

TEST(Config, SetValuesMustBeUtf8) {
  // JSON text is UTF-8 by definition; a --set value comes from argv and may be anything.
  auto msg = error_of(kMinimal, {"data.train_src=caf\xe9.en"});
  EXPECT_EQ(msg, "data.train_src: not valid UTF-8 (1 bad bytes)");
  msg = error_of(kMinimal, {"model.d_model=caf\xe9"});
  EXPECT_EQ(msg, "model.d_model: expected an integer, got string \"caf\xef\xbf\xbd\"");
}

TEST(Config, HugeValuesAreCutInMessages) {
  auto msg = error_of(R"({"train": {"max_steps": 10}, "model": {"norm": ")" +
                      std::string(1000000, 'x') + "\"}}");
  EXPECT_EQ(msg.rfind("model.norm: must be one of \"post\", \"pre\", got \"xxx", 0), 0u);
  EXPECT_LT(msg.size(), 200u);
  msg = error_of(R"({"train": {"max_steps": 10}, ")" + std::string(100000, 'k') + "\": 1}");
  EXPECT_LT(msg.size(), 200u);
  EXPECT_NE(msg.find("...: unknown key"), std::string::npos) << msg;
}

TEST(Config, DurationsParseFromNumbersAndUnits) {
  EXPECT_DOUBLE_EQ(parse_duration("90"), 90);
  EXPECT_DOUBLE_EQ(parse_duration("90s"), 90);
  EXPECT_DOUBLE_EQ(parse_duration("45m"), 2700);
  EXPECT_DOUBLE_EQ(parse_duration("2h"), 7200);
  EXPECT_DOUBLE_EQ(parse_duration("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(parse_duration("1.5h"), 5400);
  EXPECT_DOUBLE_EQ(parse_duration(" 1d "), 86400);
  EXPECT_DOUBLE_EQ(parse_duration("0"), 0);
  // From a file (seconds or a string) and from --set, which gives a string or a number.
  EXPECT_DOUBLE_EQ(parse_config(R"({"train": {"max_time": "45m"}})").train.max_time.seconds, 2700);
  EXPECT_DOUBLE_EQ(parse_config(R"({"train": {"max_time": 30.5}})").train.max_time.seconds, 30.5);
  EXPECT_DOUBLE_EQ(parse_config(kMinimal, {"train.max_time=2h"}).train.max_time.seconds, 7200);
  EXPECT_DOUBLE_EQ(parse_config(kMinimal, {"train.max_time=90"}).train.max_time.seconds, 90);
  // Written back as seconds, which parse again.
  const Config c = parse_config(kMinimal, {"train.max_time=1h30m"});
  EXPECT_EQ(json::parse(config_to_json(c))["train"]["max_time"], 5400.0);
  EXPECT_DOUBLE_EQ(parse_config(config_to_json(c)).train.max_time.seconds, 5400);
  // max_time alone is a stopping rule.
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 0, "max_time": "10m"}})"), "");
}

TEST(Config, BadDurationsNameThePath) {
  EXPECT_EQ(error_of(kMinimal, {"train.max_time=45x"}),
            "train.max_time: unknown unit 'x' in \"45x\" (s, m, h or d)");
  EXPECT_EQ(error_of(kMinimal, {"train.max_time=h"}),
            "train.max_time: expected a duration such as \"90s\", \"45m\" or \"2h\", "
            "got \"h\"");
  EXPECT_EQ(error_of(kMinimal, {"train.max_time=1h30"}),
            "train.max_time: a number without a unit after the first part of \"1h30\"");
  EXPECT_EQ(error_of(kMinimal, {"train.max_time=-5"}),
            "train.max_time: must be in [0, 3.1536e+08] seconds, got -5");
  EXPECT_EQ(error_of(kMinimal, {"train.max_time=-5m"}),
            "train.max_time: expected a duration such as \"90s\", \"45m\" or \"2h\", "
            "got \"-5m\"");
  EXPECT_EQ(error_of(kMinimal, {"train.max_time=true"}),
            "train.max_time: expected seconds or a duration string like \"45m\", got boolean true");
}

namespace {
// A TrainingData as text, to compare whole structures.
std::string describe(const TrainingData& t) {
  json corpora = json::array();
  for (const auto& k : t.corpora) corpora.push_back({k.src, k.tgt, k.weight});
  return json{{"corpora", corpora}, {"store", t.store}}.dump();
}
}  // namespace

// data.train_src/train_tgt and data.train name the same corpora alike; data.train_store is the
// store, with data.train's weights when given. Every later stage reads only this structure.
TEST(Config, TrainingDataSpellingsNormalizeAlike) {
  const TrainingData pair =
      parse_config(kMinimal, {"data.train_src=a.en", "data.train_tgt=a.de"}).data.training;
  const TrainingData list =
      parse_config(kMinimal, {R"(data.train=[{"src": "a.en", "tgt": "a.de"}])"}).data.training;
  EXPECT_EQ(describe(pair), R"({"corpora":[["a.en","a.de",1.0]],"store":""})");
  EXPECT_EQ(describe(list), describe(pair));
  EXPECT_FALSE(pair.from_store());
  EXPECT_EQ(pair.key(0, "src"), "data.train_src");
  EXPECT_EQ(list.key(0, "tgt"), "data.train[0].tgt");
  // The defaults are one corpus too.
  EXPECT_EQ(describe(parse_config(kMinimal).data.training),
            R"({"corpora":[["data/quickstart/train.en","data/quickstart/train.de",1.0]],)"
            R"("store":""})");

  const TrainingData store = parse_config(kMinimal, {"data.train_store=s"}).data.training;
  EXPECT_TRUE(store.from_store());
  EXPECT_EQ(describe(store), R"({"corpora":[],"store":"s"})");
  EXPECT_TRUE(store.weights().empty());  // the store's corpora keep weight 1 each
  const TrainingData weighted =
      parse_config(kMinimal, {"data.train_store=s", R"(data.train=[{"src": "a", "tgt": "b",
                                 "weight": 2}, {"src": "c", "tgt": "d", "weight": 0.5}])"})
          .data.training;
  EXPECT_TRUE(weighted.from_store());
  EXPECT_EQ(weighted.weights(), (std::vector<double>{2.0, 0.5}));
}

// The printed config keeps the user's spelling and parses back to the same TrainingData.
TEST(Config, TrainingDataSurvivesPrinting) {
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {"data.train_src=a.en", "data.train_tgt=a.de"},
           {R"(data.train=[{"src": "a.en", "tgt": "a.de", "weight": 3}])"},
           {"data.train_store=s"}}) {
    const Config c = parse_config(kMinimal, sets);
    const Config again = parse_config(config_to_json(c));
    EXPECT_EQ(describe(again.data.training), describe(c.data.training)) << sets[0];
    EXPECT_EQ(again.data.training.from_list, c.data.training.from_list) << sets[0];
  }
  const json printed = json::parse(config_to_json(
      parse_config(kMinimal, {R"(data.train=[{"src": "a.en", "tgt": "a.de"}])"})));
  EXPECT_EQ(printed["data"]["train_src"], "");  // the defaults stepped aside
  EXPECT_EQ(printed["data"]["train"].size(), 1u);
}

TEST(Config, MixedTrainingDataSpellingsAreRefused) {
  const std::string list = R"(data.train=[{"src": "a.en", "tgt": "a.de"}])";
  EXPECT_EQ(error_of(kMinimal, {list, "data.train_src=b.en"}),
            "data.train_src: give data.train or data.train_src/train_tgt, not both");
  EXPECT_EQ(error_of(R"({"train": {"max_steps": 10}, "data": {"train_tgt": "b.de", "train": )"
                     R"([{"src": "a.en", "tgt": "a.de"}]}})"),
            "data.train_tgt: give data.train or data.train_src/train_tgt, not both");
  // An explicit empty pair beside data.train is what config.json holds: accepted.
  EXPECT_EQ(error_of(kMinimal, {list, "data.train_src=", "data.train_tgt="}), "");
  EXPECT_EQ(error_of(kMinimal, {"data.train_src="}),
            "data.train_src: give data.train_src and data.train_tgt, data.train or "
            "data.train_store");
  EXPECT_EQ(error_of(kMinimal, {R"(data.train=[{"src": "a", "tgt": "b", "weight": 0}])"}),
            "data.train: every weight is 0; at least one corpus must have a weight > 0");
}

// data.train[i].tag: a piece name, checked with its path; printed only when given, so the
// printed config parses back; the distinct tags come out sorted.
TEST(Config, CorpusTagsAreCheckedWithTheirPath) {
  const std::string two = R"(data.train=[{"src": "a.en", "tgt": "a.de"}, )"
                          R"({"src": "b.en", "tgt": "b.de", "tag": )";
  auto with_tag = [&](const std::string& tag_json) { return two + tag_json + "}]"; };
  const Config c = parse_config(kMinimal, {with_tag(R"("<BT>")")});
  EXPECT_EQ(c.data.training.corpora[0].tag, "");
  EXPECT_EQ(c.data.training.corpora[1].tag, "<BT>");
  EXPECT_EQ(c.data.training.tags(), std::vector<std::string>{"<BT>"});

  EXPECT_EQ(error_of(kMinimal, {with_tag(R"("")")}),
            "data.train[1].tag: must not be empty (leave the key out for no tag)");
  EXPECT_EQ(error_of(kMinimal, {with_tag(R"("<B T>")")}),
            "data.train[1].tag: must not contain whitespace, got \"<B T>\"");
  EXPECT_EQ(error_of(kMinimal, {with_tag(R"("<BT>\t")")}),
            "data.train[1].tag: must not contain whitespace, got \"<BT>\t\"");
  EXPECT_EQ(error_of(kMinimal, {with_tag(R"("<A>,<B>")")}),
            "data.train[1].tag: must not contain ',', got \"<A>,<B>\"");
  EXPECT_EQ(error_of(kMinimal, {with_tag(R"("</s>")")}),
            "data.train[1].tag: must not be the special piece </s>");
  EXPECT_EQ(error_of(kMinimal, {with_tag(R"(7)")}),
            "data.train[1].tag: expected a string, got integer 7");
  const std::string at_limit(64, 'x');
  EXPECT_EQ(error_of(kMinimal, {with_tag("\"" + at_limit + "\"")}), "");
  EXPECT_EQ(error_of(kMinimal, {with_tag("\"" + at_limit + "y\"")})
                .rfind("data.train[1].tag: must be at most 64 bytes, got 65", 0),
            0u);
  // Only the list form has tags.
  EXPECT_EQ(error_of(kMinimal, {"data.tag=<BT>"}).rfind("data.tag: unknown key", 0), 0u);

  // Printed back: the tag where it was given, no key where it was not.
  const json printed = json::parse(config_to_json(c));
  EXPECT_FALSE(printed["data"]["train"][0].contains("tag"));
  EXPECT_EQ(printed["data"]["train"][1]["tag"], "<BT>");
  const Config again = parse_config(config_to_json(c));
  EXPECT_EQ(again.data.training.corpora[1].tag, "<BT>");
  EXPECT_FALSE(json::parse(config_to_json(parse_config(kMinimal)))["data"]["train"].dump().find(
                   "tag") != std::string::npos);

  // Several corpora, one tag twice: each distinct tag once, sorted.
  const Config many = parse_config(
      kMinimal, {R"(data.train=[{"src": "a", "tgt": "b", "tag": "<FT>"}, {"src": "c", "tgt": "d",)"
                 R"( "tag": "<BT>"}, {"src": "e", "tgt": "f"}, {"src": "g", "tgt": "h", "tag":)"
                 R"( "<FT>"}])"});
  EXPECT_EQ(many.data.training.tags(), (std::vector<std::string>{"<BT>", "<FT>"}));
}
