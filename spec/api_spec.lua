-- spec/api_spec.lua -- the public API of perfmon, as docs/api.md states it.
--
-- Ground truth for CPU times is a busy loop on os.clock run inside plugin
-- chunks: each call returns the CPU seconds it spun.  Work is done in short
-- pieces (one plugin call each) so that one lost measure (a migration to
-- another CPU is discarded by design) cannot sink a test; tolerances are
-- 25% plus a few ms, and "not charged" means below a small bound.

local perfmon = require("perfmon")
local truth = require("spec.support.truth")
-- debug.gethook hides perfmon's own hook while a monitor is open; this
-- one, kept before any opens, shows it
local raw_gethook = debug.gethook
local cjson = require("cjson")

local STAT_FIELDS = { "user_us", "system_us", "cpu_us", "blocking_us", "ticks",
                      "events", "event_us" }
local ALL_FIELDS = { "id", "name", "kind", "memberships", "user_us", "system_us",
                     "cpu_us", "blocking_us", "ticks", "durations", "longest",
                     "events", "event_us" }
local NOT_CHARGED_US = 1000

-- The plugin every test loads.  spin touches no global (its only upvalue is
-- `clock`), work touches globals (through _ENV), call runs another plugin's
-- function, block declares a blocking call.
local PLUGIN_SRC = [[
local clock = os.clock
local function spin(ms)
  local t0 = clock()
  local t = t0 + ms / 1000
  while clock() < t do end
  return clock() - t0
end
function work(ms)
  calls = (calls or 0) + 1
  return spin(ms)
end
local api = { spin = spin, work = work }
-- (parenthesised: not tail calls, so the caller's frame stays on the stack)
function api.call(f, ...) return (f(...)) end
function api.block(ms) return (perfmon.blocking(spin, ms)) end
function api.fail(msg) error(msg, 0) end
return api
]]

local seq = 0
local function chunkname(name)
  seq = seq + 1
  return ("=%s#%d"):format(name, seq)
end

local function new_env()
  return setmetatable({ perfmon = perfmon }, { __index = _G })
end

-- A plugin: its group, its api (the chunk has run) and its environment.
local function new_plugin(name, kind, env)
  local g = perfmon.group{ name = name, kind = kind or "plugin" }
  env = env or new_env()
  local main = assert(perfmon.load(PLUGIN_SRC, chunkname(name), env, g))
  return g, main(), env
end

-- Calls fn(piece_ms) until total_ms is spun; returns the CPU µs spun (as
-- measured inside the plugin) and the number of calls.
local function burn(fn, total_ms, piece_ms)
  piece_ms = piece_ms or 2
  local n = math.ceil(total_ms / piece_ms)
  local spent = 0
  for _ = 1, n do spent = spent + fn(piece_ms) end
  return spent * 1e6, n
end

local assert_near = truth.assert_near -- 25% + 3 ms

local function assert_not_charged(got_us, what)
  assert(got_us < NOT_CHARGED_US,
    ("%s: got %.0f µs, expected below %.0f µs"):format(what or "cpu_us", got_us, NOT_CHARGED_US))
end

local function sorted(list)
  local c = table.move(list, 1, #list, 1, {})
  table.sort(c)
  return c
end

local function find_chunk_group(snap, short_src)
  for _, st in pairs(snap.groups) do
    if st.kind == "chunk" and st.name == short_src then return st end
  end
end

local function is_int(x) return math.type(x) == "integer" end

-- Checks one stats record against the documented shape.
local function check_stats(st, id, allow_negative)
  for _, f in ipairs(ALL_FIELDS) do
    assert(st[f] ~= nil, ("stats of %s: field %s missing"):format(tostring(id), f))
  end
  assert.equals(id, st.id)
  assert.is_string(st.name)
  assert.is_string(st.kind)
  assert.is_table(st.memberships)
  for i, m in ipairs(st.memberships) do
    assert(is_int(m), "memberships[" .. i .. "] is not an integer")
  end
  for _, f in ipairs(STAT_FIELDS) do
    assert(is_int(st[f]), ("%s of %s is not an integer: %s"):format(f, tostring(id), tostring(st[f])))
    if not allow_negative then
      assert(st[f] >= 0, ("%s of %s is negative"):format(f, tostring(id)))
    end
  end
  assert(math.abs(st.cpu_us - (st.user_us + st.system_us)) <= 2,
    ("cpu_us %s ~= user_us %s + system_us %s"):format(st.cpu_us, st.user_us, st.system_us))
  assert.equals(10, #st.durations)
  local longest = 0
  for k = 1, 10 do
    assert(is_int(st.durations[k]), "durations[" .. k .. "] is not an integer")
    if not allow_negative then
      assert(st.durations[k] >= 0)
      -- an event that lasted 2^k ms also lasted 2^(k-1) ms
      if k > 1 then assert(st.durations[k] <= st.durations[k - 1], "durations not decreasing") end
    end
    if st.durations[k] ~= 0 then longest = k end
  end
  assert(is_int(st.longest))
  assert.equals(longest, st.longest)
  -- durations counts some of the events: those of 1 ms or more
  if not allow_negative then
    assert(st.events >= st.durations[1], ("events %d < durations[1] %d"):format(st.events, st.durations[1]))
  end
end

local function check_snapshot(snap, allow_negative)
  assert.is_table(snap)
  assert(is_int(snap.time), "time is not an integer")
  check_stats(snap.process, 0, allow_negative)
  assert.equals("process", snap.process.kind)
  for id, st in pairs(snap.groups) do -- live groups: ids need not be 1..n
    assert(is_int(id), "groups key is not an integer id")
    check_stats(st, id, allow_negative)
  end
end

-- Every value of `new` is >= the same value of `old`; a group of `old`
-- gone from `new` died between them (another spec's, its handle
-- collected), unless it is one of `alive`.
local function assert_monotonic(old, new, alive)
  assert(new.time >= old.time, "time went back")
  local function cmp(o, n, where)
    for _, f in ipairs(STAT_FIELDS) do
      assert(n[f] >= o[f], ("%s.%s went back: %s -> %s"):format(where, f, o[f], n[f]))
    end
    for k = 1, 10 do
      assert(n.durations[k] >= o.durations[k], ("%s.durations[%d] went back"):format(where, k))
    end
  end
  cmp(old.process, new.process, "process")
  for _, g in ipairs(alive) do
    assert(new.groups[g.id], "group " .. g.id .. " disappeared")
  end
  for id, st in pairs(old.groups) do
    if new.groups[id] then cmp(st, new.groups[id], "groups[" .. id .. "]") end
  end
end

-- Runs f and returns its error message (fails if it does not raise).
local function error_of(f)
  local ok, err = pcall(f)
  assert(not ok, "expected an error")
  return tostring(err)
end

describe("perfmon API", function()

  describe("groups", function()

    it("have distinct, increasing integer ids and keep their name and kind", function()
      local a = perfmon.group{ name = "alpha", kind = "plugin" }
      local b = perfmon.group{ name = "beta", kind = "page" }
      local c = perfmon.group{ name = "gamma", kind = "anything at all" }
      assert(is_int(a.id) and is_int(b.id) and is_int(c.id))
      assert(a.id >= 1)
      assert.equals(a.id + 1, b.id)
      assert.equals(b.id + 1, c.id)
      assert.equals("alpha", a.name)
      assert.equals("plugin", a.kind)
      assert.equals("beta", b.name)
      assert.equals("page", b.kind)
      assert.equals("anything at all", c.kind)
      assert.is_nil(a.nonexistent_field)
    end)

    it("tostring names the group's id, kind and name", function()
      local g = perfmon.group{ name = "spellcheck", kind = "plugin" }
      local s = tostring(g)
      assert.is_string(s)
      assert.truthy(s:find("spellcheck", 1, true), s)
      assert.truthy(s:find("plugin", 1, true), s)
      assert.truthy(s:find(tostring(g.id), 1, true), s)
    end)

    it("appear in snapshots with their id, name and kind, forever", function()
      local g = perfmon.group{ name = "listed", kind = "sandbox" }
      local m <close> = perfmon.monitor{ "ticks" }
      local snap = m:snapshot()
      local st = snap.groups[g.id]
      assert.is_table(st)
      assert.equals(g.id, st.id)
      assert.equals("listed", st.name)
      assert.equals("sandbox", st.kind)
    end)

    it("charge a plugin's work to its group: functions with and without _ENV", function()
      local g, p = new_plugin("charged")
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local spent1, n1 = burn(p.work, 40)   -- touches globals
      local spent2, n2 = burn(p.spin, 40)   -- touches none
      local d = m:snapshot():subtract(s0)
      assert.equals(n1 + n2, d.groups[g.id].ticks)
      assert_near(d.groups[g.id].cpu_us, spent1 + spent2)
      assert(d.process.cpu_us >= d.groups[g.id].cpu_us - 2, "a group has more CPU than the process")
    end)

    it("detach returns whether the environment was attached", function()
      local g = perfmon.group{ name = "det", kind = "plugin" }
      local other = perfmon.group{ name = "det-other", kind = "plugin" }
      local env = {}
      assert.is_false(perfmon.detach(env, g))          -- env never seen
      perfmon.attach(env, g)
      perfmon.attach(env, g)                           -- attaching twice is one attachment
      assert.is_false(perfmon.detach(env, other))      -- not attached to that group
      assert.is_true(perfmon.detach(env, g))
      assert.is_false(perfmon.detach(env, g))          -- not any more
      perfmon.attach(env, g)
      assert.is_true(perfmon.detach(env, g))
    end)

    it("after detach, the plugin's new work is no longer charged to that group", function()
      local g, p, env = new_plugin("detached")
      local keep = perfmon.group{ name = "still-attached", kind = "page" }
      perfmon.attach(env, keep)
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local spent, n = burn(p.work, 30)
      local s1 = m:snapshot()
      local d = s1:subtract(s0)
      assert_near(d.groups[g.id].cpu_us, spent)
      assert.equals(n, d.groups[g.id].ticks)

      assert.is_true(perfmon.detach(env, g))
      local spent1, n1 = burn(p.work, 30)
      local spent2, n2 = burn(p.spin, 30)
      d = m:snapshot():subtract(s1)
      assert_not_charged(d.groups[g.id].cpu_us)
      assert.equals(0, d.groups[g.id].ticks)
      -- the group it is still attached to is still charged
      assert_near(d.groups[keep.id].cpu_us, spent1 + spent2)
      assert.equals(n1 + n2, d.groups[keep.id].ticks)
    end)

    it("charge every group of an environment in several groups, and memberships show containment", function()
      local plugin = perfmon.group{ name = "nest-plugin", kind = "plugin" }
      local page = perfmon.group{ name = "nest-page", kind = "page" }
      local sandbox = perfmon.group{ name = "nest-sandbox", kind = "sandbox" }
      local plugin_env, page_env, sandbox_env = new_env(), new_env(), new_env()
      perfmon.attach(plugin_env, plugin)
      perfmon.attach(page_env, plugin)
      perfmon.attach(page_env, page)
      perfmon.attach(sandbox_env, plugin)
      perfmon.attach(sandbox_env, page)
      perfmon.attach(sandbox_env, sandbox)
      local p_plugin = assert(perfmon.load(PLUGIN_SRC, chunkname("nest-plugin"), plugin_env))()
      local p_page = assert(perfmon.load(PLUGIN_SRC, chunkname("nest-page"), page_env))()
      local p_sandbox = assert(perfmon.load(PLUGIN_SRC, chunkname("nest-sandbox"), sandbox_env))()

      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local t_sb, n_sb = burn(p_sandbox.work, 30)
      local s1 = m:snapshot()
      local d = s1:subtract(s0)
      for _, g in ipairs{ plugin, page, sandbox } do
        assert_near(d.groups[g.id].cpu_us, t_sb, g.name)
        assert.equals(n_sb, d.groups[g.id].ticks)
      end

      -- page code is charged to page and plugin, not to the sandbox
      local t_pg, n_pg = burn(p_page.spin, 30)
      local s2 = m:snapshot()
      d = s2:subtract(s1)
      assert_near(d.groups[plugin.id].cpu_us, t_pg, "plugin")
      assert_near(d.groups[page.id].cpu_us, t_pg, "page")
      assert.equals(n_pg, d.groups[page.id].ticks)
      assert_not_charged(d.groups[sandbox.id].cpu_us, "sandbox")
      assert.equals(0, d.groups[sandbox.id].ticks)

      -- plugin code is charged to the plugin only
      local t_pl, n_pl = burn(p_plugin.work, 30)
      local s3 = m:snapshot()
      d = s3:subtract(s2)
      assert_near(d.groups[plugin.id].cpu_us, t_pl, "plugin")
      assert.equals(n_pl, d.groups[plugin.id].ticks)
      assert_not_charged(d.groups[page.id].cpu_us, "page")
      assert_not_charged(d.groups[sandbox.id].cpu_us, "sandbox")
      assert.equals(0, d.groups[page.id].ticks)
      assert.equals(0, d.groups[sandbox.id].ticks)

      assert.same(sorted{ 0, plugin.id, page.id }, sorted(s3.groups[sandbox.id].memberships))
      assert.same(sorted{ 0, plugin.id }, sorted(s3.groups[page.id].memberships))
      assert.same({ 0 }, s3.groups[plugin.id].memberships)
    end)

    it("charge both groups when plugin A calls plugin B, and A once when B calls back into A", function()
      local ga, a = new_plugin("caller-A")
      local gb, b = new_plugin("callee-B")
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local spent, n = burn(function(ms) return a.call(b.spin, ms) end, 30)
      local s1 = m:snapshot()
      local d = s1:subtract(s0)
      assert_near(d.groups[ga.id].cpu_us, spent, "A")
      assert_near(d.groups[gb.id].cpu_us, spent, "B")
      assert.equals(n, d.groups[ga.id].ticks)
      assert.equals(n, d.groups[gb.id].ticks)

      -- A -> B -> A: A is charged once, not twice
      spent = burn(function(ms) return a.call(b.call, a.spin, ms) end, 30)
      d = m:snapshot():subtract(s1)
      assert_near(d.groups[ga.id].cpu_us, spent, "A")
      assert_near(d.groups[gb.id].cpu_us, spent, "B")
    end)
  end)

  describe("load and loadfile", function()

    it("perfmon.load attaches env to group and registers env-less functions before they run monitored", function()
      -- the chunk runs before any monitor: only perfmon.load's registration
      -- can tell that its env-less function `spin` belongs to the group
      local g = perfmon.group{ name = "registered", kind = "plugin" }
      local env = new_env()
      local main = assert(perfmon.load(PLUGIN_SRC, chunkname("registered"), env, g))
      assert.is_function(main)
      local p = main()
      assert.equals(nil, env.calls)
      assert.is_function(env.work)           -- defined in env, not in _G
      assert.is_nil(rawget(_G, "work"))

      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local spent, n = burn(p.spin, 40)
      local d = m:snapshot():subtract(s0)
      assert_near(d.groups[g.id].cpu_us, spent)
      assert.equals(n, d.groups[g.id].ticks)
    end)

    it("perfmon.load without a group loads with env and attaches nothing", function()
      local env = new_env()
      local f = assert(perfmon.load("x = 42; return ...", chunkname("nogroup"), env))
      assert.equals(7, f(7))
      assert.equals(42, env.x)
      assert.is_nil(rawget(_G, "x"))
    end)

    it("perfmon.loadfile loads a text file with env and group", function()
      local path = os.tmpname()
      finally(function() os.remove(path) end)
      local fh = assert(io.open(path, "w"))
      fh:write(PLUGIN_SRC)
      fh:close()
      local g = perfmon.group{ name = "from-file", kind = "plugin" }
      local env = new_env()
      local main = assert(perfmon.loadfile(path, env, g))
      local p = main()
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local spent1, n1 = burn(p.work, 25)
      local spent2, n2 = burn(p.spin, 25)
      local d = m:snapshot():subtract(s0)
      assert_near(d.groups[g.id].cpu_us, spent1 + spent2)
      assert.equals(n1 + n2, d.groups[g.id].ticks)
      assert.equals(n1, env.calls)
    end)

    it("return nil and the message on a syntax error, like load", function()
      local bad = "local x = = 1"
      local g = perfmon.group{ name = "syntax", kind = "plugin" }
      local f, msg = perfmon.load(bad, "=broken", new_env(), g)
      local _, want = load(bad, "=broken", "t", {})
      assert.is_nil(f)
      assert.is_string(msg)
      assert.equals(want, msg)

      local path = os.tmpname()
      finally(function() os.remove(path) end)
      local fh = assert(io.open(path, "w"))
      fh:write(bad)
      fh:close()
      f, msg = perfmon.loadfile(path, new_env(), g)
      local _, want_file = loadfile(path, "t", {})
      assert.is_nil(f)
      assert.equals(want_file, msg)

      f, msg = perfmon.loadfile(path .. ".does-not-exist", new_env(), g)
      assert.is_nil(f)
      assert.is_string(msg)
      assert.truthy(msg:find("cannot open", 1, true), msg)
    end)

    it("refuse binary chunks (mode is \"t\")", function()
      local dumped = string.dump(function() return 1 end)
      local f, msg = perfmon.load(dumped, "=bin", new_env())
      assert.is_nil(f)
      assert.is_string(msg)
      assert.truthy(msg:find("binary", 1, true), msg)

      local path = os.tmpname()
      finally(function() os.remove(path) end)
      local fh = assert(io.open(path, "wb"))
      fh:write(dumped)
      fh:close()
      f, msg = perfmon.loadfile(path, new_env())
      assert.is_nil(f)
      assert.is_string(msg)
      assert.truthy(msg:find("binary", 1, true), msg)
    end)
  end)

  describe("monitors", function()

    it("install no hook without a monitor, and remove it with the last", function()
      truth.alone(pending)
      assert.is_nil(raw_gethook())
      local m = perfmon.monitor{ "jank" }
      assert.is_not_nil(raw_gethook())
      m:close()
      assert.is_nil(raw_gethook())
    end)

    it("stay hooked while any monitor is open", function()
      truth.alone(pending)
      local m1 = perfmon.monitor{ "jank" }
      local m2 = perfmon.monitor{ "ticks" }
      m1:close()
      assert.is_not_nil(raw_gethook())
      m2:close()
      assert.is_nil(raw_gethook())
    end)

    it("closing twice does nothing (the other monitor keeps its probes)", function()
      truth.alone(pending)
      local g, p = new_plugin("close-twice")
      local m1 = perfmon.monitor{ "jank", "ticks" }
      local m2 = perfmon.monitor{ "jank", "ticks" }
      finally(function() m2:close() end)
      m1:close()
      m1:close()
      m1:close()
      assert.is_not_nil(raw_gethook())
      m1 = nil                         -- its finalizer must not release again
      collectgarbage()
      collectgarbage()
      assert.is_not_nil(raw_gethook())
      local s0 = m2:snapshot()
      local spent, n = burn(p.work, 30)
      local d = m2:snapshot():subtract(s0)
      assert_near(d.groups[g.id].cpu_us, spent)
      assert.equals(n, d.groups[g.id].ticks)
      m2:close()
      assert.is_nil(raw_gethook())
      m2:close()
      assert.is_nil(raw_gethook())
    end)

    it("a <close> variable releases the monitor at scope end", function()
      truth.alone(pending)
      do
        local m <close> = perfmon.monitor{ "jank", "ticks" }
        assert.is_not_nil(raw_gethook())
        assert.is_table(m:snapshot())
      end
      assert.is_nil(raw_gethook())
    end)

    it("a monitor dropped and collected releases its probes", function()
      truth.alone(pending)
      local g, p = new_plugin("dropped")
      perfmon.monitor{ "jank" }        -- dropped at once
      assert.is_not_nil(raw_gethook())
      collectgarbage()
      collectgarbage()
      assert.is_nil(raw_gethook())
      -- its "jank" is released too: a ticks-only monitor measures no CPU
      local m <close> = perfmon.monitor{ "ticks" }
      local s0 = m:snapshot()
      local _, n = burn(p.work, 20)
      local d = m:snapshot():subtract(s0)
      assert.equals(n, d.groups[g.id].ticks)
      assert.equals(0, d.groups[g.id].cpu_us)
    end)

    it("open over another debug hook, which they call and leave in place", function()
      truth.alone(pending)
      local calls = 0
      local function foreign() calls = calls + 1 end
      debug.sethook(foreign, "c")
      local m = perfmon.monitor{ "jank" }
      assert.equals("external hook", raw_gethook()) -- perfmon's, calling foreign
      assert.equals(foreign, debug.gethook())
      -- (busted's environment calls functions to find a global: locals only)
      local abs = math.abs
      calls = 0
      abs(1)
      local n = calls
      assert.equals(1, n)
      m:close()
      assert.equals(foreign, raw_gethook())
      debug.sethook()
      assert.is_nil(raw_gethook())
    end)

    it("snapshot on a closed monitor raises", function()
      local m = perfmon.monitor{ "jank" }
      m:close()
      local err = error_of(function() m:snapshot() end)
      assert.truthy(err:find("closed", 1, true), err)
    end)

    it("with only \"ticks\", groups get no CPU time but ticks count", function()
      truth.alone(pending)
      local g, p = new_plugin("ticks-only")
      local m <close> = perfmon.monitor{ "ticks" }
      local s0 = m:snapshot()
      local n = 0
      for _ = 1, 3 do
        perfmon.event(function() local _, k = burn(p.work, 10); n = n + k end)
      end
      local d = m:snapshot():subtract(s0)
      local st = d.groups[g.id]
      assert.equals(n, st.ticks)
      assert.equals(0, st.cpu_us)
      assert.equals(0, st.user_us)
      assert.equals(0, st.system_us)
      assert.same({ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, st.durations)
      assert.equals(3, d.process.ticks)   -- the process counts events
    end)

    it("with only \"ticks\", the process gets no CPU time either", function()
      truth.alone(pending)
      local _, p = new_plugin("ticks-only-process")
      local m <close> = perfmon.monitor{ "ticks" }
      local s0 = m:snapshot()
      for _ = 1, 3 do perfmon.event(function() burn(p.work, 10) end) end
      local d = m:snapshot():subtract(s0)
      assert.equals(0, d.process.cpu_us)
      assert.equals(0, d.process.user_us)
      assert.equals(0, d.process.system_us)
      assert.same({ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, d.process.durations)
    end)

    it("with only \"jank\", CPU time is measured but ticks stay 0", function()
      truth.alone(pending)
      local g, p = new_plugin("jank-only")
      local m <close> = perfmon.monitor{ "jank" }
      local s0 = m:snapshot()
      local spent = 0
      for _ = 1, 3 do
        perfmon.event(function() spent = spent + burn(p.work, 10) end)
      end
      local d = m:snapshot():subtract(s0)
      assert.equals(0, d.groups[g.id].ticks)
      assert_near(d.groups[g.id].cpu_us, spent)
      assert.equals(3, d.groups[g.id].durations[1])  -- three events of >= 1 ms
      assert(d.process.cpu_us >= 0.75 * spent, "process CPU below the plugin's")
    end)

    it("with only \"jank\", the process ticks stay 0", function()
      truth.alone(pending)
      local _, p = new_plugin("jank-only-process")
      local m <close> = perfmon.monitor{ "jank" }
      local s0 = m:snapshot()
      for _ = 1, 3 do perfmon.event(function() burn(p.work, 4) end) end
      local d = m:snapshot():subtract(s0)
      assert.equals(0, d.process.ticks)
    end)

    it("\"chunks\" makes a group of kind \"chunk\" for a chunk that ran, inside its plugin's group", function()
      local g = perfmon.group{ name = "chunky", kind = "plugin" }
      local env = new_env()
      local name = chunkname("chunky")
      local p = assert(perfmon.load(PLUGIN_SRC, name, env, g))()
      local m <close> = perfmon.monitor{ "chunks", "ticks", "jank" }
      local s0 = m:snapshot()
      assert.is_nil(find_chunk_group(s0, name:sub(2)))  -- has not run under "chunks"
      local spent, n = burn(p.work, 30)
      local s1 = m:snapshot()
      local cg = find_chunk_group(s1, name:sub(2))
      assert.is_table(cg, "no chunk group named " .. name:sub(2))
      assert.equals("chunk", cg.kind)
      assert.same(sorted{ 0, g.id }, sorted(cg.memberships))
      local d = s1:subtract(s0)
      assert.equals(n, d.groups[cg.id].ticks)
      assert_near(d.groups[cg.id].cpu_us, spent, "chunk group")
      assert.equals(n, d.groups[g.id].ticks)
      assert_near(d.groups[g.id].cpu_us, spent, "plugin group")
    end)

    it("report values that are monotonic across monitors", function()
      truth.alone(pending)
      local g, p = new_plugin("monotonic")
      local m1 = perfmon.monitor{ "jank", "ticks", "blocking" }
      perfmon.event(function() burn(p.work, 20) end)
      local s1 = m1:snapshot()
      m1:close()
      assert.is_true(s1.groups[g.id].cpu_us > 0)
      assert.is_true(s1.groups[g.id].ticks > 0)

      burn(p.work, 10)  -- unmonitored

      local m2 <close> = perfmon.monitor{ "jank", "ticks", "blocking" }
      local s2 = m2:snapshot()
      assert_monotonic(s1, s2, { g })
      local spent, n = 0, 0
      perfmon.event(function() spent, n = burn(p.work, 20) end)
      local s3 = m2:snapshot()
      assert_monotonic(s2, s3, { g })
      assert.equals(s1.groups[g.id].ticks + n, s3.groups[g.id].ticks)
      assert_near(s3.groups[g.id].cpu_us - s1.groups[g.id].cpu_us, spent)
    end)
  end)

  describe("snapshots", function()

    it("have the documented shape", function()
      local plugin = perfmon.group{ name = "shape-plugin", kind = "plugin" }
      local g, p, env = new_plugin("shape-sandbox", "sandbox")
      perfmon.attach(env, plugin)
      local m <close> = perfmon.monitor{ "jank", "ticks", "blocking", "chunks" }
      perfmon.event(function() burn(p.work, 6) end)
      local snap = m:snapshot()
      check_snapshot(snap)
      -- µs since the epoch
      assert(math.abs(snap.time / 1e6 - os.time()) < 5, "time is not µs since the epoch: " .. snap.time)
      assert.equals(0, snap.process.id)
      assert.is_table(snap.groups[g.id])
      assert.equals("shape-sandbox", snap.groups[g.id].name)
      assert.equals("sandbox", snap.groups[g.id].kind)
      assert.same(sorted{ 0, plugin.id }, sorted(snap.groups[g.id].memberships))
      assert.is_true(snap.groups[g.id].durations[1] >= 1)
      assert.is_true(snap.process.ticks >= 1)
    end)

    it("count events in durations by length, and longest follows", function()
      truth.alone(pending)
      local g, p = new_plugin("durations")
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local long = 0
      perfmon.event(function() long = burn(p.work, 24) end) -- >= 16 ms, < 32 ms
      perfmon.event(function() p.work(0.2) end)             -- < 1 ms
      local s1 = m:snapshot()
      check_snapshot(s1)
      local d = s1:subtract(s0)
      check_snapshot(d)
      local st = d.groups[g.id]
      assert_near(st.cpu_us, long)
      assert.same({ 1, 1, 1, 1, 1, 0, 0, 0, 0, 0 }, st.durations)
      assert.equals(5, st.longest)
      assert.is_true(s1.groups[g.id].longest >= 5)
      assert.equals(2, d.process.ticks)
      assert.equals(1, d.process.durations[5])
      assert.equals(0, d.process.durations[7])   -- no event of >= 64 ms
    end)

    it("subtract gives the differences, in the same shape, with elapsed time", function()
      truth.alone(pending)
      local g, p = new_plugin("subtract")
      local m <close> = perfmon.monitor{ "jank", "ticks", "blocking" }
      perfmon.event(function() burn(p.work, 6) end)
      local s1 = m:snapshot()
      local spent, n = 0, 0
      perfmon.event(function() spent, n = burn(p.work, 30) end)
      local s2 = m:snapshot()
      local s1_json, s2_json = perfmon.json(s1), perfmon.json(s2)
      local d = s2:subtract(s1)
      check_snapshot(d)
      assert.equals(s1_json, perfmon.json(s1))  -- neither operand changed
      assert.equals(s2_json, perfmon.json(s2))
      assert.equals(s2.time - s1.time, d.time)
      assert(d.time >= 0.75 * spent, ("elapsed %.0f µs < CPU spun %.0f µs"):format(d.time, spent))
      local function check_diff(dst, new, old)
        assert.equals(new.id, dst.id)
        assert.equals(new.name, dst.name)
        assert.equals(new.kind, dst.kind)
        assert.same(new.memberships, dst.memberships)
        for _, f in ipairs(STAT_FIELDS) do
          assert.equals(new[f] - old[f], dst[f])
        end
        for k = 1, 10 do
          assert.equals(new.durations[k] - old.durations[k], dst.durations[k])
        end
      end
      check_diff(d.process, s2.process, s1.process)
      for id, st in pairs(s2.groups) do
        assert.is_table(d.groups[id])
        check_diff(d.groups[id], st, s1.groups[id])
      end
      for id in pairs(d.groups) do assert.is_table(s2.groups[id]) end
      assert.equals(n, d.groups[g.id].ticks)
      assert_near(d.groups[g.id].cpu_us, spent)
      assert.equals(1, d.groups[g.id].durations[1])
      assert.equals(1, d.groups[g.id].events)
      assert_near(d.groups[g.id].event_us, spent)
      assert.equals(1, d.process.ticks)
      assert.equals(1, d.process.events)
    end)

    it("subtract counts a group made after the older snapshot from zero", function()
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s1 = m:snapshot()
      local g, p = new_plugin("newcomer")     -- its chunk runs: one tick
      assert.is_nil(s1.groups[g.id])
      local spent, n = 0, 0
      perfmon.event(function() spent, n = burn(p.work, 20) end)
      local s2 = m:snapshot()
      local d = s2:subtract(s1)
      local st = d.groups[g.id]
      assert.is_table(st)
      check_stats(st, g.id)
      for _, f in ipairs(STAT_FIELDS) do
        assert.equals(s2.groups[g.id][f], st[f])
      end
      assert.same(s2.groups[g.id].durations, st.durations)
      assert.equals(n + 1, st.ticks)
      assert_near(st.cpu_us, spent)
      assert.equals("newcomer", st.name)
    end)

    it("equals compares time and every statistic", function()
      truth.alone(pending)
      local g, p = new_plugin("equals")
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      perfmon.event(function() burn(p.work, 4) end)
      collectgarbage() -- earlier tests' dropped groups die now, not between s1 and s2
      local s1 = m:snapshot()
      assert.is_true(s1:equals(s1))
      -- two zero diffs taken at different instants are equal
      local z1 = s1:subtract(s1)
      burn(p.work, 4)
      local s2 = m:snapshot()
      local z2 = s2:subtract(s2)
      assert.is_true(z1:equals(z2))
      assert.is_true(z2:equals(z1))
      -- a difference computed twice is equal to itself
      assert.is_true(s2:subtract(s1):equals(s2:subtract(s1)))
      -- but not to a zero diff, and two snapshots of different instants differ
      assert.is_false(s2:subtract(s1):equals(z1))
      assert.is_false(s1:equals(s2))
      assert.is_false(s2:equals(s1))

      local function differs(mutate)
        local z = s1:subtract(s1)
        mutate(z)
        assert.is_false(z1:equals(z))
        assert.is_false(z:equals(z1))
      end
      differs(function(z) z.time = 1 end)
      differs(function(z) z.groups[g.id].ticks = 1 end)
      differs(function(z) z.groups[g.id].cpu_us = 1 end)
      differs(function(z) z.process.blocking_us = 1 end)
      differs(function(z) z.process.durations[3] = 1 end)
      differs(function(z) z.groups[g.id].events = 1 end)
      differs(function(z) z.process.event_us = 1 end)
      differs(function(z) z.groups[g.id].memberships[#z.groups[g.id].memberships + 1] = 99 end)
      differs(function(z) z.groups[g.id].name = "renamed" end)
      differs(function(z) z.groups[g.id] = nil end)
      differs(function(z) z.groups[#z.groups + 1] = z.groups[g.id] end)
    end)

    it("perfmon.json encodes valid JSON that cjson decodes to the same numbers", function()
      local page = perfmon.group{ name = "json-page", kind = "page" }
      local g, p, env = new_plugin("json \"quoted\" name", "sandbox")
      perfmon.attach(env, page)
      local m <close> = perfmon.monitor{ "jank", "ticks", "blocking" }
      perfmon.event(function() burn(p.work, 6) end)
      local snap = m:snapshot()
      local text = perfmon.json(snap)
      assert.is_string(text)
      local ok, back = pcall(cjson.decode, text)
      assert(ok, "not valid JSON: " .. tostring(back))
      -- memberships are always arrays, even when empty (the process's)
      assert.is_nil(text:find('"memberships":{', 1, true))
      assert.truthy(text:find('"memberships":[', 1, true))

      local function same_stats(st, got)
        assert.is_table(got)
        assert.equals(st.id, got.id)
        assert.equals(st.name, got.name)
        assert.equals(st.kind, got.kind)
        for _, f in ipairs(STAT_FIELDS) do assert.equals(st[f], got[f]) end
        assert.equals(st.longest, got.longest)
        assert.equals(#st.durations, #got.durations)
        for k = 1, #st.durations do assert.equals(st.durations[k], got.durations[k]) end
        assert.equals(#st.memberships, #got.memberships)
        for k = 1, #st.memberships do assert.equals(st.memberships[k], got.memberships[k]) end
      end
      same_stats(snap.process, back.process)
      local n = 0
      for id, st in pairs(snap.groups) do
        same_stats(st, back.groups[tostring(id)])
        n = n + 1
      end
      local nback = 0
      for _ in pairs(back.groups) do nback = nback + 1 end
      assert.equals(n, nback)
      assert.is_true(back.groups[tostring(g.id)].cpu_us > 0)
      -- a difference encodes too
      local d = m:snapshot():subtract(snap)
      local dback = cjson.decode(perfmon.json(d))
      same_stats(d.groups[g.id], dback.groups[tostring(g.id)])
      assert.equals(d.time, dback.time)
      -- time (µs since the epoch: 16 digits) must survive too
      assert.equals(snap.time, back.time)
    end)
  end)

  describe("events", function()

    it("perfmon.event returns fn's results, nils included", function()
      truth.alone(pending)
      local m <close> = perfmon.monitor{ "ticks" }
      local s0 = m:snapshot()
      local r = table.pack(perfmon.event(function(a, b) return a + b, nil, "x", nil end, 1, 2))
      assert.equals(4, r.n)
      assert.equals(3, r[1])
      assert.is_nil(r[2])
      assert.equals("x", r[3])
      assert.equals(0, select("#", perfmon.event(function() end)))
      assert.equals(2, m:snapshot():subtract(s0).process.ticks)
    end)

    it("perfmon.event re-raises fn's error and closes the event", function()
      truth.alone(pending)
      local _, p = new_plugin("raises")
      local m <close> = perfmon.monitor{ "ticks" }
      local s0 = m:snapshot()
      local obj = {}
      local ok, err = pcall(perfmon.event, function() error(obj) end)
      assert.is_false(ok)
      assert.equals(obj, err)              -- the very error value
      ok, err = pcall(perfmon.event, p.fail, "plugin failed")
      assert.is_false(ok)
      assert.equals("plugin failed", err)
      -- the event was closed: a new one can begin and end
      perfmon.event_begin()
      perfmon.event_end()
      assert.equals(3, m:snapshot():subtract(s0).process.ticks)
    end)

    it("the brackets run fn across a yield and return its results when resumed", function()
      truth.alone(pending)
      local m <close> = perfmon.monitor{ "ticks" }
      local s0 = m:snapshot()
      for _, bracket in ipairs{ perfmon.event, perfmon.nested_loop, perfmon.blocking } do
        local co = coroutine.wrap(function(a)
          return bracket(function(x)
            local y, z = coroutine.yield(x + 1)
            return x, y, z
          end, a)
        end)
        assert.equals(11, co(10))              -- suspended inside the bracket
        local r = table.pack(co("y", nil))     -- resumed: fn returns through it
        assert.same({ n = 3, 10, "y", nil }, r)
      end
      -- each bracket was closed: no event, nested loop or blocking call is left open
      assert.has_error(function() perfmon.event_end() end)
      assert.has_error(function() require("perfmon.core").nested_leave() end)
      assert.has_error(function() require("perfmon.core").blocking_end() end)
      assert.equals(1, m:snapshot():subtract(s0).process.ticks)
    end)

    it("the brackets take a callable table, and name the caller's line for anything else", function()
      local called = setmetatable({}, { __call = function(self, a) return self, a end })
      local self, a = perfmon.event(called, 7)
      assert.equals(called, self)
      assert.equals(7, a)
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(function() perfmon.event(setmetatable({}, {})) end)
      assert.is_false(ok)
      assert.matches("api_spec.lua:" .. line .. ": bad argument #1 to 'perfmon.event' %(function expected, got table%)", err)
      line = debug.getinfo(1, "l").currentline + 2
      perfmon.event_begin()
      ok, err = pcall(function() perfmon.event(print) end)
      perfmon.event_end()
      assert.is_false(ok)
      assert.matches("api_spec.lua:" .. line .. ": event_begin: an event is already open", err)
    end)

    it("event_begin twice raises; event_end without begin raises", function()
      truth.alone(pending)
      local m <close> = perfmon.monitor{ "ticks" }
      local s0 = m:snapshot()
      perfmon.event_begin()
      local err = error_of(function() perfmon.event_begin() end)
      assert.truthy(err:find("event_begin", 1, true), err)
      perfmon.event_end()                  -- the first event is still open
      err = error_of(function() perfmon.event_end() end)
      assert.truthy(err:find("event_end", 1, true), err)
      err = error_of(function() perfmon.event_end() end)
      assert.truthy(err:find("event_end", 1, true), err)
      assert.equals(1, m:snapshot():subtract(s0).process.ticks)
    end)

    it("a snapshot inside an open event leaves it out; its end commits it", function()
      local g, p = new_plugin("open-event")
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      perfmon.event_begin()
      local spent = burn(p.work, 30)
      local inside = m:snapshot():subtract(s0)
      perfmon.event_end()
      local after = m:snapshot():subtract(s0)
      assert_not_charged(inside.groups[g.id].cpu_us)
      assert_near(after.groups[g.id].cpu_us, spent)
      assert.equals(1, after.groups[g.id].durations[1])
    end)

    it("nested_loop returns fn's results and re-raises its error, leaving the loop", function()
      local _ <close> = perfmon.monitor{ "ticks" }
      local r = table.pack(perfmon.nested_loop(function(a) return a, nil, a * 2 end, 21))
      assert.equals(3, r.n)
      assert.equals(21, r[1])
      assert.equals(42, r[3])
      local obj = {}
      perfmon.event_begin()
      local ok, err = pcall(perfmon.nested_loop, function() error(obj) end)
      assert.is_false(ok)
      assert.equals(obj, err)
      -- back in the outer loop: its event is still the open one
      perfmon.event_end()
      assert.has_error(function() perfmon.event_end() end)
      -- and nesting works again, inside an event
      assert.equals("in", perfmon.event(function()
        return perfmon.nested_loop(function() return perfmon.event(function() return "in" end) end)
      end))
    end)

    it("blocking returns fn's results, re-raises its error, and still counts afterwards", function()
      local g, p = new_plugin("blocker")
      local m <close> = perfmon.monitor{ "blocking", "jank", "ticks" }
      local r = table.pack(perfmon.blocking(function(a, b) return b, a end, "a", "b"))
      assert.equals(2, r.n)
      assert.equals("b", r[1])
      assert.equals("a", r[2])
      local obj = {}
      local ok, err = pcall(perfmon.blocking, function() error(obj) end)
      assert.is_false(ok)
      assert.equals(obj, err)
      ok = pcall(p.block, nil) -- spin(nil) raises inside the blocking call
      assert.is_false(ok)

      local s0 = m:snapshot()
      local spent = 0
      perfmon.event(function()
        for _ = 1, 10 do spent = spent + p.block(2) end
      end)
      local d = m:snapshot():subtract(s0)
      spent = spent * 1e6
      local st = d.groups[g.id]
      assert(st.blocking_us >= 0.75 * spent - 3000,
        ("group blocking_us %.0f < blocked %.0f"):format(st.blocking_us, spent))
      assert(st.blocking_us <= d.time, "blocking longer than the elapsed time")
      assert(d.process.blocking_us >= 0.75 * spent - 3000,
        ("process blocking_us %.0f < blocked %.0f"):format(d.process.blocking_us, spent))
      assert(d.process.blocking_us <= d.time)
    end)

    it("misuse leaves perfmon working: a later correct event still commits", function()
      truth.alone(pending)
      local g, p = new_plugin("after-misuse")
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      assert.has_error(function() perfmon.event_end() end)
      perfmon.event_begin()
      assert.has_error(function() perfmon.event_begin() end)
      local spent1, n1 = burn(p.work, 24)
      perfmon.event_end()
      assert.has_error(function() perfmon.event_end() end)
      local spent2, n2 = 0, 0
      perfmon.event(function() spent2, n2 = burn(p.spin, 24) end)
      local d = m:snapshot():subtract(s0)
      assert.equals(2, d.process.ticks)
      assert.equals(n1 + n2, d.groups[g.id].ticks)
      assert_near(d.groups[g.id].cpu_us, spent1 + spent2)
      assert.equals(2, d.groups[g.id].durations[4])  -- two events of >= 8 ms
      assert.equals(0, d.groups[g.id].durations[6])  -- none of >= 32 ms
    end)
  end)

  describe("while the state closes", function()
    it("the markers say so, not that they were misused", function()
      -- a finalizer lua_close runs after perfmon's own (its object was made
      -- first), in a child Lua
      local out = truth.child([[
        local keep = setmetatable({}, { __gc = function()
          local core = package.loaded["perfmon.core"]
          for _, name in ipairs{ "event_begin", "event_end", "nested_enter", "blocking_begin" } do
            local ok, err = pcall(core[name])
            io.write(name, " ", tostring(ok), " ", tostring(err), "\n")
          end
        end })
        require("perfmon")
      ]])
      local n = 0
      for name, ok, err in out:gmatch("(%S+) (%S+) ([^\n]*)\n") do
        assert.are.equal("false", ok, name)
        assert.are.equal("perfmon: the state is closing", err, name)
        n = n + 1
      end
      assert.are.equal(4, n, out)
    end)
  end)

  describe("bad input", function()
    local g = perfmon.group{ name = "bad-input", kind = "plugin" }
    local env = new_env()
    local m0 = perfmon.monitor{ "ticks" }
    local snap = m0:snapshot()
    m0:close()

    -- { call, function, patterns the message must contain }
    local cases = {
      { "group(nil)", function() perfmon.group(nil) end, { "bad argument #1 to 'perfmon.group'", "table expected" } },
      { "group(\"x\")", function() perfmon.group("x") end, { "bad argument #1 to 'perfmon.group'", "table expected" } },
      { "group{name=1}", function() perfmon.group{ name = 1 } end, { "bad argument #1 to 'perfmon.group'", "name", "string" } },
      { "group{name=1,kind=\"plugin\"}", function() perfmon.group{ name = 1, kind = "plugin" } end, { "bad argument #1 to 'perfmon.group'", "name", "string" } },
      { "group{name=\"a\"}", function() perfmon.group{ name = "a" } end, { "bad argument #1 to 'perfmon.group'", "kind", "string" } },
      { "group{name=\"\",kind=\"x\"}", function() perfmon.group{ name = "", kind = "x" } end, { "bad argument #1 to 'perfmon.group'", "name", "empty" } },
      { "attach(nil, g)", function() perfmon.attach(nil, g) end, { "bad argument #1 to 'perfmon.attach'", "table expected" } },
      { "attach({}, \"notagroup\")", function() perfmon.attach({}, "notagroup") end, { "bad argument #2 to 'perfmon.attach'", "group expected" } },
      { "attach({}, {})", function() perfmon.attach({}, {}) end, { "bad argument #2 to 'perfmon.attach'", "group expected" } },
      { "attach({})", function() perfmon.attach({}) end, { "bad argument #2 to 'perfmon.attach'", "group expected" } },
      { "detach(nil, g)", function() perfmon.detach(nil, g) end, { "bad argument #1 to 'perfmon.detach'", "table expected" } },
      { "detach({}, \"notagroup\")", function() perfmon.detach({}, "notagroup") end, { "bad argument #2 to 'perfmon.detach'", "group expected" } },
      { "detach({}, {})", function() perfmon.detach({}, {}) end, { "bad argument #2 to 'perfmon.detach'", "group expected" } },
      { "load(123, ...)", function() perfmon.load(123, "=x", env, g) end, { "bad argument #1 to 'perfmon.load'", "string" } },
      { "load(\"x\", 5, env)", function() perfmon.load("x", 5, env) end, { "bad argument #2 to 'perfmon.load'", "string expected" } },
      { "load(\"return 1\", \"=x\", nil)", function() perfmon.load("return 1", "=x", nil) end, { "bad argument #3 to 'perfmon.load'", "table expected" } },
      { "load(..., env, \"notagroup\")", function() perfmon.load("return 1", "=x", env, "notagroup") end, { "bad argument #4 to 'perfmon.load'", "group expected" } },
      { "loadfile(nil)", function() perfmon.loadfile(nil) end, { "bad argument #1 to 'perfmon.loadfile'", "string expected" } },
      { "loadfile(path, nil)", function() perfmon.loadfile("/nonexistent.lua", nil) end, { "bad argument #2 to 'perfmon.loadfile'", "table expected" } },
      { "loadfile(path, env, {})", function() perfmon.loadfile("/nonexistent.lua", env, {}) end, { "bad argument #3 to 'perfmon.loadfile'", "group expected" } },
      { "monitor(nil)", function() perfmon.monitor(nil) end, { "bad argument #1 to 'perfmon.monitor'", "table" } },
      { "monitor{}", function() perfmon.monitor{} end, { "bad argument #1 to 'perfmon.monitor'", "probe" } },
      { "monitor{\"nope\"}", function() perfmon.monitor{ "nope" } end, { "bad argument #1 to 'perfmon.monitor'", "nope" } },
      { "monitor{1}", function() perfmon.monitor{ 1 } end, { "bad argument #1 to 'perfmon.monitor'", "probe" } },
      { "monitor{\"ticks\", \"nope\"}", function() perfmon.monitor{ "ticks", "nope" } end, { "bad argument #1 to 'perfmon.monitor'", "nope" } },
      { "monitor{\"jank\\0x\"}", function() perfmon.monitor{ "jank\0x" } end, { "bad argument #1 to 'perfmon.monitor'", "unknown probe" } },
      { "snap:subtract(nil)", function() snap:subtract(nil) end, { "bad argument #1 to 'snapshot:subtract'", "snapshot expected" } },
      { "snap:subtract({})", function() snap:subtract({}) end, { "bad argument #1 to 'snapshot:subtract'", "snapshot expected" } },
      { "json(nil)", function() perfmon.json(nil) end, { "bad argument #1 to 'perfmon.json'", "snapshot expected" } },
      { "json({})", function() perfmon.json({}) end, { "bad argument #1 to 'perfmon.json'", "snapshot expected" } },
      { "event(nil)", function() perfmon.event(nil) end, { "bad argument #1 to 'perfmon.event'", "function expected" } },
      { "event(42)", function() perfmon.event(42) end, { "bad argument #1 to 'perfmon.event'", "function expected" } },
      { "nested_loop(\"x\")", function() perfmon.nested_loop("x") end, { "bad argument #1 to 'perfmon.nested_loop'", "function expected" } },
      { "blocking({})", function() perfmon.blocking({}) end, { "bad argument #1 to 'perfmon.blocking'", "function expected" } },
      -- option tables: an unknown field is an error, never ignored
      { "group{kindd=...}", function() perfmon.group{ name = "a", kindd = "plugin" } end,
        { "bad argument #1 to 'perfmon.group'", 'unknown field "kindd" (fields: name, kind, library)' } },
      { "group{..., [1]=...}", function() perfmon.group{ "a", name = "a", kind = "plugin" } end,
        { "bad argument #1 to 'perfmon.group'", "unknown field [1]" } },
      { "group{name=\"a\"}: kind is required", function() perfmon.group{ name = "a" } end,
        { "bad argument #1 to 'perfmon.group'", "field 'kind' is required (a string)" } },
      { "group{..., library=1}", function() perfmon.group{ name = "a", kind = "plugin", library = 1 } end,
        { "bad argument #1 to 'perfmon.group'", "field 'library' must be a boolean, got number" } },
      { "monitor{..., rate=1}", function() perfmon.monitor{ "jank", rate = 1 } end,
        { "bad argument #1 to 'perfmon.monitor'", 'unknown field "rate" (a list, and fields: mode, rate_us, window_ms, timer)' } },
      { "monitor{\"jank\", nil, \"ticks\"}", function() perfmon.monitor{ "jank", nil, "ticks" } end,
        { "bad argument #1 to 'perfmon.monitor'", "unknown field [3]" } },
      -- types are not converted: a number is no prefix
      { "attach_source(42, g)", function() perfmon.attach_source(42, g) end,
        { "bad argument #1 to 'perfmon.attach_source'", "string expected, got number" } },
      { "detach_source(42, g)", function() perfmon.detach_source(42, g) end,
        { "bad argument #1 to 'perfmon.detach_source'", "string expected, got number" } },
      { "animation(1)", function() perfmon.animation(1) end,
        { "bad argument #1 to 'perfmon.animation'", "boolean expected, got number" } },
      { "merge(nil)", function() perfmon.merge(nil) end,
        { "bad argument #1 to 'perfmon.merge'", "list of snapshots expected" } },
      { "snapshot_from_json(nil)", function() perfmon.snapshot_from_json(nil) end,
        { "bad argument #1 to 'perfmon.snapshot_from_json'", "string expected" } },
      { "openmetrics(nil)", function() perfmon.openmetrics(nil) end,
        { "bad argument #1 to 'perfmon.openmetrics'", "snapshot expected" } },
      { "snap.subtract(snap)", function() snap.subtract(snap) end,
        { "bad argument #1 to 'snapshot:subtract'", "snapshot expected, got nil" } },
    }

    it("names the public function however it is called", function()
      -- Lua's own name for a C function depends on the call: the field
      -- ("group"), a local's name, or where package.loaded holds it
      -- ("perfmon.core.group"); perfmon's messages name the function as
      -- the API does
      local group, attach = perfmon.group, perfmon.attach
      local core = require("perfmon.core")
      for _, f in ipairs{
        function() perfmon.group{ name = 1 } end,
        function() group{ name = 1 } end,
        function() core.group{ name = 1 } end,
      } do
        assert.matches("bad argument #1 to 'perfmon.group' %(field 'name' must be a string, got number%)", error_of(f))
      end
      for _, f in ipairs{ attach, core.attach, perfmon.attach } do
        local ok, err = pcall(f, {}, 1) -- called by pcall: Lua has no name for it
        assert.is_false(ok)
        assert.matches("bad argument #2 to 'perfmon.attach' (perfmon.group expected, got number)", err, 1, true)
      end
    end)

    local function check_case(case)
      local call, f, patterns = case[1], case[2], case[3]
      assert.has_error(f)
      local err = error_of(f)
      for _, pat in ipairs(patterns) do
        assert(err:find(pat, 1, true), ("%s: message %q does not mention %q"):format(call, err, pat))
      end
    end

    for _, case in ipairs(cases) do
      it(case[1] .. " raises a clear error", function()
        check_case(case)
      end)
    end

    -- (the messages are checked case by case above; here, that each raises)
    local function raise_all()
      for _, case in ipairs(cases) do
        local err = error_of(case[2])
        assert(err:find("bad argument #", 1, true), case[1] .. ": " .. err)
      end
    end

    it("leaves perfmon working after all of them, with and without a monitor open", function()
      truth.alone(pending)
      raise_all()
      assert.is_nil(raw_gethook())             -- no failed monitor left a hook
      local gp, p = new_plugin("after-bad-input")
      do
        local _ <close> = perfmon.monitor{ "jank", "ticks" }
        raise_all()
        perfmon.event_begin()
        raise_all()
        perfmon.event_end()
      end
      assert.is_nil(raw_gethook())
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local spent, n = 0, 0
      perfmon.event(function() spent, n = burn(p.work, 30) end)
      local d = m:snapshot():subtract(s0)
      assert_near(d.groups[gp.id].cpu_us, spent)
      assert.equals(n, d.groups[gp.id].ticks)
      assert.equals(1, d.process.ticks)
      assert.equals(0, d.groups[g.id].ticks)
      assert.is_table(cjson.decode(perfmon.json(d)))
    end)
  end)

  describe("error positions", function()
    it("name the caller's line, also for arguments checked by a helper", function()
      local cases = {
        function() perfmon.monitor{ "nope" } end,
        function() perfmon.monitor{} end,
        function() perfmon.event(42) end,
        function() perfmon.load("return 1", "=x", nil) end,
        function() perfmon.load("return 1", "=x", {}, "notagroup") end,
        function() perfmon.loadfile("x.lua", nil) end,
        function() perfmon.json(nil) end,
        function() perfmon.attach(nil, nil) end,
      }
      for i, f in ipairs(cases) do
        local ok, err = pcall(f)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("api_spec.lua:%d+: bad argument"),
          ("case %d: %s"):format(i, tostring(err)))
      end
    end)
  end)

  describe("limits", function()

    it("an environment attached to 31 groups works; the 32nd attach raises", function()
      local env = new_env()
      local groups = {}
      for i = 1, 31 do
        groups[i] = perfmon.group{ name = "many-" .. i, kind = "layer" }
        perfmon.attach(env, groups[i])
      end
      perfmon.attach(env, groups[31])           -- attached already: not a 32nd
      local extra = perfmon.group{ name = "many-32", kind = "layer" }
      local err = error_of(function() perfmon.attach(env, extra) end)
      assert.truthy(err:find("bad argument #1 to 'perfmon.attach'", 1, true), err)
      assert.truthy(err:find("31", 1, true), err)
      assert.is_false(perfmon.detach(env, extra))  -- the failed attach changed nothing

      local p = assert(perfmon.load(PLUGIN_SRC, chunkname("many"), env))()
      local m <close> = perfmon.monitor{ "jank", "ticks" }
      local s0 = m:snapshot()
      local spent, n = 0, 0
      perfmon.event(function() spent, n = burn(p.work, 30) end)
      local s1 = m:snapshot()
      local d = s1:subtract(s0)
      for i = 1, 31 do
        assert.equals(n, d.groups[groups[i].id].ticks)
        assert_near(d.groups[groups[i].id].cpu_us, spent, groups[i].name)
        assert.equals(1, d.groups[groups[i].id].durations[1])
      end
      assert.equals(0, d.groups[extra.id].ticks)
      assert_not_charged(d.groups[extra.id].cpu_us, "the 32nd group")
      -- each is inside the 30 others
      local want = { 0 }
      for i = 2, 31 do want[#want + 1] = groups[i].id end
      assert.same(sorted(want), sorted(s1.groups[groups[1].id].memberships))

      -- detaching one makes room for another
      assert.is_true(perfmon.detach(env, groups[31]))
      perfmon.attach(env, extra)
      s0 = m:snapshot()
      local _, n2 = burn(p.spin, 10)
      d = m:snapshot():subtract(s0)
      assert.equals(n2, d.groups[extra.id].ticks)
      assert.equals(0, d.groups[groups[31].id].ticks)
      assert.equals(n2, d.groups[groups[1].id].ticks)
    end)

    it("31 groups and the chunk's own group (\"chunks\") are all charged", function()
      local env = new_env()
      local groups = {}
      for i = 1, 31 do
        groups[i] = perfmon.group{ name = "chunked-" .. i, kind = "layer" }
        perfmon.attach(env, groups[i])
      end
      local name = chunkname("many-chunked")
      local p = assert(perfmon.load(PLUGIN_SRC, name, env))()
      local m <close> = perfmon.monitor{ "jank", "ticks", "chunks" }
      local s0 = m:snapshot()
      local spent, n = burn(p.work, 30)
      local s1 = m:snapshot()
      local d = s1:subtract(s0)
      local cg = find_chunk_group(s1, name:sub(2))
      assert.is_table(cg)
      assert.equals(n, d.groups[cg.id].ticks)
      assert_near(d.groups[cg.id].cpu_us, spent, "chunk group")
      for i = 1, 31 do
        assert.equals(n, d.groups[groups[i].id].ticks)
        assert_near(d.groups[groups[i].id].cpu_us, spent, groups[i].name)
      end
    end)
  end)
end)
