// Hub names as users write them, the files a name picks from a repository's
// listing, and the cache layout other tools share: pure logic, no network.
#include "hub/model_ref.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "hub/hub_cache.h"
#include "hub/pull.h"
#include "support/temp_path.h"

namespace folio::hub {
namespace {

ModelRef ref(const std::string& text) {
  std::optional<ModelRef> r = parse_model_ref(text);
  EXPECT_TRUE(r) << text;
  return r.value_or(ModelRef{});
}

TEST(ModelRefTest, EveryFormParses) {
  EXPECT_EQ(ref("Qwen/Qwen2.5-1.5B-Instruct-GGUF").repo, "Qwen/Qwen2.5-1.5B-Instruct-GGUF");
  const ModelRef q = ref("hf://Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M");
  EXPECT_EQ(q.repo, "Qwen/Qwen2.5-1.5B-Instruct-GGUF");
  EXPECT_EQ(q.quant, "Q4_K_M");
  EXPECT_EQ(q.revision, "main");
  const ModelRef f = ref("org/repo@v1.0/sub/dir/model-q8_0.gguf");
  EXPECT_EQ(f.revision, "v1.0");
  EXPECT_EQ(f.file, "sub/dir/model-q8_0.gguf");
  EXPECT_EQ(f.text(), "org/repo@v1.0/sub/dir/model-q8_0.gguf");
  EXPECT_EQ(ref("org/repo@0123456789abcdef0123456789abcdef01234567:q8_0").quant, "q8_0");
}

TEST(ModelRefTest, AliasesComeFromTheDataFile) {
  ASSERT_FALSE(model_aliases().empty());
  for (const auto& [name, target] : model_aliases()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(name.find('/'), std::string::npos);  // an alias never looks like a repository
    const ModelRef r = ref(name);
    EXPECT_EQ(r.text(), target);
  }
  EXPECT_EQ(ref("qwen2.5:1.5b").quant, "Q4_K_M");
}

TEST(ModelRefTest, LocalNamesAreNotHubNames) {
  for (const char* local :
       {"model.gguf", "/abs/path/model.gguf", "./rel/model.gguf", "../up/x", "~/m.gguf", "no-such-alias:7b", ""})
    EXPECT_FALSE(parse_model_ref(local)) << local;
}

TEST(ModelRefTest, MalformedHubNamesSayWhatTheFormsAre) {
  for (const char* bad : {"hf://", "hf://org", "hf://org/", "org/repo:", "org/repo@", "org/repo/../x", "org/repo/a//b",
                          "hf://-org/repo", "org/repo:Q4 K"}) {
    try {
      parse_model_ref(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ORG/REPO:QUANT"), std::string::npos) << e.what();
    }
  }
}

const std::vector<std::string> kGgufRepo = {
    "README.md",
    "model-Q8_0.gguf",
    "model-Q4_K_M.gguf",
    "model-UD-Q5_K_XL.gguf",
    "mmproj-model-f16.gguf",
    "Q2_K/model-Q2_K-00002-of-00003.gguf",
    "Q2_K/model-Q2_K-00001-of-00003.gguf",
    "Q2_K/model-Q2_K-00003-of-00003.gguf",
};

TEST(PickFilesTest, AQuantTagPicksItsFileAndEveryPartOfASplitOne) {
  FilePick p = pick_files(ref("o/r:q8_0"), kGgufRepo);
  EXPECT_EQ(p.files, std::vector<std::string>{"model-Q8_0.gguf"});
  p = pick_files(ref("o/r"), kGgufRepo);  // Q4_K_M when none is named
  EXPECT_EQ(p.model, "model-Q4_K_M.gguf");
  p = pick_files(ref("o/r:Q2_K"), kGgufRepo);
  EXPECT_EQ(p.files,
            (std::vector<std::string>{"Q2_K/model-Q2_K-00001-of-00003.gguf", "Q2_K/model-Q2_K-00002-of-00003.gguf",
                                      "Q2_K/model-Q2_K-00003-of-00003.gguf"}));
  EXPECT_EQ(p.model, "Q2_K/model-Q2_K-00001-of-00003.gguf");
  p = pick_files(ref("o/r/Q2_K/model-Q2_K-00003-of-00003.gguf"), kGgufRepo);  // a part names its set
  EXPECT_EQ(p.files.size(), 3u);
  p = pick_files(ref("o/r/README.md"), kGgufRepo);
  EXPECT_EQ(p.files, std::vector<std::string>{"README.md"});
}

TEST(PickFilesTest, WhatCannotBePickedIsAnErrorListingWhatThereIs) {
  try {
    pick_files(ref("o/r:IQ1_S"), kGgufRepo);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model-Q8_0.gguf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pick_files(ref("o/r/nope.gguf"), kGgufRepo), Error);
  EXPECT_THROW(pick_files(ref("o/r"), {"a-Q8_0.gguf", "b-Q8_0.gguf"}), Error);       // no Q4_K_M, two to choose from
  EXPECT_THROW(pick_files(ref("o/r:Q8_0"), {"a-Q8_0.gguf", "b-Q8_0.gguf"}), Error);  // two of that tag
  EXPECT_EQ(pick_files(ref("o/r"), {"only-f16.gguf"}).model, "only-f16.gguf");       // one file: that one
  EXPECT_THROW(pick_files(ref("o/r"), {"README.md", "pytorch_model.bin"}), Error);
}

TEST(PickFilesTest, ASafetensorsCheckpointTakesWhatFolioReads) {
  const FilePick p =
      pick_files(ref("o/r"), {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                              "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json",
                              "pytorch_model.bin", "onnx/model.onnx", "1_Pooling/config.json", "modules.json",
                              "chat_template.jinja", "original/consolidated.safetensors"});
  EXPECT_EQ(p.model, "");  // the snapshot folder
  EXPECT_EQ(p.files, (std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                               "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                                               "tokenizer.json", "tokenizer_config.json", "1_Pooling/config.json",
                                               "modules.json", "chat_template.jinja"}));
}

// A folder removed with all it holds when the test ends.
struct TempDir {
  TempDir() : path(folio::testing::TempPath("").str() + "_dir") { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST(HubCacheTest, TheLayoutOtherToolsShare) {
  TempDir dir;
  const HubCache cache(dir.path);
  EXPECT_EQ(cache.repo_dir("Org/Repo").filename(), "models--Org--Repo");
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  EXPECT_FALSE(cache.commit_of("Org/Repo", "main"));
  cache.set_ref("Org/Repo", "main", commit);
  EXPECT_EQ(cache.commit_of("Org/Repo", "main"), commit);
  EXPECT_EQ(cache.commit_of("Org/Repo", commit), commit);  // a commit is its own
  std::filesystem::create_directories(cache.blob("Org/Repo", "e").parent_path());
  std::ofstream(cache.blob("Org/Repo", "e")) << "bytes";
  const auto linked = cache.link("Org/Repo", commit, "a/b/file.json", "e");
  EXPECT_EQ(std::filesystem::read_symlink(linked), "../../../../blobs/e");
  std::ifstream in(linked);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "bytes");
  EXPECT_EQ(std::filesystem::read_symlink(cache.link("Org/Repo", commit, "top.json", "e")), "../../blobs/e");
}

TEST(HubCacheTest, HashesOfFiles) {
  folio::testing::TempPath file;
  std::ofstream(file.str()) << "abc";
  EXPECT_EQ(sha256_of_file(file.str()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // git hash-object of "abc": the id the hub lists for a small file.
  EXPECT_EQ(git_blob_id_of_file(file.str()), "f2ba8f84ab5c1bce84a7b441cb1959cfc7093b7f");
}

}  // namespace
}  // namespace folio::hub
