--- spec/support/fuzz.lua -- an API fuzzer for perfmon, seeded and reproducible.
--
-- fuzz.run{ seed = n, steps = n } drives perfmon with a random sequence of
-- steps drawn from one seed: every public function called with good and with
-- garbage arguments, interleaved with random programs run by plugins (chunks
-- loaded into sandboxes attached to groups) and by host code (chunks with no
-- group).  The programs are data: a tree of ops that one interpreter (INTERP
-- below, loaded once per chunk) walks, so that a shape can nest any other:
-- errors at any depth, yields across pcall, coroutines left suspended,
-- closed or dropped, tail calls, metamethods, finalizers, Lua and C stack
-- overflows, events, nested loops and blocking calls left open, monitors
-- opened and closed inside plugin code, calls from plugin to plugin, a
-- debugger calling debug.sethook.  The profiler and the watcher take part
-- when they are there.
--
-- After every step it checks the invariants perfmon promises:
--   * it is still there (a crash ends the process; ASan and valgrind runs
--     of the specs catch the invalid accesses that do not crash);
--   * every statistic of the process and of every group never decreases,
--     and no group disappears;
--   * the process bounds every group (user, system, CPU and blocking time,
--     each bucket of the durations histogram; once a sampled monitor has
--     counted, CPU time but not its split into user and system), and no
--     group has samples before one has;
--   * perfmon counts as many open monitors of each mode as the fuzzer
--     holds, and the debug hook is set exactly when an exact one is open;
--   * an error perfmon raises is either an argument error naming the
--     caller's function, a documented misuse, or an error the program
--     itself planted, never an internal error of perfmon's Lua code;
-- and in host-only steps (host code runs, no plugin code can: no plugin
-- call, garbage collection stopped so no plugin finalizer runs) that no
-- plugin group is charged anything.
--
-- The sequence of steps depends on the seed alone.  Lua seeds its string
-- hashes at random, so the points where the garbage collector runs (and
-- finalizers with it) differ from run to run; a failure reports the seed,
-- the step and the last steps taken, and `fuzz.run{ seed = s, steps = k }`
-- replays the same steps.  spec/fuzz_spec.lua runs a short fixed-seed pass;
-- tools/fuzz runs long ones.

local perfmon = require("perfmon")
-- debug.gethook hides perfmon's own hook while a monitor is open; this
-- one, kept before any opens, shows it
local raw_gethook = debug.gethook
local core = require("perfmon.core")

local fuzz = {}

----------------------------------------------------------------------------
-- Random numbers: xorshift64*, so that a seed means the same sequence on
-- every Lua 5.4 (math.random's algorithm is not part of the language).
----------------------------------------------------------------------------

local Rng = {}
Rng.__index = Rng

local function rng_new(seed)
  local s = (seed * 2654435761 + 0x9E3779B97F4A7C15) | 1
  local r = setmetatable({ s = s }, Rng)
  for _ = 1, 8 do r:next() end
  return r
end

function Rng:next()
  local x = self.s
  x = x ~ (x >> 12)
  x = x ~ (x << 25)
  x = x ~ (x >> 27)
  self.s = x
  return (x * 0x2545F4914F6CDD1D) >> 1 -- non-negative
end

--- An integer in 1..n.
function Rng:int(n)
  return self:next() % n + 1
end

function Rng:chance(p)
  return self:next() % 1000000 < p * 1000000
end

function Rng:pick(list)
  return list[self:int(#list)]
end

--- Picks a key of weights ({ name = weight }) in proportion to its weight;
-- names are taken in sorted order so that the pick depends on the seed only.
function Rng:weighted(weights, order)
  local total = 0
  for _, k in ipairs(order) do total = total + weights[k] end
  local x = self:int(total)
  for _, k in ipairs(order) do
    x = x - weights[k]
    if x <= 0 then return k end
  end
end

local function keys_sorted(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

----------------------------------------------------------------------------
-- The interpreter every plugin and host chunk runs.  FZ (in the chunk's
-- environment) is the fuzzer's side: pools and perfmon's functions.
----------------------------------------------------------------------------

local INTERP = [==[
local FZ = FZ
local perfmon = FZ.perfmon
local run

-- touches no global: resolved through its chunk
local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local function deep(n, prog)
  if n <= 0 then return run(prog) end
  return (deep(n - 1, prog)) -- not a tail call: n frames
end

local function tail(n, prog)
  if n <= 0 then return run(prog) end
  return tail(n - 1, prog)
end

local function overflow(n) return 1 + overflow(n + 1) end

local function cstack(n)
  return pcall(cstack, n + 1) -- C stack overflow, caught at each level
end

local ERRORS = {
  function() error("fz: planted") end,
  function() error({ fz = "planted" }) end,
  function() error(setmetatable({}, { __tostring = function() return "fz: planted" end })) end,
  function() local t = nil; return t.fz_planted end, -- a runtime error
  function() error() end, -- nil error object
}

local function metaobj(prog)
  local mt = {}
  local function body() return run(prog) end
  mt.__index = function() body() return 1 end
  mt.__newindex = function() body() end
  mt.__call = function() body() return 1 end
  mt.__add = function() body() return 1 end
  mt.__concat = function() body() return "" end
  mt.__len = function() body() return 0 end
  mt.__eq = function() body() return false end
  mt.__lt = function() body() return false end
  mt.__close = function() body() end
  mt.__tostring = function() body() return "fz" end
  return setmetatable({}, mt), mt
end

local META = {
  function(o) return o.x end,
  function(o) o.x = 1 end,
  function(o) return o() end,
  function(o) return o + 1 end,
  function(o) return o .. "" end,
  function(o) return #o end,
  function(o) return o == setmetatable({}, getmetatable(o)) end,
  function(o) return o < o end,
  function(o) local c <close> = o end,
  function(o) return tostring(o) end,
}

local OPS = {}

function OPS.spin(op) return spin(op[2]) end
function OPS.call(op) return run(op[2]) end
function OPS.deep(op) return deep(op[2], op[3]) end
function OPS.tail(op) return tail(op[2], op[3]) end
function OPS.error(op) return ERRORS[op[2]]() end
function OPS.pcall(op) return pcall(run, op[2]) end
function OPS.xpcall(op)
  return xpcall(run, function(e) run(op[3]) return e end, op[2])
end
function OPS.yield(op) return coroutine.yield(op[2]) end
function OPS.pyield(op) -- a yield across pcall
  return pcall(function() coroutine.yield(1) return run(op[2]) end)
end
function OPS.co(op) -- [2] prog, [3] resumes, [4] 1 close, 2 keep, 3 drop
  local co = coroutine.create(run)
  for _ = 1, op[3] do
    if coroutine.status(co) ~= "suspended" then break end
    coroutine.resume(co, op[2])
  end
  if op[4] == 1 then coroutine.close(co)
  elseif op[4] == 2 then FZ.keep(co) end
end
function OPS.wrap(op)
  local f = coroutine.wrap(run)
  return pcall(f, op[2])
end
function OPS.other(op) return (FZ.plugin(op[2])(op[3])) end
function OPS.tailother(op) return FZ.plugin(op[2])(op[3]) end -- a tail call
function OPS.host(op) return (FZ.host(op[2])(op[3])) end
function OPS.meta(op)
  local o = metaobj(op[3])
  return META[op[2]](o)
end
function OPS.gcobj(op) -- a finalizer that runs this program, some day
  setmetatable({}, { __gc = function() pcall(run, op[2]) end })
end
function OPS.gc(op)
  if op[2] == 1 then collectgarbage("step") else collectgarbage() end
end
function OPS.event(op) return perfmon.event(run, op[2]) end
function OPS.nested(op) return perfmon.nested_loop(run, op[2]) end
function OPS.blocking(op) return perfmon.blocking(run, op[2]) end
function OPS.begin() return perfmon.event_begin() end
OPS["end"] = function() return perfmon.event_end() end
function OPS.overflow() return overflow(1) end
function OPS.cstack() return cstack(1) end
function OPS.sort(op)
  local t = { 3, 1, 2, 5, 4 }
  table.sort(t, function(a, b) run(op[2]) return a < b end)
end
function OPS.gsub(op)
  return (("abc"):gsub("%w", function() run(op[2]) end))
end
function OPS.resume(op) return FZ.resume(op[2]) end
function OPS.closeco(op) return FZ.closeco(op[2]) end
function OPS.monitor(op)
  local m <close> = perfmon.monitor{ "jank", "ticks" }
  FZ.track(m) -- it stays open while a coroutine is suspended inside
  run(op[2])
  m:snapshot()
end
function OPS.snapshot() return FZ.snapshot() end
function OPS.sethook() -- a debugger comes and goes, chained while monitored
  if not FZ.sethook then return end
  local calls = 0
  local function probe() end
  if pcall(debug.sethook, function(event) if event == "call" then calls = calls + 1 end end, "c") then
    probe()
    local n = calls
    debug.sethook()
    assert(n >= 1, "fuzz: a debugger's call hook heard no call")
  end
end
function OPS.attach(op) return FZ.attach(op[2], op[3]) end
function OPS.load(op) -- a plugin loads a chunk of its own
  local f = perfmon.load("local n = ... return n", "=fz_inner", setmetatable({}, { __index = _ENV }))
  return f and f(op[2])
end

function run(prog)
  local r
  for i = 1, #prog do
    local op = prog[i]
    r = OPS[op[1]](op)
  end
  return r
end

return run
]==]

----------------------------------------------------------------------------
-- Programs
----------------------------------------------------------------------------

-- Ops that run no code of another chunk: a host-only program uses these.
local LOCAL_OPS = { "spin", "call", "deep", "tail", "error", "pcall", "xpcall",
                    "yield", "pyield", "co", "wrap", "meta", "event", "nested",
                    "blocking", "begin", "end", "sort", "gsub", "cstack" }
local ALL_OPS = { "spin", "call", "deep", "tail", "error", "pcall", "xpcall",
                  "yield", "pyield", "co", "wrap", "meta", "event", "nested",
                  "blocking", "begin", "end", "sort", "gsub", "cstack",
                  "other", "tailother", "host", "gcobj", "gc", "resume",
                  "closeco", "monitor", "snapshot", "attach", "load", "overflow",
                  "sethook" }

-- Generates a program of up to `budget` ops; host = true: local ops only
-- (the chunk's own code, no GC, no other chunk).
local function gen(F, budget, host)
  local r = F.rng
  local prog, n = {}, r:int(3)
  for _ = 1, n do
    if budget <= 0 then break end
    budget = budget - 1
    local kind = r:pick(host and LOCAL_OPS or ALL_OPS)
    if kind == "overflow" and not r:chance(0.1) then kind = "spin" end
    local sub = function() local b = r:int(budget + 1) - 1 budget = budget - b return gen(F, b, host) end
    local op
    if kind == "spin" then op = { kind, r:int(300) }
    elseif kind == "deep" or kind == "tail" then op = { kind, r:int(r:chance(0.05) and 3000 or 20), sub() }
    elseif kind == "error" then op = { kind, r:int(5) }
    elseif kind == "xpcall" then op = { kind, sub(), sub() }
    elseif kind == "yield" then op = { kind, r:int(3) }
    elseif kind == "co" then op = { kind, sub(), r:int(4), r:int(3) }
    elseif kind == "meta" then op = { kind, r:int(10), sub() }
    elseif kind == "other" or kind == "tailother" or kind == "host" then op = { kind, r:int(1 << 20), sub() }
    elseif kind == "gc" then op = { kind, r:int(4) }
    elseif kind == "resume" or kind == "closeco" then op = { kind, r:int(1 << 20) }
    elseif kind == "attach" then op = { kind, r:int(1 << 20), r:int(1 << 20) }
    elseif kind == "load" then op = { kind, r:int(100) }
    elseif kind == "begin" or kind == "end" or kind == "cstack" or kind == "snapshot"
      or kind == "overflow" or kind == "sethook" then op = { kind }
    else op = { kind, sub() } end
    prog[#prog + 1] = op
  end
  return prog
end

local function describe_prog(prog, depth)
  depth = depth or 0
  if depth > 3 then return "..." end
  local parts = {}
  for _, op in ipairs(prog) do
    local args = {}
    for i = 2, #op do
      args[#args + 1] = type(op[i]) == "table" and describe_prog(op[i], depth + 1) or tostring(op[i])
    end
    parts[#parts + 1] = op[1] .. "(" .. table.concat(args, ",") .. ")"
  end
  return "[" .. table.concat(parts, " ") .. "]"
end

----------------------------------------------------------------------------
-- Errors: what perfmon may raise
----------------------------------------------------------------------------

-- Messages of perfmon's documented refusals.
local MISUSE = {
  "event_begin: an event is already open",
  "event_end: no event is open",
  "nested_enter: too many nested loops",
  "nested_leave: no nested loop is open",
  "blocking_end: no blocking call is open",
  "snapshot: the monitor is closed",
  "a debug hook is already set",
  "environment already has the most groups",
  "the profiler is already running",
  "the profiler is not running",
  "debug.sethook: perfmon is monitoring",
}

-- Errors Lua raises wherever the program happens to be, perfmon's Lua
-- code included.
local ANYWHERE = { "stack overflow", "not enough memory", "error in error handling",
                   "attempt to yield", "cannot resume", "cannot close" }

local function is_planted(e)
  if type(e) == "table" then return true end -- the programs' table errors
  if e == nil then return true end
  if type(e) ~= "string" then return false end
  if e:find("fz: planted", 1, true) then return true end
  for _, m in ipairs(ANYWHERE) do
    if e:find(m, 1, true) then return true end
  end
  return false
end

-- Returns nil when the error e is one perfmon may raise (or the program
-- planted), else why it is not.
local function bad_error(e)
  if is_planted(e) then return nil end
  -- perfmon raises strings; other error objects are the program's (a
  -- callable perfmon was given, error(-math.huge))
  if type(e) ~= "string" then return nil end
  for _, m in ipairs(MISUSE) do
    if e:find(m, 1, true) then return nil end
  end
  -- perfmon's own Lua code failing: an operation on a value it did not
  -- check, or a library function it called with one.  (A function the
  -- program passed in, called by perfmon.event and the like, raises with
  -- perfmon's line too: error("x") there says "init.lua:N: x", and a C
  -- function names itself after perfmon's local, 'fn'; those are the
  -- program's errors.)
  local at = e:match("perfmon/[%w_]+%.lua:%d+: (.*)")
  if at then
    if at:find("^attempt to ") then
      return "an internal error of perfmon's Lua code"
    end
    local fname = at:match("^bad argument #%d+ to '([^']+)'")
    if fname and fname ~= "fn" then
      return "an argument error of '" .. fname .. "' raised inside perfmon's Lua code"
    end
  end
  return nil
end

----------------------------------------------------------------------------
-- The fuzzer's state
----------------------------------------------------------------------------

local Fuzz = {}
Fuzz.__index = Fuzz

local function fail(F, what)
  local log = {}
  for i = math.max(1, #F.log - 15), #F.log do log[#log + 1] = "  " .. F.log[i] end
  error(("fuzz: seed %d, step %d: %s\nlast steps:\n%s\nreplay: fuzz.run{ seed = %d, steps = %d }")
    :format(F.seed, F.step, what, table.concat(log, "\n"), F.seed, F.step), 0)
end

local function note(F, s)
  -- the digest of every step taken: equal digests, equal runs
  for i = 1, #s do F.digest = (F.digest * 31 + s:byte(i)) & 0xFFFFFFFF end
  F.log[#F.log + 1] = ("%d: %s"):format(F.step, s)
  if F.trace then io.stderr:write(F.log[#F.log], "\n") end
  if #F.log > 200 then table.remove(F.log, 1) end
end

-- Calls fn(...) protected; an error must be one perfmon may raise.
local function try(F, what, fn, ...)
  local ok, e = pcall(fn, ...)
  if not ok then
    F.errors = F.errors + 1
    local why = bad_error(e)
    if why then fail(F, ("%s raised %s: %s"):format(what, why, tostring(e))) end
  end
  return ok, e
end

local function new_env(F)
  return setmetatable({ FZ = F.fz }, { __index = _G })
end

local function new_plugin(F)
  local r = F.rng
  local n = #F.plugins + 1
  local g = perfmon.group{ name = "fz_plugin_" .. n, kind = r:pick{ "plugin", "page", "sandbox" } }
  F.groups[#F.groups + 1] = g
  F.plugin_group[g.id] = true
  local env
  if #F.plugins > 0 and r:chance(0.2) then
    env = F.plugins[r:int(#F.plugins)].env -- two groups on one environment
  else
    env = new_env(F)
  end
  local run
  if r:chance(0.5) then
    run = assert(perfmon.load(INTERP, "=fz_plugin_" .. n, env, g))()
  else
    run = assert(perfmon.load(INTERP, "=fz_plugin_" .. n, env))()
    perfmon.attach(env, g) -- attached after loading
  end
  F.plugins[n] = { run = run, env = env, group = g, index = n }
  F.envs[#F.envs + 1] = env
  return F.plugins[n]
end

local function new_host(F)
  local n = #F.hosts + 1
  local env = new_env(F)
  local run
  if n % 2 == 0 then
    run = assert(perfmon.load(INTERP, "=fz_host_" .. n, env))() -- no group
  else
    run = assert(load(INTERP, "=fz_host_" .. n, "t", env))()
  end
  F.hosts[n] = { run = run, env = env }
  return F.hosts[n]
end

-- The monitors the fuzzer holds open, and those of them that are exact.
local function open_monitors(F)
  local n, exact = 0, 0
  for _, m in ipairs(F.monitors) do
    if not m.closed then
      n = n + 1
      if m.mode == "exact" then exact = exact + 1 end
    end
  end
  return n, exact
end

----------------------------------------------------------------------------
-- Invariants
----------------------------------------------------------------------------

local FIELDS = { "user_us", "system_us", "cpu_us", "blocking_us", "ticks", "events", "event_us",
  "self_user_us", "self_system_us", "self_us", "self_event_us", "alloc_bytes", "alloc_count",
  "self_alloc_bytes", "self_alloc_count", "samples", "self_samples" }
local BOUNDED = { "user_us", "system_us", "cpu_us", "blocking_us", "self_us", "alloc_bytes",
  "alloc_count", "samples" }
-- A sample splits its span into user and system time as getrusage saw
-- that span, the process's windows theirs: once a sampled monitor has
-- counted, a group's CPU time is bounded by the process's, not its split.
local SPLIT = { user_us = true, system_us = true }

local function check_stats(F, st, where)
  for _, f in ipairs(FIELDS) do
    if math.type(st[f]) ~= "integer" or st[f] < 0 then
      fail(F, ("%s: %s is %s"):format(where, f, tostring(st[f])))
    end
  end
  if type(st.durations) ~= "table" or #st.durations ~= 10 then
    fail(F, where .. ": durations is not a list of 10")
  end
  if type(st.memberships) ~= "table" then fail(F, where .. ": no memberships") end
end

-- The checks that hold after any step.
local function check(F, s, label)
  local where = label or "stats"
  check_stats(F, s.process, where .. " process")
  -- groups die once nothing holds them; those whose handles the run holds
  -- are listed
  local held = {}
  for _, g in ipairs(F.groups or {}) do
    held[g.id] = true
    if not s.groups[g.id] then fail(F, ("%s: group %d is held but not listed"):format(where, g.id)) end
  end
  for id, st in pairs(s.groups) do
    check_stats(F, st, ("%s group %d"):format(where, id))
    if st.id ~= id then fail(F, ("%s: group %d has id %s"):format(where, id, tostring(st.id))) end
    for _, f in ipairs(BOUNDED) do
      if st[f] > s.process[f] then
        if not (SPLIT[f] and F.sampled) then
          fail(F, ("%s: group %d (%s) %s = %d exceeds the process's %d"):format(
            where, id, st.name, f, st[f], s.process[f]))
        end
      end
    end
    -- self time and memory are within the inclusive ones (1 µs: each is
    -- truncated on its own)
    if st.self_us > st.cpu_us + 1 or st.self_alloc_bytes > st.alloc_bytes
        or st.self_alloc_count > st.alloc_count then
      fail(F, ("%s: group %d (%s) self %d us, %d bytes over inclusive %d us, %d bytes"):format(
        where, id, st.name, st.self_us, st.self_alloc_bytes, st.cpu_us, st.alloc_bytes))
    end
    if st.self_samples > st.samples or (st.samples > 0 and not F.sampled) then
      fail(F, ("%s: group %d (%s) has %d samples, %d self%s"):format(where, id, st.name,
        st.samples, st.self_samples, F.sampled and "" or ", and no sampled monitor opened"))
    end
    -- a group runs only in events the process counts
    if st.events > s.process.events then
      fail(F, ("%s: group %d events = %d exceeds the process's %d"):format(
        where, id, st.events, s.process.events))
    end
    for k = 1, 10 do
      if st.durations[k] > s.process.durations[k] then
        fail(F, ("%s: group %d durations[%d] = %d exceeds the process's %d"):format(
          where, id, k, st.durations[k], s.process.durations[k]))
      end
    end
    if st.memberships[1] ~= 0 then fail(F, where .. ": memberships do not start with 0") end
    for _, m in ipairs(st.memberships) do
      if m ~= 0 and s.groups[m] == nil then
        fail(F, ("%s: group %d is a member of unknown group %s"):format(where, id, tostring(m)))
      end
    end
  end
  local prev = F.last
  if prev then
    local function mono(a, b, what)
      for _, f in ipairs(FIELDS) do
        if b[f] < a[f] then
          fail(F, ("%s: %s %s went down from %d to %d"):format(where, what, f, a[f], b[f]))
        end
      end
      for k = 1, 10 do
        if b.durations[k] < a.durations[k] then
          fail(F, ("%s: %s durations[%d] went down"):format(where, what, k))
        end
      end
    end
    mono(prev.process, s.process, "the process's")
    for id, st in pairs(prev.groups) do
      if s.groups[id] then
        mono(st, s.groups[id], ("group %d's"):format(id))
      elseif held[id] then
        fail(F, ("%s: group %d disappeared"):format(where, id))
      end
    end
  end
  F.last = s
end

--- The invariants of one statistics table (a snapshot or core.stats()),
-- and their monotonicity against prev, with the groups whose handles are
-- held (a list of tables with an id); raises like a run would.  For the
-- spec that proves the checks can fail.
function fuzz.check(stats, prev, held)
  local F = setmetatable({ seed = 0, step = 0, log = {}, last = prev, groups = held }, Fuzz)
  check(F, stats, "check")
end

local function check_state(F)
  check(F, core.stats())
  local info = perfmon.info()
  local open, exact = open_monitors(F)
  -- a running profiler listens to the watcher, which holds a monitor
  local extra = F.profiling and info.monitors == open + 1
  if info.monitors ~= open and not extra then
    fail(F, ("perfmon counts %d monitors open, the fuzzer holds %d"):format(info.monitors, open))
  end
  if not F.profiling then
    if info.exact_monitors ~= exact or info.sampled_monitors ~= open - exact then
      fail(F, ("perfmon counts %d exact and %d sampled monitors, the fuzzer holds %d and %d")
        :format(info.exact_monitors, info.sampled_monitors, exact, open - exact))
    end
    local hook, mask, count = raw_gethook()
    local hooked = hook ~= nil
    -- a sampled monitor's signal may have asked for a sample that the next
    -- instruction answers: a count hook alone, every instruction
    local request = open > exact and mask == "" and count == 1
    if hooked ~= (exact > 0) and not (hooked and exact == 0 and request) then
      fail(F, ("the debug hook is %s with %d exact monitors open"):format(hooked and "set" or "not set", exact))
    end
  end
end

----------------------------------------------------------------------------
-- Garbage
----------------------------------------------------------------------------

local function planted_table()
  return setmetatable({}, {
    __index = function() error("fz: planted __index") end,
    __len = function() error("fz: planted __len") end,
    __tostring = function() error("fz: planted __tostring") end,
    __call = function() error("fz: planted __call") end,
  })
end

local function garbage(F)
  local r = F.rng
  local k = r:int(24)
  if k == 1 then return nil
  elseif k == 2 then return r:chance(0.5)
  elseif k == 3 then return r:pick{ 0, -1, 1, 15, 16, 1 << 40, math.mininteger, math.maxinteger }
  elseif k == 4 then return r:pick{ 0.5, -0.0, 1e308, math.huge, -math.huge, 0 / 0 }
  elseif k == 5 then return r:pick{ "", "jank", "ticks", "chunks", "blocking", "x", "\0", ("z"):rep(300) }
  elseif k == 6 then return {}
  elseif k == 7 then return { name = r:pick{ "a", "", 1, false }, kind = r:pick{ "plugin", "", {}, nil } }
  elseif k == 8 then return r:pick{ { "jank" }, { "bogus" }, { "ticks", "jank", "ticks" }, { 1 }, { [2] = "jank" } }
  elseif k == 9 then return planted_table()
  elseif k == 10 then return function() end
  elseif k == 11 then return coroutine.create(function() end)
  elseif k == 12 then return io.stdout
  elseif k == 13 then return #F.groups > 0 and r:pick(F.groups) or nil
  elseif k == 14 then return #F.monitors > 0 and r:pick(F.monitors) or nil
  elseif k == 15 then return #F.snaps > 0 and r:pick(F.snaps) or nil
  elseif k == 16 then return #F.envs > 0 and r:pick(F.envs) or nil
  elseif k == 17 then return setmetatable({}, { __call = function() return 1 end })
  elseif k == 18 then return r:pick{ os.clock, coroutine.yield, error, perfmon.event_end }
  elseif k == 19 then return { groups = {}, process = {} } -- snapshot-like
  elseif k == 20 then return "return 1"
  elseif k == 21 then return "syntax error here ("
  elseif k == 22 then return function() return nil end -- a load reader giving nothing
  elseif k == 23 then return r:int(1000)
  else return "=fz_garbage" end
end

----------------------------------------------------------------------------
-- Steps
----------------------------------------------------------------------------

local STEPS = {}

function STEPS.plugin(F) -- a plugin program from host code
  if #F.plugins == 0 then new_plugin(F) end
  local p = F.rng:pick(F.plugins)
  local prog = gen(F, F.rng:int(12))
  note(F, ("plugin %d runs %s"):format(p.index, describe_prog(prog)))
  if F.rng:chance(0.5) then
    try(F, "a plugin program", p.run, prog)
  else
    try(F, "a plugin event", perfmon.event, p.run, prog)
  end
end

function STEPS.plugin_co(F) -- a plugin program in a coroutine, kept
  if #F.plugins == 0 then new_plugin(F) end
  local p = F.rng:pick(F.plugins)
  local prog = gen(F, F.rng:int(10))
  note(F, ("plugin %d in a coroutine runs %s"):format(p.index, describe_prog(prog)))
  local co = coroutine.create(p.run)
  local ok, e = coroutine.resume(co, prog)
  if not ok then
    local why = bad_error(e)
    if why then fail(F, ("a plugin coroutine raised %s: %s"):format(why, tostring(e))) end
  end
  if coroutine.status(co) == "suspended" then F.fz.keep(co) end
end

function STEPS.pool(F) -- resume, close or drop a suspended coroutine
  if #F.pool == 0 then return end
  local i = F.rng:int(#F.pool)
  local co = F.pool[i]
  local what = F.rng:int(3)
  note(F, ("coroutine %d: %s"):format(i, ({ "resume", "close", "drop" })[what]))
  if what == 1 then
    if coroutine.status(co) == "suspended" then
      local ok, e = coroutine.resume(co, 1)
      if not ok and bad_error(e) then
        fail(F, ("a resumed coroutine raised %s: %s"):format(bad_error(e), tostring(e)))
      end
    end
  elseif what == 2 then
    local ok, e = coroutine.close(co)
    if not ok and bad_error(e) then
      fail(F, ("closing a coroutine raised %s: %s"):format(bad_error(e), tostring(e)))
    end
  end
  if what ~= 1 or coroutine.status(co) == "dead" then table.remove(F.pool, i) end
end

-- Host code only, with garbage collection stopped: no plugin group may be
-- charged anything.  Brackets left open are closed first, so that the
-- snapshots before and after commit everything (an open event is
-- committed when it ends).
function STEPS.host_only(F)
  if #F.hosts == 0 then new_host(F) end
  local h = F.rng:pick(F.hosts)
  local prog = gen(F, F.rng:int(12), true)
  note(F, ("host only: %s"):format(describe_prog(prog)))
  repeat pcall(core.event_end) until not pcall(core.nested_leave)
  pcall(core.event_end)
  while pcall(core.blocking_end) do end
  collectgarbage()
  collectgarbage()
  collectgarbage("stop")
  local m = perfmon.monitor{ "jank", "ticks", "blocking" }
  F.monitors[#F.monitors + 1] = m
  local before = m:snapshot()
  local co = coroutine.wrap(function() return pcall(h.run, prog) end)
  local ok, e
  if F.rng:chance(0.3) then ok, e = co() else ok, e = pcall(h.run, prog) end
  repeat pcall(core.event_end) until not pcall(core.nested_leave)
  pcall(core.event_end)
  while pcall(core.blocking_end) do end
  local after = m:snapshot()
  m:close()
  collectgarbage("restart")
  if not ok and bad_error(e) then
    fail(F, ("host code raised %s: %s"):format(bad_error(e), tostring(e)))
  end
  local d = after:subtract(before)
  for id, st in pairs(d.groups) do
    local plugin_chunk = st.kind == "chunk" and st.name:find("^fz_plugin") ~= nil
    if F.plugin_group[id] or plugin_chunk then
      for _, f in ipairs(FIELDS) do
        if st[f] ~= 0 then
          fail(F, ("host code only ran, yet group %d (%s '%s') was charged %s = %d")
            :format(id, st.kind, st.name, f, st[f]))
        end
      end
    end
  end
  F.host_only = F.host_only + 1
end

function STEPS.group(F)
  note(F, "group")
  if F.rng:chance(0.7) or #F.plugins == 0 then
    new_plugin(F)
  else
    new_host(F)
  end
end

function STEPS.attach(F)
  if #F.envs == 0 or #F.groups == 0 then return end
  local env, gi = F.rng:pick(F.envs), F.rng:int(#F.groups)
  local g = F.groups[gi]
  local detach = F.rng:chance(0.4)
  note(F, ("%s group #%d"):format(detach and "detach" or "attach", gi))
  if detach then
    local was = perfmon.detach(env, g)
    if type(was) ~= "boolean" then fail(F, "detach returned " .. type(was)) end
    if perfmon.detach(env, g) ~= false then fail(F, "detach twice said attached") end
  else
    try(F, "attach", perfmon.attach, env, g)
    F.plugin_group[g.id] = true
  end
end

local PROBES = { "jank", "blocking", "ticks", "chunks", "memory" }

function STEPS.monitor(F)
  local open = open_monitors(F)
  if open > 0 and (open > 6 or F.rng:chance(0.5)) then
    local i = F.rng:int(#F.monitors)
    local m = F.monitors[i]
    local drop = F.rng:chance(0.3)
    note(F, ("monitor %d %s"):format(i, drop and "dropped" or "closed"))
    table.remove(F.monitors, i)
    if drop then
      local alive = setmetatable({ m }, { __mode = "v" })
      m = nil -- its finalizer closes it
      collectgarbage()
      collectgarbage()
      -- unless a coroutine suspended inside OPS.monitor still holds it: then
      -- it is not garbage, and stays open
      if alive[1] then F.monitors[#F.monitors + 1] = alive[1] end
    else
      m:close()
      if F.rng:chance(0.3) then m:close() end -- twice does nothing
      local ok, e = pcall(m.snapshot, m)
      if ok or not tostring(e):find("closed", 1, true) then
        fail(F, "a closed monitor gave a snapshot")
      end
    end
  else
    local probes = {}
    for _, p in ipairs(PROBES) do
      if F.rng:chance(0.5) then probes[#probes + 1] = p end
    end
    if #probes == 0 then probes[1] = "jank" end
    if F.rng:chance(0.3) then
      probes.mode = "sampled"
      -- monitors of different periods: the timer runs at the shortest
      if F.rng:chance(0.5) then probes.rate_us = F.rng:pick { 500, 1000, 2000, 8000 } end
    end
    note(F, "monitor{" .. table.concat(probes, ",") .. (probes.mode and ", sampled" or "")
      .. (probes.rate_us and ", rate_us " .. probes.rate_us or "") .. "}")
    local ok, m = try(F, "monitor", perfmon.monitor, probes)
    if ok then F.monitors[#F.monitors + 1] = m end
    F.sampled = F.sampled or (ok and probes.mode == "sampled")
  end
end

function STEPS.snapshot(F)
  local open = {}
  for _, m in ipairs(F.monitors) do
    if not m.closed then open[#open + 1] = m end
  end
  if #open == 0 then return end
  note(F, "snapshot")
  local s = F.rng:pick(open):snapshot()
  check(F, s, "snapshot")
  local older = #F.snaps > 0 and F.rng:pick(F.snaps) or nil
  if older then
    local d = s:subtract(older)
    for id, st in pairs(s.groups) do
      local o = older.groups[id]
      for _, f in ipairs(FIELDS) do
        local want = st[f] - (o and o[f] or 0)
        if d.groups[id][f] ~= want then
          fail(F, ("subtract: group %d %s is %d, expected %d"):format(id, f, d.groups[id][f], want))
        end
      end
    end
    if not s:equals(s) or (d.time ~= 0 and s:equals(d)) then fail(F, "equals is wrong") end
    if F.cjson and F.rng:chance(0.2) then
      local t = F.cjson.decode(perfmon.json(s))
      if t.process.cpu_us ~= s.process.cpu_us then fail(F, "json changed the process's cpu_us") end
      if not perfmon.snapshot_from_json(perfmon.json(s)):equals(s) then
        fail(F, "snapshot_from_json did not give the snapshot back")
      end
      local m = perfmon.merge{ s, older }
      if m.process.cpu_us ~= s.process.cpu_us + older.process.cpu_us then
        fail(F, "merge did not sum the processes")
      end
    end
  end
  F.snaps[#F.snaps + 1] = s
  if #F.snaps > 20 then table.remove(F.snaps, 1) end
end

function STEPS.brackets(F) -- events, nested loops, blocking calls by hand
  local k = F.rng:int(6)
  local fs = { core.event_begin, core.event_end, core.nested_enter, core.nested_leave,
               core.blocking_begin, core.blocking_end }
  local names = { "event_begin", "event_end", "nested_enter", "nested_leave",
                  "blocking_begin", "blocking_end" }
  note(F, names[k])
  try(F, names[k], fs[k])
end

function STEPS.gc(F)
  note(F, "collectgarbage")
  if F.rng:chance(0.5) then collectgarbage() else collectgarbage("step", F.rng:int(100)) end
end

-- Every public function with garbage arguments.
local function api_list(F)
  local m = F.proto_monitor
  local s = F.snaps[1]
  local list = {
    { "group", perfmon.group }, { "attach", perfmon.attach }, { "detach", perfmon.detach },
    { "load", perfmon.load }, { "loadfile", perfmon.loadfile }, { "monitor", perfmon.monitor },
    { "event", perfmon.event }, { "nested_loop", perfmon.nested_loop },
    { "blocking", perfmon.blocking }, { "info", perfmon.info },
    { "event_begin", perfmon.event_begin }, { "event_end", perfmon.event_end },
    { "snapshot", getmetatable(m).snapshot }, { "close", getmetatable(m).close },
  }
  if s then
    list[#list + 1] = { "subtract", getmetatable(s).subtract }
    list[#list + 1] = { "equals", getmetatable(s).equals }
  end
  if F.cjson then -- they need cjson
    list[#list + 1] = { "json", perfmon.json }
    list[#list + 1] = { "snapshot_from_json", perfmon.snapshot_from_json }
    list[#list + 1] = { "merge", perfmon.merge }
  end
  if perfmon.user_input then list[#list + 1] = { "user_input", perfmon.user_input } end
  if perfmon.animation then list[#list + 1] = { "animation", perfmon.animation } end
  if F.watcher then
    for _, name in ipairs{ "add_listener", "remove_listener", "configure", "poll" } do
      if F.watcher[name] then list[#list + 1] = { "watcher." .. name, F.watcher[name] } end
    end
  end
  return list
end

function STEPS.garbage(F)
  local list = api_list(F)
  local entry = F.rng:pick(list)
  local args = {}
  local n = F.rng:int(4) - 1
  for i = 1, n do args[i] = garbage(F) end
  -- a reader that never returns nil (os.clock) hangs Lua's own load too
  if entry[1] == "load" and args[1] == os.clock then args[1] = "return 1" end
  note(F, ("%s with %d garbage arguments"):format(entry[1], n))
  local ok, r = try(F, entry[1], entry[2], table.unpack(args, 1, n))
  -- garbage that happened to be valid: keep what it made
  if ok and entry[1] == "monitor" then F.monitors[#F.monitors + 1] = r end
  if ok and entry[1] == "group" then F.groups[#F.groups + 1] = r F.plugin_group[r.id] = true end
  if ok and entry[1] == "attach" and core.is_group(args[2]) then F.plugin_group[args[2].id] = true end
  if entry[1]:find("^watcher%.") and F.watcher then
    -- listeners added by garbage are removed, so that they cannot run later
    pcall(F.watcher.remove_listener, args[1], args[2])
  end
end

function STEPS.load(F)
  local r = F.rng
  local env = new_env(F)
  local g = r:chance(0.5) and perfmon.group{ name = "fz_loaded", kind = "plugin" } or nil
  if g then F.groups[#F.groups + 1] = g F.plugin_group[g.id] = true end
  note(F, "load")
  local which = r:int(4)
  local f, err
  if which == 1 then
    f, err = perfmon.load("return " .. r:int(100), "=fz_plugin_l", env, g)
    if not f then fail(F, "load of a good chunk failed: " .. tostring(err)) end
  elseif which == 2 then
    f, err = perfmon.load("syntax error (", "=fz_plugin_l", env, g)
    if f ~= nil or type(err) ~= "string" then fail(F, "load of a syntax error did not return nil, message") end
  elseif which == 3 then
    local parts = { "return ", "1", " + 2" }
    local i = 0
    f, err = perfmon.load(function() i = i + 1 return parts[i] end, "=fz_plugin_r", env, g)
    if not f then fail(F, "load from a reader failed: " .. tostring(err)) end
  else
    f, err = perfmon.loadfile(F.file, env, g)
    if not f then fail(F, "loadfile failed: " .. tostring(err)) end
  end
  if f then try(F, "a loaded chunk", f) end
end

-- Arguments start must refuse, each with "bad argument #n to 'profiler:start'".
local BAD_STARTS = {
  { 5 }, { 0 }, { -1 }, { 0.5 }, { 60000001 }, { "fast" }, { 1000, -1 },
  { 1000, 0.5 }, { 1000, 0, { timer = "x" } }, { 1000, 0, { alert = 5 } },
  { 1000, 0, "tick" },
}

-- A profiler whose __gc ran, kept by a finalizer: start must refuse it,
-- and nothing of it may outlive the state.
local function profiler_zombie(F, P)
  local kept
  do
    local q = P.new()
    setmetatable({}, { __gc = function() kept = q end })
  end
  collectgarbage()
  collectgarbage()
  if not kept then return end
  local ok, e = pcall(kept.start, kept, 100)
  if ok then
    kept:stop()
    fail(F, "a profiler started after its __gc had run")
  elseif not tostring(e):find("the profiler was collected", 1, true) then
    fail(F, "a collected profiler's start raised: " .. tostring(e))
  end
  try(F, "a collected profiler's results", kept.results, kept)
end

-- Stops and starts the running profiler inside a nested coroutine, which
-- is then dropped: the coroutine it samples must stay alive.
local function profiler_nested(F, p, rate)
  local co = coroutine.create(function()
    coroutine.resume(coroutine.create(function() p:stop() p:start(rate) end))
  end)
  try(F, "a profiler restarted in a nested coroutine", coroutine.resume, co)
  co = nil -- luacheck: ignore (dropped, then collected)
  collectgarbage()
  local t = os.clock() + 0.002 -- ticks that would find it freed
  while os.clock() < t do end
end

function STEPS.profiler(F)
  local P = F.profiler
  if not P then return end
  if not F.prof then
    note(F, "profiler new")
    local ok, p = try(F, "profiler.new", P.new)
    if ok then F.prof = p end
    return
  end
  local p = F.prof
  local what = F.rng:pick{ "toggle", "toggle", "toggle", "nested", "zombie", "bad start" }
  note(F, "profiler " .. what)
  if what == "zombie" then
    profiler_zombie(F, P)
  elseif what == "bad start" then
    local a, q = F.rng:pick(BAD_STARTS), P.new()
    local ok, e = pcall(q.start, q, a[1], a[2], a[3])
    if ok or not tostring(e):find("bad argument #%d to 'profiler:start'") then
      fail(F, "profiler:start(" .. tostring(a[1]) .. ", ...) did not refuse clearly: " .. tostring(e))
    end
  elseif what == "nested" and F.profiling then
    profiler_nested(F, p, F.rng:pick{ 10, 100, 1000 })
    F.profiling = p:is_profiling()
  elseif F.profiling then
    try(F, "profiler:stop", p.stop, p)
    F.profiling = false
    try(F, "profiler:results", p.results, p)
  else
    local ok = try(F, "profiler:start", p.start, p, F.rng:pick{ 10, 20, 1000, 5000, 1000000 }, F.rng:pick{ 0, 10, 1000 })
    F.profiling = ok
  end
end

----------------------------------------------------------------------------
-- The run
----------------------------------------------------------------------------

local WEIGHTS = {
  plugin = 30, plugin_co = 10, pool = 8, host_only = 8, group = 4, attach = 5,
  monitor = 8, snapshot = 8, brackets = 6, gc = 3, garbage = 20, load = 3,
  profiler = 4,
}
local ORDER = keys_sorted(WEIGHTS)

--- Runs the fuzzer: opts.seed (default 1), opts.steps (default 1000);
-- opts.sethook = false: programs never call debug.sethook;
-- opts.trace: print each step to stderr as it starts; opts.progress = n:
-- a line every n steps; opts.slow = s: name the steps that took over s
-- seconds of CPU.  Returns a report { seed, steps, errors (the errors
-- raised, all of them allowed ones), host_only (host-only steps checked),
-- groups, plugins, digest (of the steps taken: equal for equal runs) }.
-- Raises "fuzz: seed S, step K: ..." when an invariant breaks.
function fuzz.run(opts)
  opts = opts or {}
  local F = setmetatable({
    seed = opts.seed or 1, steps = opts.steps or 1000, rng = nil, step = 0,
    log = {}, errors = 0, host_only = 0, digest = 0,
    groups = {}, plugin_group = {}, envs = {}, plugins = {}, hosts = {},
    monitors = {}, snaps = {}, pool = {}, last = nil,
  }, Fuzz)
  F.rng = rng_new(F.seed)
  F.trace = opts.trace
  -- a sampled monitor of an earlier run counted the groups it left
  F.sampled = core.stats().process.samples > 0
  local okj, cjson = pcall(require, "cjson")
  F.cjson = okj and cjson or nil
  local okw, watcher = pcall(require, "perfmon.watcher")
  F.watcher = okw and watcher or nil
  local okp, profiler = pcall(require, "perfmon.profiler")
  F.profiler = okp and profiler or nil
  F.file = os.tmpname()
  local fh = assert(io.open(F.file, "w"))
  fh:write("local x = ... return x")
  fh:close()
  -- what programs see as FZ
  F.fz = {
    perfmon = perfmon,
    keep = function(co) if #F.pool < 50 then F.pool[#F.pool + 1] = co end end,
    plugin = function(k)
      if #F.plugins == 0 then return function() end end
      return F.plugins[(k - 1) % #F.plugins + 1].run
    end,
    host = function(k)
      if #F.hosts == 0 then return function() end end
      return F.hosts[(k - 1) % #F.hosts + 1].run
    end,
    resume = function(k)
      if #F.pool == 0 then return end
      local co = F.pool[(k - 1) % #F.pool + 1]
      if coroutine.status(co) == "suspended" then return coroutine.resume(co, 1) end
    end,
    closeco = function(k)
      if #F.pool == 0 then return end
      return coroutine.close(F.pool[(k - 1) % #F.pool + 1])
    end,
    sethook = opts.sethook ~= false,
    track = function(m) F.monitors[#F.monitors + 1] = m end,
    snapshot = function()
      for _, m in ipairs(F.monitors) do
        if not m.closed then return m:snapshot() end
      end
    end,
    attach = function(e, g)
      if #F.envs == 0 or #F.groups == 0 then return end
      local grp = F.groups[(g - 1) % #F.groups + 1]
      F.plugin_group[grp.id] = true
      return perfmon.attach(F.envs[(e - 1) % #F.envs + 1], grp)
    end,
  }
  F.proto_monitor = perfmon.monitor{ "ticks" }
  F.proto_monitor:close()
  local ok, err = pcall(function()
    for step = 1, F.steps do
      F.step = step
      local kind = F.rng:weighted(WEIGHTS, ORDER)
      local t0 = os.clock()
      STEPS[kind](F)
      check_state(F)
      if opts.progress and step % opts.progress == 0 then
        io.stderr:write(("fuzz: step %d, %d plugins, %d groups, %d coroutines\n")
          :format(step, #F.plugins, #F.groups, #F.pool))
      end
      local dt = os.clock() - t0
      if opts.slow and dt > opts.slow then
        io.stderr:write(("fuzz: step %d (%s) took %.2f s\n"):format(step, kind, dt))
      end
      if #F.monitors > 40 then -- forget closed monitors
        local open = {}
        for _, m in ipairs(F.monitors) do if not m.closed then open[#open + 1] = m end end
        F.monitors = open
      end
    end
  end)
  -- leave perfmon as we found it: close what the run opened
  for _, m in ipairs(F.monitors) do pcall(m.close, m) end
  if F.prof and F.profiling then pcall(F.prof.stop, F.prof) end
  repeat pcall(core.event_end) until not pcall(core.nested_leave)
  pcall(core.event_end)
  while pcall(core.blocking_end) do end
  for _, co in ipairs(F.pool) do pcall(coroutine.close, co) end
  os.remove(F.file)
  if not ok then error(err, 0) end
  return {
    seed = F.seed, steps = F.steps, errors = F.errors, host_only = F.host_only,
    groups = #F.groups, plugins = #F.plugins, digest = F.digest,
  }
end

return fuzz
