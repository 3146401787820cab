#!/usr/bin/python3
"""The load of integrations/prosody/test/run.lua: real XMPP clients.

    load.py PORT DOMAIN CLIENTS INTERVAL SECONDS STARTED RESULT

CLIENTS slixmpp clients log in on 127.0.0.1:PORT as user1..userN@DOMAIN
(password "secret-userN", registered beforehand), available, then each
sends a chat message to the next one's bare JID every INTERVAL seconds for
SECONDS seconds, their starts spread over one interval.  STARTED is written
(the time, epoch seconds) when all are online and the load begins; RESULT
gets a JSON object: load_start, load_end, sent, delivered, missing (a few
ids), latency_max and latency_median (s, send to receipt), cpu (this process's
CPU seconds) and error.
Every wait is bounded: the logins (60 s), the deliveries after the load
(60 s), the disconnects (10 s).
"""

import asyncio
import json
import logging
import sys
import time

import slixmpp

PORT, DOMAIN = int(sys.argv[1]), sys.argv[2]
CLIENTS, INTERVAL, SECONDS = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
STARTED, RESULT = sys.argv[6], sys.argv[7]

logging.basicConfig(level=logging.ERROR)

sent = {}  # id -> time sent
received = {}  # id -> time received


class Client(slixmpp.ClientXMPP):
    def __init__(self, n):
        super().__init__(f"user{n}@{DOMAIN}/load", f"secret-user{n}")
        self.online = asyncio.get_event_loop().create_future()
        self.add_event_handler("session_start", self.on_start)
        self.add_event_handler("failed_auth", self.on_failed)
        self.add_event_handler("message", self.on_message)

    async def on_start(self, _):
        self.send_presence()
        await self.get_roster(timeout=30)
        if not self.online.done():
            self.online.set_result(True)

    def on_failed(self, _):
        if not self.online.done():
            self.online.set_exception(RuntimeError(f"{self.boundjid.bare}: authentication failed"))

    def on_message(self, msg):
        if msg["type"] == "chat" and msg["id"].startswith("m"):
            received.setdefault(msg["id"], time.time())


async def sender(clients, i, start):
    await asyncio.sleep(start + i * INTERVAL / CLIENTS - time.time())
    to = f"user{(i + 1) % CLIENTS + 1}@{DOMAIN}"
    k = 0
    while time.time() < start + SECONDS:
        mid = f"m{i + 1}-{k}"
        sent[mid] = time.time()
        m = clients[i].make_message(mto=to, mbody=f"message {k} from user{i + 1}", mtype="chat")
        m["id"] = mid
        m.send()
        k += 1
        # on time, not after the last send: a late wake-up does not slow the load
        await asyncio.sleep(max(0, start + i * INTERVAL / CLIENTS + k * INTERVAL - time.time()))


async def main():
    result = {"error": None}
    clients = [Client(n) for n in range(1, CLIENTS + 1)]
    try:
        for c in clients:
            c.connect(address=("127.0.0.1", PORT), use_ssl=False, force_starttls=False,
                      disable_starttls=True)
        await asyncio.wait_for(asyncio.gather(*(c.online for c in clients)), 60)
        start = time.time() + 0.5
        with open(STARTED, "w") as f:
            f.write(f"{start:.3f}\n")
        await asyncio.wait_for(asyncio.gather(*(sender(clients, i, start) for i in range(CLIENTS))),
                               SECONDS + 2 * INTERVAL + 30)
        result["load_start"], result["load_end"] = start, time.time()
        deadline = time.time() + 60
        while len(received) < len(sent) and time.time() < deadline:
            await asyncio.sleep(0.1)
    except Exception as e:  # reported in the result, for run.lua to fail with
        result["error"] = f"{type(e).__name__}: {e}"
    latencies = sorted(received[m] - sent[m] for m in received if m in sent)
    missing = [m for m in sent if m not in received]
    result.update(cpu=time.process_time(), sent=len(sent), delivered=len(received), missing=missing[:5],
                  latency_max=latencies[-1] if latencies else None,
                  latency_median=latencies[len(latencies) // 2] if latencies else None)
    for c in clients:
        c.disconnect(wait=0)
    await asyncio.sleep(1)
    with open(RESULT, "w") as f:
        json.dump(result, f)


asyncio.get_event_loop().run_until_complete(main())
