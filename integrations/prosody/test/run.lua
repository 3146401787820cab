-- ctest prosody.mod_perfmon: mod_perfmon in a real Prosody, checked against
-- a module's own account of its CPU time.
--
--   lua5.4 integrations/prosody/test/run.lua SOURCE_DIR BUILD_DIR
--   lua5.4 integrations/prosody/test/run.lua SOURCE_DIR BUILD_DIR cost [PAIRS]
--   lua5.4 integrations/prosody/test/run.lua SOURCE_DIR BUILD_DIR instructions
--   lua5.4 integrations/prosody/test/run.lua SOURCE_DIR BUILD_DIR load
--   lua5.4 integrations/prosody/test/run.lua SOURCE_DIR BUILD_DIR load-cost [PAIRS [CONFIGS]]
--
-- Starts a throwaway Prosody in the foreground on 127.0.0.1 (free high
-- ports, its own config and data in a temporary directory, no TLS) with
-- mod_perfmon and mod_perfmon_test, which burns ~20 ms of CPU per message
-- and counts it with os.clock.  Registers two accounts in-band, sends
-- MESSAGES messages from one to the other over fresh sessions (reloading
-- mod_perfmon_test half-way), then checks: no error in Prosody's log,
-- every message delivered, mod_perfmon_test's self time as /metrics serves
-- it within 10% of its own count and the highest of all modules, the same
-- for its instance on the VirtualHost that got the messages and nothing for
-- the idle one's (the admin shell's table, which lists it first), a
-- warning about it and about no other module; unloaded, it leaves the
-- table.  Then the same with mod_perfmon loaded into the running server
-- after every other module, and on the select backend; and servers with
-- perfmon_mode or perfmon_diagnosis_mode set to a mode mod_perfmon does
-- not know: an error in the log naming the option, and no mod_perfmon.
-- Exits 77 (skipped) without Prosody.  Every wait is bounded; the server
-- is stopped by its PID.
--
-- "cost" (bench/prosody runs it) measures what mod_perfmon costs that
-- server instead, mod_perfmon_test burning nothing, COST_MESSAGES messages
-- a server: the server's CPU time per message (/proc/PID/schedstat)
-- without perfmon, with the no-op call/return hook of bench/noophook.c on
-- every thread (bench/mod_noophook.lua; BUILD_DIR needs noophook.so), with
-- mod_perfmon and with mod_perfmon in perfmon_mode = "sampled" (n/a where
-- the core has no such mode), in 2 x PAIRS (5) rounds of one server each,
-- the order reversed every other round (bench/stats.lua), and the medians
-- of the ratios over pairs of rounds.  "instructions" (bench/prosody
-- --instructions) counts the server's instructions per message instead,
-- one server of each under callgrind.
--
-- "load" (ctest prosody.load) puts the server under load: 20 slixmpp
-- clients (load.py, /usr/bin/python3; exits 77 without slixmpp) for 45 s,
-- some twenty bundled modules, a MUC, mod_perfmon in sampled mode and
-- mod_perfmon_test doing call-heavy work on every message, and checks: a
-- warning naming perfmon_test within 20 s of the load's start and none
-- naming another module, perfmon_test first by self time and within 15%
-- of its own clock, no event of 512 ms or more while the load runs (the
-- top bucket of /metrics' histogram of CPU time per event), every message
-- delivered, and a diagnosis of perfmon_test, sampled, that found its
-- time.  "load-cost" (bench/prosody --load) measures the server's
-- CPU per message under that load for none, sampled (with and without
-- the diagnosis) and exact.

local socket = require "socket"
local mime = require "mime"

local SOURCE, BUILD, MODE = arg[1], arg[2], arg[3]
assert(SOURCE and BUILD and (MODE == nil or MODE == "cost" or MODE == "instructions" or MODE == "load"
  or MODE == "load-cost"), "usage: lua5.4 run.lua SOURCE_DIR BUILD_DIR [cost [PAIRS] | instructions | load | load-cost [PAIRS]]")

local MESSAGES, PER_SESSION = 300, 10
local COST_MESSAGES, COST_PER_SESSION = 3000, 100
local HOST, OTHER_HOST = "localhost", "other.localhost"
local IO_TIMEOUT = 10 -- seconds for any one read
local TOLERANCE = 0.10

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return (out:gsub("%s+$", ""))
end

local function fail(fmt, ...) error(fmt:format(...), 0) end

local function check(ok, fmt, ...) if not ok then fail(fmt, ...) end end

local function free_port()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

local function read_file(path)
  local f = io.open(path)
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

---------------------------------------------------------------------------
-- The server
---------------------------------------------------------------------------

-- opts: perfmon (load mod_perfmon), mode (its perfmon_mode), rate_us (its
-- perfmon_rate_us), diagnosis, diagnosis_mode and rediagnose (its
-- perfmon_diagnosis, perfmon_diagnosis_mode and perfmon_rediagnose), noop (load
-- mod_noophook), iterations (mod_perfmon_test's burn), jank_ms (the
-- watcher's threshold; 10 ms), cpu_percent (its perfmon_cpu_percent),
-- callgrind (run under it).
local function write_config(srv, opts)
  local f = assert(io.open(srv.dir .. "/prosody.cfg.lua", "w"))
  local d = srv.dir
  f:write(([[
run_as_root = true -- CI runs as root; Prosody would switch to its own user
pidfile = "%s/prosody.pid"
data_path = "%s/data"
certificates = "%s/certs"
admin_socket = "%s/prosody.sock"
plugin_paths = { "%s/integrations/prosody", "%s/integrations/prosody/test", "%s/bench" }
modules_enabled = { %s%s"roster", "saslauth", "disco", "register", "ping",
  "http", "http_openmetrics", "admin_shell", "perfmon_test"%s }
modules_disabled = { "s2s", "offline" }
interfaces = { "127.0.0.1" }
c2s_ports = { %d }
http_ports = { %d }
http_interfaces = { "127.0.0.1" }
https_ports = {}
statistics = "internal"
statistics_interval = "manual"
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
allow_registration = true
min_seconds_between_registrations = 0
perfmon_jank_threshold = %d -- ms: each event that handles a message burns ~20
perfmon_test_iterations = %d
perfmon_test_host_ms = %d
perfmon_test_calls = %d
%s
log = { { levels = { min = "info" }, to = "file", filename = "%s/prosody.log" } }
VirtualHost "%s"
VirtualHost "%s" -- idle: its instance of perfmon_test must be charged nothing
%s
]]):format(d, d, d, d, SOURCE, SOURCE, SOURCE, opts.perfmon and '"perfmon", ' or "",
    opts.noop and '"noophook", ' or "",
    opts.modules and ', "' .. table.concat(opts.modules, '", "') .. '"' or "",
    srv.c2s_port, srv.http_port, opts.jank_ms or 10, opts.iterations,
    opts.host_ms or 0, opts.calls or 0,
    (opts.mode and ("perfmon_mode = %q"):format(opts.mode) or "")
      .. (opts.rate_us and ("\nperfmon_rate_us = %s"):format(opts.rate_us) or "")
      .. (opts.timer and ("\nperfmon_timer = %q"):format(opts.timer) or "")
      .. (opts.cpu_percent and ("\nperfmon_cpu_percent = %s"):format(opts.cpu_percent) or "")
      .. (opts.diagnosis and ("\nperfmon_diagnosis = %s"):format(opts.diagnosis) or "")
      .. (opts.diagnosis_mode and ("\nperfmon_diagnosis_mode = %q"):format(opts.diagnosis_mode) or "")
      .. (opts.rediagnose and ("\nperfmon_rediagnose = %s"):format(opts.rediagnose) or "")
      .. (opts.backend and ("\nnetwork_backend = %q"):format(opts.backend) or ""),
    d, HOST, OTHER_HOST, opts.modules and ('Component "conference.%s" "muc"'):format(HOST) or ""))
  f:close()
end

-- perfmon's paths, for a command.
local LUA_ENV = ("LUA_PATH_5_4='%s/lua/?.lua;%s/lua/?/init.lua;;' LUA_CPATH_5_4='%s/?.so;;'")
  :format(SOURCE, SOURCE, BUILD)

-- Under callgrind (the "instructions" cost), instrumented only from
-- callgrind_control -i on: the start, uninstrumented, takes some seconds.
-- Prosody's script starts with #!/usr/bin/env lua5.4, and valgrind would
-- follow env, not lua5.4: lua5.4 runs it.
local CALLGRIND = "valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file='%s/callgrind.out' lua5.4"

-- Returns the PID of the server it started (the PID of valgrind's process,
-- which is the server's, under callgrind).
local function start_server(dir, callgrind)
  local pid = sh(("%s %s %s -F --config '%s/prosody.cfg.lua' >'%s/stdout' 2>&1 & echo $!")
    :format(LUA_ENV, callgrind and CALLGRIND:format(dir) or "", callgrind and sh("command -v prosody") or "prosody",
      dir, dir))
  return assert(tonumber(pid), "no PID for prosody: " .. pid)
end

local function alive(pid) return os.execute(("kill -0 %d 2>/dev/null"):format(pid)) == true end

local function wait_for_port(srv, seconds)
  for _ = 1, seconds * 10 do
    check(alive(srv.pid), "prosody exited at start:\n%s\n%s", read_file(srv.dir .. "/stdout"),
      read_file(srv.dir .. "/prosody.log"))
    local c = socket.connect("127.0.0.1", srv.c2s_port)
    if c then c:close(); return end
    socket.sleep(0.1)
  end
  fail("prosody did not listen on port %d within %d s", srv.c2s_port, seconds)
end

local function stop_server(pid)
  os.execute(("kill %d 2>/dev/null"):format(pid))
  for _ = 1, 100 do -- 10 s
    if not alive(pid) then return end
    socket.sleep(0.1)
  end
  os.execute(("kill -9 %d 2>/dev/null"):format(pid))
end

-- The server's CPU time in seconds (the kernel's count, in ns).
local function server_cpu(pid)
  return tonumber(read_file(("/proc/%d/schedstat"):format(pid)):match("^%d+")) / 1e9
end

---------------------------------------------------------------------------
-- A minimal XMPP client: plain TCP, SASL PLAIN, bind
---------------------------------------------------------------------------

local Client = {}
Client.__index = Client

-- Reads until the buffer matches pattern; returns the captures.
function Client:expect(pattern, what)
  local deadline = socket.gettime() + IO_TIMEOUT
  while true do
    local r = { self.buf:match(pattern) }
    if #r > 0 then return table.unpack(r) end
    check(not self.buf:find("<stream:error", 1, true) and not self.buf:find("<failure", 1, true),
      "%s: the server refused: %s", what, self.buf)
    check(socket.gettime() < deadline, "%s: nothing within %d s; got: %s", what, IO_TIMEOUT, self.buf)
    -- receive(n) waits for n bytes: a short timeout returns what came
    local data, err, partial = self.sock:receive(4096)
    data = data or partial
    check(err ~= "closed", "%s: connection closed; got: %s", what, self.buf)
    self.buf = self.buf .. (data or "")
  end
end

-- Takes what has arrived without waiting.
function Client:drain()
  self.sock:settimeout(0)
  local data, _, partial = self.sock:receive(65536)
  self.sock:settimeout(0.01)
  self.buf = self.buf .. (data or partial or "")
end

function Client:send(s) assert(self.sock:send(s)) end

function Client:open_stream()
  self.buf = ""
  self:send(("<?xml version='1.0'?><stream:stream to='%s' xmlns='jabber:client' "
    .. "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"):format(HOST))
  self:expect("</stream:features>", "stream features")
  self.buf = ""
end

local function connect(port)
  local sock = assert(socket.connect("127.0.0.1", port))
  sock:settimeout(0.01)
  local c = setmetatable({ sock = sock, buf = "" }, Client)
  c:open_stream()
  return c
end

function Client:register(user, password)
  self:send(("<iq type='set' id='reg'><query xmlns='jabber:iq:register'><username>%s</username>"
    .. "<password>%s</password></query></iq>"):format(user, password))
  self:expect("<iq[^>]*type=['\"]result['\"][^>]*>", "registering " .. user)
  self.buf = ""
end

function Client:login(user, password)
  self:send(("<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>%s</auth>")
    :format(mime.b64("\0" .. user .. "\0" .. password)))
  self:expect("<success", "authenticating " .. user)
  self:open_stream()
  self:send("<iq type='set' id='bind'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
    .. "<resource>test</resource></bind></iq>")
  self:expect("</jid>", "binding " .. user)
  self.buf = ""
end

function Client:close()
  self:send("</stream:stream>")
  pcall(self.expect, self, "</stream:stream>", "closing")
  self.sock:close()
end

local function session(port, user, password)
  local c = connect(port)
  c:login(user, password)
  return c
end

-- The ids of the messages received so far: "<message ... id='mN'".
local function received_ids(buf, into)
  for tag in buf:gmatch("<message[^>]*>") do
    local n = tag:match("id=['\"]m(%d+)['\"]")
    if n then into[tonumber(n)] = true end
  end
end

local function count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

---------------------------------------------------------------------------
-- Reading the figures back
---------------------------------------------------------------------------

-- { module = self seconds } from /metrics.
local function self_times(http_port)
  local body, code = require("socket.http").request(("http://127.0.0.1:%d/metrics"):format(http_port))
  check(code == 200, "GET /metrics: %s", tostring(code))
  local t = {}
  for name, v in body:gmatch('prosody_mod_perfmon__self_cpu_seconds_total{module="([^"]+)"} (%S+)') do
    t[name] = tonumber(v)
  end
  return t, body
end

local function shell(dir, ...)
  return sh(("timeout 30 prosodyctl --config '%s/prosody.cfg.lua' shell %s 2>&1"):format(dir, table.concat({ ... }, " ")))
end

-- { [label] = self ms } of the rows of perfmon_test and its instances in
-- the shell's table, and the label of the first row.
local function table_rows(shown)
  local first = shown:match("module[^\n]*\n(%S+)")
  local rows, inside = {}, false
  for line in shown:gmatch("[^\n]+") do
    local label, self_ms = line:match("^(%s*%S+)%s+([%d.]+)")
    if label and not label:match("^%s") then inside = label == "perfmon_test" end
    if label and inside then rows[label:match("%S+")] = tonumber(self_ms) end
  end
  return rows, first
end

---------------------------------------------------------------------------
-- The exchange
---------------------------------------------------------------------------

local function register_users(port)
  for _, user in ipairs { "alice", "bob" } do
    local c = connect(port)
    c:register(user, "secret-" .. user)
    c:close()
  end
end

-- Sends messages from alice to bob, per_session on each fresh session of
-- alice's, calls halfway() after half of them, and checks that bob got
-- every one.
local function exchange(port, messages, per_session, halfway)
  local bob = session(port, "bob", "secret-bob")
  bob:send("<presence/>") -- available, so that messages to bob@ reach him
  for first = 1, messages, per_session do
    local alice = session(port, "alice", "secret-alice")
    for n = first, math.min(first + per_session - 1, messages) do
      alice:send(("<message to='bob@%s' type='chat' id='m%d'><body>%d</body></message>"):format(HOST, n, n))
    end
    alice:close()
    bob:drain()
    if halfway and first + per_session - 1 == messages // 2 then halfway() end
  end
  local got, deadline = {}, socket.gettime() + 60
  repeat
    received_ids(bob.buf, got)
    if count(got) < messages then bob:drain(); socket.sleep(0.05) end
  until count(got) == messages or socket.gettime() > deadline
  received_ids(bob.buf, got)
  bob:close()
  check(count(got) == messages, "bob received %d of %d messages", count(got), messages)
end

-- Runs fn(srv) against a server of its own, with the two accounts; stops
-- it and removes its directory however fn ends.  Returns fn's result and
-- the server's log.
local function with_server(opts, fn)
  local srv = { dir = sh("mktemp -d /tmp/perfmon-prosody.XXXXXX"), c2s_port = free_port(),
    http_port = free_port() }
  os.execute(("mkdir -p '%s/data' '%s/certs'"):format(srv.dir, srv.dir))
  write_config(srv, opts)
  srv.pid = start_server(srv.dir, opts.callgrind)
  local ok, result = pcall(function()
    wait_for_port(srv, opts.callgrind and 120 or 15)
    register_users(srv.c2s_port)
    return fn(srv)
  end)
  stop_server(srv.pid)
  local log = read_file(srv.dir .. "/prosody.log")
  os.execute(("rm -rf '%s'"):format(srv.dir))
  if not ok then fail("%s\n--- prosody.log:\n%s", result, log) end
  return result, log
end

---------------------------------------------------------------------------
-- The test
---------------------------------------------------------------------------

-- The figures, against the test module's own count.
local function check_figures(srv, tolerance)
  tolerance = tolerance or TOLERANCE
  local alice = session(srv.c2s_port, "alice", "secret-alice")
  alice:send(("<message to='perfmon-report@%s' id='report'><body>report</body></message>"):format(HOST))
  local burnt, burns = alice:expect("<body>([%d.]+) (%d+)</body>", "the test module's report")
  alice:close()
  burnt, burns = tonumber(burnt), tonumber(burns)
  check(burns == MESSAGES, "the test module burnt for %d messages, not %d", burns, MESSAGES)

  local selfs, metrics = self_times(srv.http_port)
  local charged = selfs.perfmon_test
  check(charged, "/metrics lists no perfmon_test:\n%s", metrics)
  print(("prosody test: mod_perfmon_test burnt %.3f s by its own os.clock, perfmon charged %.3f s of self time (%+.1f%%)")
    :format(burnt, charged, 100 * (charged - burnt) / burnt))
  check(math.abs(charged - burnt) <= tolerance * burnt, "self time %.3f s is not within %d%% of %.3f s",
    charged, tolerance * 100, burnt)
  for name, s in pairs(selfs) do
    check(name == "perfmon_test" or s < charged, "module %s (%.3f s) is above perfmon_test", name, s)
  end

  -- folded: perfmon_test first, its two instances in one row; unfolded
  -- (any argument: prosodyctl shell perfmon show all), each under it
  local folded = shell(srv.dir, "perfmon", "show")
  check(folded:match("module[^\n]*\nperfmon_test %(2%) ") and not folded:match("\n%s+@"),
    "the shell's table does not fold perfmon_test's instances under it:\n%s", folded)
  local shown = shell(srv.dir, "perfmon", "show", "all")
  print(shown)
  local rows, first_row = table_rows(shown)
  check(first_row == "perfmon_test", "the shell's table lists %s first, not perfmon_test:\n%s",
    tostring(first_row), shown)
  local here, idle = rows["@" .. HOST], rows["@" .. OTHER_HOST]
  check(here and math.abs(here / 1000 - burnt) <= tolerance * burnt,
    "the instance on %s is not charged within %d%% of %.3f s:\n%s", HOST, tolerance * 100, burnt, shown)
  check(idle and idle / 1000 < 0.01 * burnt, "the idle instance on %s is charged:\n%s", OTHER_HOST, shown)
end

-- No error; and, with events (jank is detected in events), a warning
-- about perfmon_test alone, which says where its time went: where_pattern
-- (the end of the warning), or at least a place or too few samples.
local function check_log(log, events, where_pattern)
  for line in log:gmatch("[^\n]+") do
    check(not line:match("\terror\t"), "an error in Prosody's log: %s", line)
  end
  if not events then return end
  local warned = {}
  for name in log:gmatch("plugin '([^']+)' is slowing things down") do warned[name] = true end
  check(warned.perfmon_test, "no warning about perfmon_test in the log:\n%s", log)
  for name in pairs(warned) do
    check(name == "perfmon_test", "a warning about another module, %s:\n%s", name, log)
  end
  where_pattern = where_pattern
    or "; [^\n]* %(%d+" -- a place (p% of n samples), or too few samples to say where (n in ...)
  check(log:match("plugin 'perfmon_test' is slowing things down[^\n]*" .. where_pattern),
    "no warning about perfmon_test says where (%q):\n%s", where_pattern, log)
  check(log:match("mod_perfmon\tinfo\tone perfmon event per network callback and timer"),
    "mod_perfmon does not say what its events are:\n%s", log)
  print(log:match("[^\n]*mod_perfmon\t[^\n]*one perfmon event[^\n]*"))
  print(log:match("[^\n]*plugin 'perfmon_test' is slowing[^\n]*"))
end

-- mod_perfmon enabled in the configuration (Prosody loads modules in no
-- set order: perfmon_test comes before or after it), and perfmon_test
-- reloaded half-way, after it.
local function test_enabled()
  local _, log = with_server({ perfmon = true, iterations = 1500000 }, function(srv)
    exchange(srv.c2s_port, MESSAGES, PER_SESSION, function()
      local out = shell(srv.dir, "module", "reload", "perfmon_test")
      check(out:match("Module reloaded on 2 hosts"), "reloading perfmon_test: %s", out)
    end)
    print(("prosody test: %d messages delivered over %d sessions"):format(MESSAGES, MESSAGES // PER_SESSION))
    check_figures(srv)
    -- a reload of mod_perfmon repeats no warning
    local function warnings()
      return select(2, read_file(srv.dir .. "/prosody.log"):gsub("is slowing things down", ""))
    end
    local before = warnings()
    local out = shell(srv.dir, "module", "reload", "perfmon")
    check(out:match("Module reloaded"), "reloading perfmon: %s", out)
    socket.sleep(3)
    check(warnings() == before, "the reload of mod_perfmon repeated a warning:\n%s", read_file(srv.dir .. "/prosody.log"))
    out = shell(srv.dir, "module", "unload", "perfmon_test")
    check(out:match("Module unloaded from 2 hosts"), "unloading perfmon_test: %s", out)
    local shown = shell(srv.dir, "perfmon", "show")
    check(not shown:match("\n%s*perfmon_test%s"), "perfmon_test is listed after its unload:\n%s", shown)
  end)
  -- where its time went: the line of burn()'s loop in mod_perfmon_test.lua
  local n = 0
  for line in io.lines(SOURCE .. "/integrations/prosody/test/mod_perfmon_test.lua") do
    n = n + 1
    if line:match("^%s*for i = 1, iterations do") then break end
  end
  check_log(log, true, ("; [%%d.]+ m?s in its own burn at [^\n]*perfmon_test%%.lua:%d %%(%%d+%%%% of %%d+ samples%%)")
    :format(n))
end

-- mod_perfmon loaded from the admin shell into a running server: every
-- other module, perfmon_test's two instances among them, ran before it.
-- The c2s service listens already: its listener's callbacks become events
-- all the same, so jank warnings work as when it is enabled.
local function test_loaded_late()
  local _, log = with_server({ perfmon = false, iterations = 1500000 }, function(srv)
    local out = shell(srv.dir, "module", "load", "perfmon")
    check(out:match("Module loaded"), "loading perfmon: %s", out)
    exchange(srv.c2s_port, MESSAGES, PER_SESSION)
    print(("prosody test (mod_perfmon loaded last): %d messages delivered over %d sessions")
      :format(MESSAGES, MESSAGES // PER_SESSION))
    check_figures(srv)
  end)
  check_log(log, true)
end

-- The select backend (network_backend = "select"): the same listeners and
-- timers, called from its own loop: events, figures and the warning as
-- with epoll.
local function test_select()
  local _, log = with_server({ perfmon = true, iterations = 1500000, backend = "select" }, function(srv)
    exchange(srv.c2s_port, MESSAGES, PER_SESSION)
    print(("prosody test (select backend): %d messages delivered"):format(MESSAGES))
    check_figures(srv)
  end)
  check(log:match("one perfmon event per network callback and timer %(select backend%)"),
    "mod_perfmon on select does not say so:\n%s", log)
  -- Prosody 0.12.3's own: select's pause() of a connection already closed
  -- (net.http.server's runner, after GET /metrics) raises "table index is
  -- nil", with mod_perfmon or without it
  log = log:gsub("[^\n]*\terror\tTop%-level error, please report:\n[^\n]*server_select%.lua:%d+: table index is nil\n"
    .. "[^\n]*\terror\t\n", "")
  check_log(log, true)
end

-- perfmon_mode = "sampled": the shell's table counts each module's samples
-- (a sampled monitor counts no ticks), and perfmon_test, the module that
-- burns, is made of samples of about the timer's period each (4 ms; a few
-- times that where a loaded kernel holds the tick timer's signals back).
-- No event janks and no module is busy enough to warn about: a warning
-- would open the diagnosis, a sampled monitor at 1 ms for 10 s, whose
-- samples would count too.
local function test_sampled()
  local opts = { perfmon = true, mode = "sampled", iterations = 200000, jank_ms = 1000,
    cpu_percent = 100 }
  local shown = with_server(opts, function(srv)
    exchange(srv.c2s_port, MESSAGES, PER_SESSION)
    return shell(srv.dir, "perfmon", "show", "all")
  end)
  print(shown)
  check(shown:match("module%s+self ms%s+cpu ms%s+share%s+samples%s"),
    "the sampled server's table has no samples column:\n%s", shown)
  local self_ms, samples = shown:match("\nperfmon_test%s+([%d.]+)%s+[%d.]+%s+[%d.]+%%%s+(%d+)")
  self_ms, samples = tonumber(self_ms), tonumber(samples)
  check(self_ms and samples and samples > 0 and self_ms / samples > 0.5 and self_ms / samples < 50,
    "perfmon_test's row is not made of samples of a few ms each:\n%s", shown)
  print(("prosody test: sampled: perfmon_test %.1f ms of self time in %d samples"):format(self_ms, samples))
end

-- A setting mod_perfmon cannot take (opts: the server's): it says so in
-- the log, naming the option, and does not load; the server runs without
-- it.  setting: the line of configuration, for the messages.
local function test_refused(opts, option, setting)
  opts.perfmon, opts.iterations = true, 0
  local shown, log = with_server(opts, function(srv)
    return shell(srv.dir, "perfmon", "show")
  end)
  local errors = {}
  for line in log:gmatch("[^\n]*\terror\t[^\n]*") do errors[#errors + 1] = line end
  check(#errors > 0 and errors[1]:match("mod_perfmon") and errors[1]:match(option),
    "no error naming mod_perfmon and %s for %s:\n%s", option, setting, log)
  check(not shown:match("CPU time per module"), "mod_perfmon loaded with %s:\n%s", setting, shown)
  print(("prosody test: %s: %s"):format(setting, errors[1]))
end

-- A module slow through Prosody's own code: ~20 ms a message of
-- util.stanza and util.jid calls (library groups, mod_perfmon's "prosody"
-- and "util"), which must be that module's self time, within 15% of its
-- own clock, and the only module warned about; the libraries' own self
-- time stays below it.
local function test_host_code()
  local _, log = with_server({ perfmon = true, iterations = 0, host_ms = 20 }, function(srv)
    exchange(srv.c2s_port, MESSAGES, PER_SESSION)
    print(("prosody test (work in util.stanza and util.jid): %d messages delivered"):format(MESSAGES))
    check_figures(srv, 0.15)
  end)
  -- and the warning names a function of util's and the line that called it
  check_log(log, true, "; [%d.]+ m?s in util's [^\n]*, called from [^\n]*perfmon_test%.lua:%d+ %(%d+%% of")
end

local function test()
  test_host_code()
  test_enabled()
  test_loaded_late()
  test_select()
  test_sampled()
  -- a mode it does not know, a sampled monitor's period out of range
  -- (perfmon.monitor's error), a timer it does not know, a diagnosis mode
  -- it does not know and diagnoses closer together than they last
  test_refused({ mode = "fast" }, "perfmon_mode", 'perfmon_mode = "fast"')
  test_refused({ mode = "sampled", rate_us = 50 }, "rate_us", "perfmon_rate_us = 50")
  test_refused({ mode = "sampled", timer = "precise" }, "perfmon_timer", 'perfmon_timer = "precise"')
  test_refused({ mode = "sampled", diagnosis_mode = "slow" }, "perfmon_diagnosis_mode",
    'perfmon_diagnosis_mode = "slow"')
  test_refused({ mode = "sampled", rediagnose = 5 }, "perfmon_rediagnose", "perfmon_rediagnose = 5")
  print("prosody test: OK")
end

---------------------------------------------------------------------------
-- Under load: 20 real clients (ctest prosody.load; bench/prosody --load)
---------------------------------------------------------------------------

-- The load: CLIENTS slixmpp clients (load.py), each sending a chat message
-- to the next every INTERVAL s for SECONDS s, to a server with some twenty
-- bundled modules, a MUC and perfmon_test doing CALLS calls of a small
-- function a message (call-heavy: what the exact mode's hook costs most
-- on).  What the box can do sets the rate: with 8 programs on its 2 CPUs
-- (load average 12), the kernel's autogroups give a session some 25% of
-- a CPU, nice or not.  A message every 0.6 s each with ~10 ms of
-- perfmon_test a message needed 56% of a CPU: the server got 23%, fell 43
-- s behind, and a connection's read then held dozens of messages, one
-- callback and one event of more than 512 ms (22 of them).  A message
-- every 1 s each with ~3 ms a message needs some 12%.
local PYTHON = "/usr/bin/python3" -- Debian's, with python3-slixmpp
local LOAD = { clients = 20, interval = 1.0, seconds = 45, calls = 120000 }
local LOAD_MODULES = { "carbons", "mam", "private", "vcard4", "vcard_legacy", "version", "uptime",
  "time", "blocklist", "pep", "bookmarks", "csi_simple", "smacks", "lastactivity", "server_contact_info" }
local LOAD_OPTS = { iterations = 0, calls = LOAD.calls, modules = LOAD_MODULES }

local function has_slixmpp()
  return sh(("%s -c 'import slixmpp' 2>&1 && echo yes"):format(PYTHON)) == "yes"
end

-- The process's events (whole server) of at least 512 ms, and all of
-- them, from /metrics' histogram of CPU time per event.
local function long_events(http_port)
  local body, code = require("socket.http").request(("http://127.0.0.1:%d/metrics"):format(http_port))
  check(code == 200, "GET /metrics: %s", tostring(code))
  local top = body:match('prosody_mod_perfmon__event_seconds_bucket{le="0.512"} (%S+)')
  local all = body:match("prosody_mod_perfmon__event_seconds_count (%S+)")
  check(top and all, "/metrics has no prosody_mod_perfmon__event_seconds histogram:\n%s", body)
  return tonumber(all) - tonumber(top), tonumber(all)
end

-- Runs the load against srv; returns load.py's result, the warnings in
-- Prosody's log each with the time it was seen (polled every 0.25 s), the
-- load's start, and the server's CPU seconds over the load.  on_start(srv)
-- runs when the load starts, on_end(srv) when it has ended.
local function run_load(srv, opts, on_start, on_end)
  for n = 1, opts.clients do
    local c = connect(srv.c2s_port)
    c:register("user" .. n, "secret-user" .. n)
    c:close()
  end
  local started, result = srv.dir .. "/started", srv.dir .. "/result.json"
  local pid = tonumber(sh(("%s '%s/integrations/prosody/test/load.py' %d %s %d %s %s '%s' '%s' >'%s/load.out' 2>&1 & echo $!")
    :format(PYTHON, SOURCE, srv.c2s_port, HOST, opts.clients, opts.interval, opts.seconds, started, result, srv.dir)))
  local warnings, seen, start, cpu0 = {}, 0, nil, nil
  local deadline = socket.gettime() + opts.seconds + 240 -- logins, deliveries, disconnects: bounded in load.py
  local ok, err = pcall(function()
    while read_file(result) == "" or not read_file(result):match("}%s*$") do
      check(socket.gettime() < deadline, "the load did not end within %d s:\n%s", opts.seconds + 240,
        read_file(srv.dir .. "/load.out"))
      check(alive(pid) or read_file(result) ~= "", "load.py exited without a result:\n%s", read_file(srv.dir .. "/load.out"))
      check(alive(srv.pid), "prosody exited during the load")
      if not start and read_file(started):match("%d") then
        start, cpu0 = tonumber(read_file(started)), server_cpu(srv.pid)
        if on_start then on_start(srv) end
      end
      local log, n = read_file(srv.dir .. "/prosody.log"), 0
      for line in log:gmatch("[^\n]*is slowing things down[^\n]*") do
        n = n + 1
        if n > seen then warnings[#warnings + 1] = { at = socket.gettime(), line = line } end
      end
      seen = n
      socket.sleep(0.25)
    end
  end)
  if not ok then
    os.execute(("kill %d 2>/dev/null"):format(pid))
    error(err, 0)
  end
  local cjson = require("cjson")
  local r = cjson.decode(read_file(result))
  for k, v in pairs(r) do if v == cjson.null then r[k] = nil end end
  check(not r.error, "the load failed: %s\n%s", tostring(r.error), read_file(srv.dir .. "/load.out"))
  check(start, "the load ended before it was seen to start")
  local cpu = server_cpu(srv.pid) - cpu0
  if on_end then on_end(srv) end
  return r, warnings, start, cpu
end

-- The test: mod_perfmon in sampled mode, its defaults but the busy
-- module's share: perfmon_test takes some 6% of the thread (20 messages a
-- second, ~3 ms each), every other module under 1.5% (measured), so
-- perfmon_cpu_percent = 3.  No event reaches the jank threshold (50 ms)
-- while the server keeps up.
local function test_load()
  local opts = setmetatable({ perfmon = true, mode = "sampled", jank_ms = 50, cpu_percent = 3 },
    { __index = LOAD_OPTS })
  local figures = {}
  local _, log = with_server(opts, function(srv)
    local r, warnings, start, cpu = run_load(srv, LOAD, function(s)
      figures.long0 = long_events(s.http_port)
    end, function(s)
      figures.long1, figures.events = long_events(s.http_port)
    end)
    figures.r, figures.warnings, figures.start, figures.cpu = r, warnings, start, cpu
    local wall = r.load_end - start
    print(("prosody load: %d clients, a message every %.1f s each, %.0f s: %d sent, %d delivered; latency median %.3f s, max %.3f s")
      :format(LOAD.clients, LOAD.interval, wall, r.sent, r.delivered, r.latency_median or -1, r.latency_max or -1))
    print(("prosody load: the server's CPU %.1f s over the load (%.0f%% of one CPU), %.2f ms a message; the clients' %.1f s; load average %s")
      :format(cpu, 100 * cpu / wall, 1000 * cpu / r.sent, r.cpu or -1, sh("cut -d' ' -f1-3 /proc/loadavg")))
    check(r.delivered == r.sent and r.sent > 0, "%d of %d messages delivered (missing: %s)", r.delivered, r.sent,
      table.concat(r.missing, " "))
    check(r.sent >= 0.9 * LOAD.clients * LOAD.seconds / LOAD.interval, "only %d messages sent", r.sent)
    -- the slow module first by self time, within 15% of its own clock
    local alice = session(srv.c2s_port, "alice", "secret-alice")
    alice:send(("<message to='perfmon-report@%s' id='report'><body>report</body></message>"):format(HOST))
    local burnt = tonumber((alice:expect("<body>([%d.]+) %d+</body>", "the test module's report")))
    alice:close()
    local selfs, body = self_times(srv.http_port)
    local charged = selfs.perfmon_test or 0
    -- its jank as a histogram in seconds, cumulative, +Inf its count; and
    -- its instance on the VirtualHost that got the messages, by host
    local last, lines = 0, {}
    for le, n in body:gmatch('prosody_mod_perfmon__self_jank_seconds_bucket{module="perfmon_test",le="([^"]+)"} (%S+)') do
      check(tonumber(n) >= last, "perfmon_test's jank histogram is not cumulative:\n%s", body)
      last, lines[#lines + 1] = tonumber(n), le .. ":" .. n
    end
    local total = body:match('prosody_mod_perfmon__self_jank_seconds_count{module="perfmon_test"} (%S+)')
    check(#lines == 11 and lines[11]:match("^%+Inf:") and tonumber(total) == last,
      "perfmon_test's jank histogram is not 10 buckets and +Inf holding its count:\n%s", body)
    check(body:match('prosody_mod_perfmon__instance_self_cpu_seconds_total{module="perfmon_test",host="' .. HOST .. '"} '),
      "no instance series with host=%q:\n%s", HOST, body)
    print("prosody load: perfmon_test's self jank histogram (le:events): " .. table.concat(lines, " "))
    print(("prosody load: mod_perfmon_test burnt %.3f s by its own os.clock, perfmon charged %.3f s of self time (%+.1f%%)")
      :format(burnt, charged, 100 * (charged - burnt) / burnt))
    check(math.abs(charged - burnt) <= 0.15 * burnt, "self time %.3f s is not within 15%% of %.3f s", charged, burnt)
    for name, v in pairs(selfs) do
      check(name == "perfmon_test" or v < charged, "module %s (%.3f s) is above perfmon_test", name, v)
    end
    print(shell(srv.dir, "perfmon", "show"))
  end)
  -- a warning naming perfmon_test within 20 s of the load's start, none
  -- naming another module
  local first
  for _, w in ipairs(figures.warnings) do
    local name = w.line:match("plugin '([^']+)'")
    check(name == "perfmon_test", "a warning about another module, %s:\n%s", tostring(name), w.line)
    first = first or w
  end
  for name in log:gmatch("plugin '([^']+)' is slowing things down") do
    check(name == "perfmon_test", "a warning about another module, %s", name)
  end
  check(first, "no warning about perfmon_test during the load:\n%s", log)
  print(("prosody load: the first warning %.1f s after the load's start: %s"):format(first.at - figures.start, first.line))
  check(first.at - figures.start <= 20, "the first warning came %.1f s after the load's start", first.at - figures.start)
  -- the warning's diagnosis (sampled, 10 s), over before the load ends:
  -- perfmon_test's own time in its window, from samples of its own
  local diagnosis, self_ms, samples = log:match(
    "(perfmon_test, sampled at scheduler ticks, one every [%d.]+ ms of CPU time over %d+ s: ([%d.]+) ms of its own CPU time [^\n]*"
    .. "%((%d+) samples of its own%))")
  check(diagnosis, "no sampled diagnosis of perfmon_test in the log:\n%s", log)
  print("prosody load: the diagnosis: " .. diagnosis)
  check(tonumber(self_ms) > 0 and tonumber(samples) > 0, "the diagnosis found none of perfmon_test's time: %s",
    diagnosis)
  -- no event of 512 ms or more while the load ran (the top bucket)
  local long = figures.long1 - figures.long0
  print(("prosody load: %d events in all, %d of them of 512 ms or more during the load"):format(figures.events, long))
  check(long == 0, "%d events of 512 ms or more during the load", long)
  check(log:match("mod_perfmon\tinfo\tone perfmon event per network callback and timer"),
    "mod_perfmon does not say what its events are:\n%s", log)
  for line in log:gmatch("[^\n]+") do
    check(not line:match("\terror\t"), "an error in Prosody's log: %s", line)
  end
  print("prosody load: OK")
end

-- bench/prosody --load: the server's CPU per message under the load, for
-- none, sampled, sampled without the diagnosis and exact, in rounds whose
-- order alternates, warnings firing as in the test (perfmon_cpu_percent =
-- 3: perfmon_test is warned about, and in sampled mode each warning opens
-- the diagnosis).
local LOAD_CONFIGS = { none = true, sampled = true, ["sampled-0"] = true, ["sampled-cpu"] = true, exact = true }
local function load_cost(pairs_n, only)
  local stats = dofile(SOURCE .. "/bench/stats.lua")
  -- "sampled-0": sampled with perfmon_diagnosis = 0, no diagnosis after
  -- a warning; "sampled-cpu": sampled on the "cpu" timer (perfmon_timer).
  -- only: a comma-separated list of these, none first.
  local configs = { "none", "sampled", "sampled-0", "exact" }
  if only then
    configs = { "none" }
    for c in only:gmatch("[^,]+") do
      check(LOAD_CONFIGS[c], "unknown configuration %q (none, sampled, sampled-0, sampled-cpu, exact)", c)
      if c ~= "none" then configs[#configs + 1] = c end
    end
  end
  local load = setmetatable({ seconds = 30 }, { __index = LOAD })
  print(("prosody %s, %s; %d CPUs, load %s; %d clients, a message every %.1f s each for %d s, perfmon_test %d calls a message; %d rounds (%s, reversed every other)")
    :format(sh("dpkg-query -W -f '${Version}' prosody 2>/dev/null"), _VERSION, tonumber(sh("nproc")),
      sh("cut -d' ' -f1-3 /proc/loadavg"), load.clients, load.interval, load.seconds, LOAD.calls, 2 * pairs_n,
      table.concat(configs, " ")))
  local runs = 0
  local times = stats.interleave(configs, 2 * pairs_n, function(c)
    if runs % #configs == 0 then io.write(("round %2d, us/message:"):format(runs // #configs + 1)) end
    local opts = setmetatable({ jank_ms = 50, cpu_percent = 3 }, { __index = LOAD_OPTS })
    if c ~= "none" then opts.perfmon, opts.mode = true, c:match("^%a+") end
    if c == "sampled-0" then opts.diagnosis = 0 end
    if c == "sampled-cpu" then opts.timer = "cpu" end
    local us, log = with_server(opts, function(srv)
      local r, _, _, cpu = run_load(srv, load)
      check(r.delivered == r.sent, "%d of %d messages delivered", r.delivered, r.sent)
      return cpu / r.sent * 1e6
    end)
    local warned = select(2, log:gsub("is slowing things down", ""))
    runs = runs + 1
    io.write(("  %s %.0f%s"):format(c, us, c ~= "none" and (" (%d warnings)"):format(warned) or ""),
      runs % #configs == 0 and "\n" or "")
    io.flush()
    return us
  end)
  print("\nserver CPU per message under load, us: median (IQR) over rounds")
  for _, c in ipairs(configs) do
    local xs = times[c]
    print(("  %-18s %.0f (%.0f-%.0f)"):format(c, stats.median(xs), stats.quantile(xs, 0.25), stats.quantile(xs, 0.75)))
  end
  print(("ratios: median (IQR) over %d pairs of rounds"):format(pairs_n))
  for _, r in ipairs { { "sampled", "none", "issue 37: <= 1.10" }, { "sampled-0", "none" }, { "sampled-cpu", "none" },
    { "exact", "none" } } do
    if not times[r[1]] then goto next end
    local q = stats.paired(times, r[1], r[2])
    print(("  %-18s %.3fx (%.3f-%.3f)%s"):format(r[1] .. " / " .. r[2], q.median, q.q1, q.q3,
      r[3] and "   " .. r[3] or ""))
    ::next::
  end
end

---------------------------------------------------------------------------
-- The cost
---------------------------------------------------------------------------

local CONFIGS = { "none", "noop", "exact", "sampled" }
local OPTS = {
  none = {},
  noop = { noop = true },
  exact = { perfmon = true },
  sampled = { perfmon = true, mode = "sampled" },
}
local NO_SAMPLED = "n/a (this core has no sampled mode)"

-- The server's CPU µs per message over the exchange, in configuration c;
-- its log must hold no error.
local function cpu_per_message(c)
  local opts = setmetatable({ iterations = 0 }, { __index = OPTS[c] })
  local us, log = with_server(opts, function(srv)
    local before = server_cpu(srv.pid)
    exchange(srv.c2s_port, COST_MESSAGES, COST_PER_SESSION)
    return (server_cpu(srv.pid) - before) / COST_MESSAGES * 1e6
  end)
  check_log(log, false)
  return us
end

-- Whether a server in perfmon_mode = "sampled" runs a sampled monitor.  A
-- core that has modes refuses one it does not know; one that takes any
-- mode without a look would run the "sampled" server as an exact one.
-- Then the server must start, its log free of errors.
local function has_sampled_mode()
  local out = sh(("%s lua5.4 -e 'print((pcall(require(\"perfmon\").monitor, { \"ticks\", mode = \"no such mode\" })))' 2>&1")
    :format(LUA_ENV))
  check(out == "true" or out == "false", "perfmon does not load: %s", out)
  if out == "true" then return false end
  local ok, err = pcall(cpu_per_message, "sampled")
  if not ok then print("sampled: " .. tostring(err):match("[^\n]*")) end
  return ok
end

-- The server's instructions per message over the exchange, in
-- configuration c, under callgrind: the same work every time, where the
-- CPU time of a round spreads by a third on a shared machine.  Under
-- callgrind the server runs some 50 times slower: its turns would be janks
-- at the usual threshold (and a sampled watcher's warnings open exact
-- monitors), so the threshold is 50 times higher; and a sampled monitor
-- takes some 50 times the samples a message, so its figure is an upper
-- bound.
local function instructions_per_message(c)
  local opts = setmetatable({ iterations = 0, callgrind = true, jank_ms = 500 }, { __index = OPTS[c] })
  local n, log = with_server(opts, function(srv)
    local function control(what)
      local out = sh(("timeout 60 callgrind_control %s %d 2>&1"):format(what, srv.pid))
      check(not out:match("[Ee]rror") and not out:match("No active"), "callgrind_control %s: %s", what, out)
    end
    control("-i on")
    exchange(srv.c2s_port, COST_MESSAGES, COST_PER_SESSION)
    control("-d")
    local dumps = sh(("ls -t '%s'/callgrind.out* 2>/dev/null"):format(srv.dir))
    local first = dumps:match("[^\n]+")
    local total = first and read_file(first):match("\nsummary: (%d+)")
    check(total, "no callgrind dump in %s: %s", srv.dir, dumps)
    return tonumber(total) / COST_MESSAGES
  end)
  check_log(log, false)
  return n
end

-- One server of each configuration under callgrind, in turn.
local function instructions()
  print(("prosody %s, %s; %d messages a server in sessions of %d, under callgrind"):format(
    sh("dpkg-query -W -f '${Version}' prosody 2>/dev/null"), _VERSION, COST_MESSAGES, COST_PER_SESSION))
  local sampled, n = has_sampled_mode(), {}
  for _, c in ipairs(CONFIGS) do
    if c ~= "sampled" or sampled then
      n[c] = instructions_per_message(c)
      print(("  %-8s %8.0f instructions a message"):format(c, n[c]))
      io.flush()
    end
  end
  print("ratios")
  for _, r in ipairs { { "noop", "none" }, { "exact", "none" }, { "sampled", "none", "issue 18: <= 1.015 (an upper bound here)" },
      { "exact", "noop", "issue 18: <= 1.10" } } do
    print(("  %-18s %s%s"):format(r[1] .. " / " .. r[2],
      n[r[1]] and ("%.3fx"):format(n[r[1]] / n[r[2]]) or NO_SAMPLED, r[3] and "   " .. r[3] or ""))
  end
end

local function cost(pairs_n)
  local stats = dofile(SOURCE .. "/bench/stats.lua")
  local configs = table.move(CONFIGS, 1, #CONFIGS, 1, {})
  if not has_sampled_mode() then table.remove(configs) end
  print(("prosody %s, %s; %d CPUs, load %s; %d messages a server in sessions of %d, %d rounds (%s, reversed every other)")
    :format(sh("dpkg-query -W -f '${Version}' prosody 2>/dev/null"), _VERSION, tonumber(sh("nproc")),
      sh("cut -d' ' -f1-3 /proc/loadavg"), COST_MESSAGES, COST_PER_SESSION, 2 * pairs_n, table.concat(configs, " ")))
  local runs = 0
  local times = stats.interleave(configs, 2 * pairs_n, function(c)
    if runs % #configs == 0 then io.write(("round %2d, us/message:"):format(runs // #configs + 1)) end
    local us = cpu_per_message(c)
    runs = runs + 1
    io.write(("  %s %.1f"):format(c, us), runs % #configs == 0 and "\n" or "")
    io.flush()
    return us
  end)
  print("\nserver CPU per message, us: median (IQR) over rounds")
  for _, c in ipairs(CONFIGS) do
    local xs = times[c]
    print(("  %-18s %s"):format(c, xs and ("%.1f (%.1f-%.1f)"):format(stats.median(xs),
      stats.quantile(xs, 0.25), stats.quantile(xs, 0.75)) or NO_SAMPLED))
  end
  print(("ratios: median (IQR) over %d pairs of rounds"):format(pairs_n))
  for _, r in ipairs { { "noop", "none" }, { "exact", "none" }, { "sampled", "none", "issue 18: <= 1.015" },
      { "exact", "noop", "issue 18: <= 1.10" }, { "sampled", "noop" } } do
    local a, b, goal = r[1], r[2], r[3]
    local q = times[a] and stats.paired(times, a, b)
    print(("  %-18s %s%s"):format(a .. " / " .. b, q and ("%.3fx (%.3f-%.3f)"):format(q.median, q.q1, q.q3)
      or NO_SAMPLED, goal and "   " .. goal or ""))
  end
end

local function main()
  if sh("command -v prosody") == "" then
    print("SKIP: prosody is not installed (Debian: apt-get install prosody; tools/run installs it)")
    os.exit(77)
  end
  if (MODE == "load" or MODE == "load-cost") and not has_slixmpp() then
    print(("SKIP: %s has no slixmpp (Debian: apt-get install python3-slixmpp)"):format(PYTHON))
    os.exit(77)
  end
  local run = MODE == "cost" and cost or MODE == "instructions" and instructions
    or MODE == "load" and test_load or MODE == "load-cost" and load_cost or test
  local ok, err = pcall(run, tonumber(arg[4]) or 5, arg[5])
  if not ok then
    io.stderr:write("FAIL: ", tostring(err), "\n")
    os.exit(1)
  end
end

main()
