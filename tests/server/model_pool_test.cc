// ModelPool's rules with loaders that make no engine: load on first use,
// once however many ask; least recently used out past the count or the
// budget; a model in use never unloaded under its requests; idle ones out
// after the keep-alive; a failed load said and tried again.
#include "server/model_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "server/api/api_error.h"

namespace folio::server {
namespace {

struct Loads {
  std::atomic<int> count{0};
};

ModelSpec spec(const std::string& name, std::int64_t bytes, Loads& loads) {
  return ModelSpec{name, "/models/" + name, bytes, [&loads, bytes] {
                     ++loads.count;
                     std::this_thread::sleep_for(std::chrono::milliseconds(20));  // others ask meanwhile
                     return LoadedModel{std::make_shared<ServedModel>(), bytes};
                   }};
}

std::map<std::string, std::string> states(const ModelPool& pool) {
  std::map<std::string, std::string> out;
  for (const ModelStatus& s : pool.status()) out[s.name] = model_state_name(s.state);
  return out;
}

int status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.status();
  }
  return 200;
}

TEST(ModelPoolTest, LoadsOnFirstUseOnceHoweverManyAsk) {
  ModelPool pool({});
  Loads loads;
  pool.add(spec("a", 10, loads));
  EXPECT_EQ(states(pool)["a"], "unloaded");
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<const ServedModel>> got(8);
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { got[i] = pool.acquire("a"); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(loads.count, 1);
  for (const auto& g : got) EXPECT_EQ(g, got[0]);
  EXPECT_EQ(states(pool)["a"], "loaded");
  EXPECT_EQ(pool.acquire(""), got[0]);  // no name: the first registered
  EXPECT_EQ(status_of([&] { pool.acquire("b"); }), 404);
}

TEST(ModelPoolTest, TheLeastRecentlyUsedGoesPastTheCount) {
  ModelPool pool({.max_loaded = 2});
  Loads loads;
  for (const char* n : {"a", "b", "c"}) pool.add(spec(n, 10, loads));
  pool.acquire("a");
  pool.acquire("b");
  pool.acquire("a");  // b is now the least recently used
  pool.acquire("c");
  EXPECT_EQ(states(pool), (std::map<std::string, std::string>{{"a", "loaded"}, {"b", "unloaded"}, {"c", "loaded"}}));
}

TEST(ModelPoolTest, ABudgetUnloadsUntilTheNewcomerFitsAndRefusesWhatNeverFits) {
  ModelPool pool({.max_bytes = 100});
  Loads loads;
  pool.add(spec("a", 40, loads));
  pool.add(spec("b", 40, loads));
  pool.add(spec("big", 90, loads));
  pool.add(spec("huge", 101, loads));
  pool.acquire("a");
  pool.acquire("b");
  EXPECT_EQ(states(pool)["a"], "loaded");
  pool.acquire("big");
  EXPECT_EQ(states(pool), (std::map<std::string, std::string>{
                              {"a", "unloaded"}, {"b", "unloaded"}, {"big", "loaded"}, {"huge", "unloaded"}}));
  EXPECT_EQ(status_of([&] { pool.acquire("huge"); }), 503);
  EXPECT_EQ(states(pool)["big"], "loaded");  // nothing was unloaded for a refusal
}

TEST(ModelPoolTest, AModelInUseIsNeverUnloadedUnderItsRequests) {
  ModelPool pool({.max_loaded = 1});
  Loads loads;
  pool.add(spec("a", 10, loads));
  pool.add(spec("b", 10, loads));
  {
    const auto held = pool.acquire("a");
    EXPECT_EQ(status_of([&] { pool.acquire("b"); }), 503);
    EXPECT_FALSE(pool.unload("a"));
    EXPECT_EQ(pool.status()[0].num_holders, 1);
  }
  pool.acquire("b");  // a's request is over: it may go now
  EXPECT_EQ(states(pool), (std::map<std::string, std::string>{{"a", "unloaded"}, {"b", "loaded"}}));
  EXPECT_TRUE(pool.unload("b"));
  EXPECT_EQ(states(pool)["b"], "unloaded");
}

TEST(ModelPoolTest, IdleModelsGoAfterTheKeepAliveAndComeBackOnUse) {
  ModelPool pool({.keep_alive = std::chrono::milliseconds(30)});
  Loads loads;
  pool.add(spec("a", 10, loads));
  pool.add(spec("b", 10, loads));
  pool.acquire("a");
  const auto held = pool.acquire("b");
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  pool.sweep_idle();
  EXPECT_EQ(states(pool), (std::map<std::string, std::string>{{"a", "unloaded"}, {"b", "loaded"}}));  // b is held
  pool.acquire("a");
  EXPECT_EQ(loads.count, 3);
}

TEST(ModelPoolTest, AFailedLoadIsSaidAndTriedAgain) {
  ModelPool pool({});
  int attempts = 0;
  pool.add(ModelSpec{"flaky", "/models/flaky", 1, [&attempts] {
                       if (++attempts == 1) throw Error("the file is truncated");
                       return LoadedModel{std::make_shared<ServedModel>(), 1};
                     }});
  try {
    pool.acquire("flaky");
    FAIL() << "the first load should have failed";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 500);
    EXPECT_NE(std::string(e.what()).find("the file is truncated"), std::string::npos);
  }
  EXPECT_EQ(states(pool)["flaky"], "failed");
  EXPECT_EQ(pool.status()[0].error, "the file is truncated");
  EXPECT_NE(pool.acquire("flaky"), nullptr);
  EXPECT_EQ(states(pool)["flaky"], "loaded");
}

TEST(ModelPoolTest, AModelWithoutALoaderStays) {
  ModelPool pool({.max_loaded = 1, .keep_alive = std::chrono::milliseconds(1)});
  Loads loads;
  pool.add_loaded(ModelSpec{"pinned", "", 10, {}}, LoadedModel{std::make_shared<ServedModel>(), 10});
  pool.add(spec("b", 10, loads));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  pool.sweep_idle();
  EXPECT_FALSE(pool.unload("pinned"));
  EXPECT_EQ(status_of([&] { pool.acquire("b"); }), 503);  // no room: the pinned one cannot go
  EXPECT_EQ(states(pool)["pinned"], "loaded");
  EXPECT_THROW(pool.add(spec("b", 1, loads)), Error);  // names are unique
}

}  // namespace
}  // namespace folio::server
