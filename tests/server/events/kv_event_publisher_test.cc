// KvEventPublisher never blocks the engine: past its queue it drops batches
// and counts them, and a bad endpoint is a clear error at start-up.
#include "server/events/kv_event_publisher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "core/error.h"

namespace folio::server {
namespace {

KvEventPublisherOptions ipc_options(const std::string& name, std::size_t max_queued) {
  KvEventPublisherOptions o;
  o.endpoint = "ipc:///tmp/folio-kv-events-test-" + name + "-" + std::to_string(::getpid());
  o.max_queued_batches = max_queued;
  return o;
}

std::vector<KvEvent> one_removal() {
  KvEvent e;
  e.kind = KvEvent::Kind::kRemoved;
  e.block_hashes = {42};
  return {e};
}

TEST(KvEventPublisher, DropsAndCountsBatchesPastItsQueue) {
  KvEventPublisher p(ipc_options("drop", 0));  // no room: every engine batch is dropped
  for (int i = 0; i < 3; ++i) p.publish(one_removal());
  const KvEventSinkStats s = p.stats();
  EXPECT_EQ(s.num_batches, 4);  // the AllBlocksCleared sent at start-up, then three
  EXPECT_EQ(s.num_dropped_batches, 3);
  EXPECT_EQ(s.num_events, 4);
}

TEST(KvEventPublisher, QueuesWhileThereIsRoom) {
  KvEventPublisher p(ipc_options("room", 100));
  for (int i = 0; i < 5; ++i) p.publish(one_removal());
  EXPECT_EQ(p.stats().num_dropped_batches, 0);
  EXPECT_EQ(p.stats().num_batches, 6);
}

TEST(KvEventPublisher, ABadEndpointIsAClearError) {
  KvEventPublisherOptions o;
  o.endpoint = "nonsense://x";
  try {
    KvEventPublisher p(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-events-endpoint nonsense://x"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace folio::server
