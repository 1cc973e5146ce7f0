"""Measures one HTTP-layer candidate (beast_proto.cc, mhd_proto.c) on loopback:
small-request latency and rate, server-sent-event lag, a half-closed request,
Content-Length with Transfer-Encoding, differing Content-Lengths, a header
flood, the memory and threads of 1,000 idle connections, and 300 connections
trickling a header one byte a second for 14 s. Prints one JSON line.

    python3 probe.py PORT SERVER_PID
"""
import asyncio, json, os, socket, statistics, sys, threading, time

PORT = int(sys.argv[1]); PID = int(sys.argv[2])
def rss_mib():
    for l in open(f"/proc/{PID}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) / 1024
def threads():
    for l in open(f"/proc/{PID}/status"):
        if l.startswith("Threads"): return int(l.split()[1])

def recv_all(s, timeout=3):
    s.settimeout(timeout); out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            out += d
    except (socket.timeout, ConnectionResetError): pass
    return out

res = {}
# 1. sequential keep-alive latency
s = socket.create_connection(("127.0.0.1", PORT)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
lat = []
req = b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n"
for i in range(3000):
    t = time.perf_counter(); s.sendall(req); buf = b""
    while b"}" not in buf: buf += s.recv(4096)
    lat.append(time.perf_counter() - t)
s.close()
res["json_p50_us"] = round(statistics.median(lat) * 1e6, 1)
res["json_p99_us"] = round(sorted(lat)[int(len(lat) * .99)] * 1e6, 1)

# 2. 32 concurrent keep-alive clients, requests/s
async def client(n):
    r, w = await asyncio.open_connection("127.0.0.1", PORT)
    for _ in range(n):
        w.write(req); await w.drain()
        buf = b""
        while b"}" not in buf: buf += await r.read(4096)
    w.close()
async def many():
    t = time.perf_counter(); await asyncio.gather(*(client(300) for _ in range(32))); return 32 * 300 / (time.perf_counter() - t)
res["json_32_clients_rps"] = round(asyncio.run(many()))

# 3. SSE lag, 32 streams x 200 events every 5 ms
async def sse():
    r, w = await asyncio.open_connection("127.0.0.1", PORT)
    w.write(b"GET /sse?n=200&ms=5 HTTP/1.1\r\nHost: x\r\n\r\n"); await w.drain()
    lags = []; buf = b""
    while True:
        d = await r.read(65536)
        if not d: break
        buf += d
        now = time.time() * 1e6
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            i = ev.find(b"data: ")
            if i >= 0: lags.append(now - json.loads(ev[i + 6:])["t"])
        if buf.endswith(b"0\r\n\r\n") or len(lags) >= 200: break
    w.close(); return lags
async def sses():
    return [l for ls in await asyncio.gather(*(sse() for _ in range(32))) for l in ls]
lags = asyncio.run(sses())
res["sse_events"] = len(lags); res["sse_lag_p50_us"] = round(statistics.median(lags)); res["sse_lag_p99_us"] = round(sorted(lags)[int(len(lags) * .99)])

# 4. half-close after the request
s = socket.create_connection(("127.0.0.1", PORT))
s.sendall(b"GET /sse?n=20&ms=10 HTTP/1.1\r\nHost: x\r\n\r\n"); s.shutdown(socket.SHUT_WR)
res["half_close_events_of_20"] = recv_all(s).count(b"data: "); s.close()

# 5. CL + TE smuggling
s = socket.create_connection(("127.0.0.1", PORT))
body = b"0\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n"
s.sendall(b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(body) + body)
out = recv_all(s, 2); res["cl_te_status_lines"] = [l.decode() for l in out.split(b"\r\n") if l.startswith(b"HTTP/1.1")]; s.close()
# differing duplicate Content-Length
s = socket.create_connection(("127.0.0.1", PORT))
s.sendall(b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x")
out = recv_all(s, 2); res["dup_cl_status_lines"] = [l.decode() for l in out.split(b"\r\n") if l.startswith(b"HTTP/1.1")]; s.close()

# 6. header flood
s = socket.create_connection(("127.0.0.1", PORT))
try:
    s.sendall(b"GET /json HTTP/1.1\r\nHost: x\r\n" + b"X-a: b\r\n" * 20000 + b"\r\n")
except OSError: pass
out = recv_all(s, 2); res["header_flood_status"] = out.split(b"\r\n", 1)[0].decode(); s.close()

# 7. idle RSS and threads with 1000 idle connections
base = rss_mib(); idle = [socket.create_connection(("127.0.0.1", PORT)) for _ in range(1000)]
time.sleep(1); res["rss_idle_1000_delta_mib"] = round(rss_mib() - base, 1); res["threads_idle_1000"] = threads()
for c in idle: c.close()
time.sleep(1)

# 8. slowloris: 300 connections, one header byte every second for 14 s; /json latency meanwhile
slow = [socket.create_connection(("127.0.0.1", PORT)) for _ in range(300)]
msg = b"GET /json HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
stop = time.monotonic() + 14; i = 0; worst = 0; alive = 300
while time.monotonic() < stop:
    for c in slow:
        try: c.send(msg[i % len(msg):i % len(msg) + 1])
        except OSError: pass
    i += 1
    t = time.perf_counter(); f = socket.create_connection(("127.0.0.1", PORT)); f.sendall(b"GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); recv_all(f, 5); f.close()
    worst = max(worst, time.perf_counter() - t)
    time.sleep(1)
closed = 0
for c in slow:
    c.setblocking(False)
    try:
        d = c.recv(4096)
        if d == b"" or d: closed += 1
    except BlockingIOError: pass
    except OSError: closed += 1
res["slowloris_worst_json_ms"] = round(worst * 1000, 1); res["slowloris_closed_after_14s_of_300"] = closed
print(json.dumps(res))
