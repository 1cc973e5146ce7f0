/* The GNU libmicrohttpd candidate of the HTTP-layer choice (bench/RESULTS.md,
 * "HTTP layer"): one epoll thread, 32 KiB of memory per connection, 1024
 * connections, a 10 s timeout; GET /json and GET /sse?n=N&ms=M as in
 * beast_proto.cc, the stream suspended between events and resumed by a timer
 * thread. Run by run.sh. */
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct Sse {
  int left, ms;
  struct MHD_Connection* c;
  int ready;
  long long due;
  struct Sse* next;
};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct Sse* sleeping = NULL;
static long long now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

static ssize_t sse_reader(void* cls, uint64_t pos, char* buf, size_t max) {
  struct Sse* s = cls;
  if (s->left == 0) return MHD_CONTENT_READER_END_OF_STREAM;
  if (!s->ready) { /* park until the timer thread resumes us */
    s->due = now_us() + s->ms * 1000LL;
    pthread_mutex_lock(&mu);
    s->next = sleeping;
    sleeping = s;
    pthread_mutex_unlock(&mu);
    MHD_suspend_connection(s->c);
    return 0;
  }
  s->ready = 0;
  --s->left;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return snprintf(buf, max, "data: {\"t\": %lld}\n\n", (long long)tv.tv_sec * 1000000LL + tv.tv_usec);
}
static void sse_free(void* cls) { free(cls); }

static void* timer(void* arg) {
  for (;;) {
    usleep(1000);
    long long t = now_us();
    pthread_mutex_lock(&mu);
    struct Sse** p = &sleeping;
    while (*p) {
      struct Sse* s = *p;
      if (s->due <= t) {
        *p = s->next;
        s->ready = 1;
        MHD_resume_connection(s->c);
      } else
        p = &s->next;
    }
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

static enum MHD_Result handler(void* cls, struct MHD_Connection* c, const char* url, const char* method,
                               const char* version, const char* upload, size_t* upload_size, void** state) {
  if (*state == NULL) {
    *state = (void*)1;
    return MHD_YES;
  }
  if (*upload_size) {
    *upload_size = 0;
    return MHD_YES;
  }
  struct MHD_Response* r;
  if (strncmp(url, "/sse", 4) == 0) {
    struct Sse* s = calloc(1, sizeof *s);
    const char* n = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "n");
    const char* ms = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ms");
    s->left = n ? atoi(n) : 100;
    s->ms = ms ? atoi(ms) : 10;
    s->c = c;
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_reader, s, sse_free);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
  } else {
    static const char body[] = "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"object\":\"model\"}]}";
    r = MHD_create_response_from_buffer(sizeof body - 1, (void*)body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "application/json");
  }
  enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

int main(int argc, char** argv) {
  pthread_t t;
  pthread_create(&t, NULL, timer, NULL);
  struct MHD_Daemon* d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, atoi(argv[1]), NULL,
                                          NULL, handler, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768,
                                          MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024, MHD_OPTION_CONNECTION_TIMEOUT,
                                          (unsigned)10, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)4096, MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "start failed\n");
    return 1;
  }
  pause();
}
