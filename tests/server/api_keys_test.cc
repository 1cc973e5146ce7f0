// ApiKeys: the Bearer scheme in any case, whole keys only, keys from every source.
#include "server/api_keys.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "support/temp_path.h"

namespace folio::server {
namespace {

bool accepts(const ApiKeys& keys, const std::string& value) { return keys.accepts(&value); }

TEST(ApiKeysTest, BearerInAnyCaseAndTheWholeKeyOnly) {
  const ApiKeys keys({"sk-one", "sk-two"});
  for (const char* ok : {"Bearer sk-one", "bearer sk-two", "BEARER sk-one", "Bearer   sk-one  ", "Bearer\tsk-two"})
    EXPECT_TRUE(accepts(keys, ok)) << ok;
  for (const char* bad : {"Bearer sk-on", "Bearer sk-onee", "Bearer sk-one sk-two", "Basic sk-one", "sk-one", "Bearer",
                          "Bearer ", "Bearersk-one", "Bearer sk-ONE"})
    EXPECT_FALSE(accepts(keys, bad)) << bad;
  EXPECT_FALSE(accepts(keys, std::string("Bearer sk-one\0junk", 18)));
  EXPECT_FALSE(keys.accepts(nullptr));
  EXPECT_TRUE(ApiKeys().accepts(nullptr));  // no keys: no authentication
}

TEST(ApiKeysTest, KeysComeFromFlagsAFileAndTheEnvironment) {
  testing::TempPath file("keys");
  std::ofstream(file.str()) << "# ops\nfile-a\r\n\nfile-b\n";
  const ApiKeys keys = ApiKeys::load({"flag-a"}, file.str(), std::string("env-a,env-b"));
  EXPECT_EQ(keys.size(), 5u);
  for (const char* k : {"flag-a", "file-a", "file-b", "env-a", "env-b"})
    EXPECT_TRUE(accepts(keys, std::string("Bearer ") + k)) << k;
}

TEST(ApiKeysTest, BadKeysAreRefusedWithWhereTheyCameFrom) {
  testing::TempPath file("keys");
  std::ofstream(file.str()) << "good\nbad key\n";
  try {
    ApiKeys::load({}, file.str(), std::nullopt);
    FAIL() << "a key with a space was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  std::ofstream(file.str()) << std::string("nul\0key\n", 8);
  EXPECT_THROW(ApiKeys::load({}, file.str(), std::nullopt), Error);
  std::ofstream(file.str()) << "# only a comment\n";
  EXPECT_THROW(ApiKeys::load({}, file.str(), std::nullopt), Error);
  EXPECT_THROW(ApiKeys::load({}, "/nonexistent/keys", std::nullopt), Error);
  EXPECT_THROW(ApiKeys::load({""}, "", std::nullopt), Error);
  EXPECT_THROW(ApiKeys::load({}, "", std::string(",")), Error);
}

}  // namespace
}  // namespace folio::server
