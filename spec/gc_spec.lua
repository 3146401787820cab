-- spec/gc_spec.lua -- attribution survives garbage collection.
--
-- perfmon keys what it knows by object address (functions, threads,
-- environments, chunk sources).  When Lua frees an object and a new one is
-- born at the same address, the new one must not inherit the old one's
-- groups.  These specs load, run and drop thousands of plugin chunks and
-- coroutines, collecting in between so that memory is reused, and check
-- with the "ticks" probe (exact counts) that no group was ever charged for
-- another's calls.

local perfmon = require("perfmon")
-- debug.gethook hides perfmon's own hook while a monitor is open; this
-- one, kept before any opens, shows it
local raw_gethook = debug.gethook

-- The plugin chunks of the cases at scale (a fifth of it for coroutines):
-- valgrind's run (tests/CMakeLists.txt), where each costs 50 times more,
-- sets fewer with PERFMON_GC_CHUNKS.
local CHUNKS = tonumber(os.getenv("PERFMON_GC_CHUNKS")) or 10000

local G_MT = { __index = _G }
local function new_env() return setmetatable({}, G_MT) end

-- Touches no global: `work` has no _ENV upvalue, only `clock`.
local SRC_ENVLESS = [[
local clock = os.clock
local function work(n, ms)
  local s = 0
  for j = 1, n do s = s + j end
  local spent = 0
  if ms then
    local t0 = clock()
    local t = t0 + ms / 1000
    while clock() < t do end
    spent = clock() - t0
  end
  return s, spent
end
return work
]]

-- Touches globals (math, os) through _ENV.
local SRC_GLOBAL = [[
return function(n, ms)
  local s = 0
  for j = 1, n do s = s + math.abs(j) end
  local spent = 0
  if ms then
    local t0 = os.clock()
    local t = t0 + ms / 1000
    while os.clock() < t do end
    spent = os.clock() - t0
  end
  return s, spent
end
]]

local assert_near = require("spec.support.truth").assert_near -- 25% + 3 ms

-- Every plugin group in the difference d has exactly expected[id] ticks (0
-- when absent), and the total matches.
local function assert_exact_ticks(d, expected)
  local bad, total, want_total = {}, 0, 0
  for id, st in pairs(d.groups) do
    if st.kind == "plugin" then -- not perfmon.busted's groups, in a run through it
      total = total + st.ticks
      local want = expected[id] or 0
      if st.ticks ~= want and #bad < 10 then
        bad[#bad + 1] = ("group %d (%s): %d ticks, expected %d"):format(id, st.name, st.ticks, want)
      end
    end
  end
  for id, want in pairs(expected) do
    want_total = want_total + want
    if not d.groups[id] and #bad < 10 then bad[#bad + 1] = ("group %d missing"):format(id) end
  end
  assert(#bad == 0, "wrong ticks:\n  " .. table.concat(bad, "\n  "))
  assert.equals(want_total, total)
end

-- Loads chunk number i in one of five ways and returns its worker and the
-- number of ticks running the chunk itself cost its group (0 or 1).
local function load_plugin(i, g, env, name)
  local variant = i % 5
  local src = (i % 2 == 0) and SRC_ENVLESS or SRC_GLOBAL
  if variant == 0 or variant == 1 then
    -- perfmon.load: registered, attached
    local main = assert(perfmon.load(src, name, env, g))
    return main(), 1
  elseif variant == 2 or variant == 3 then
    -- plain load, then attach before the chunk runs
    local main = assert(load(src, name, "t", env))
    perfmon.attach(env, g)
    return main(), 1
  else
    -- plain load, run unattached, attach afterwards
    local main = assert(load(src, name, "t", env))
    local work = main()
    perfmon.attach(env, g)
    return work, 0
  end
end

describe("perfmon across garbage collection", function()

  it("loads (require) whatever state the collector is in", function()
    -- require runs one full collection to check that frees are seen at the
    -- addresses perfmon keys; on the stock allocator that check must pass
    -- however much garbage the collector is in the middle of.
    local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
    local failures, runs = {}, 0
    for n = 0, 6000, 37 do
      runs = runs + 1
      local code = ("local t = {} for i = 1, %d do t[i] = {} end t = nil "
        .. "local ok, e = pcall(require, 'perfmon') io.write(ok and 'ok' or tostring(e))"):format(n)
      local cmd = ("env LUA_PATH_5_4=%s LUA_CPATH_5_4=%s lua5.4 -e %s 2>&1")
        :format(q(package.path), q(package.cpath), q(code))
      local p = assert(io.popen(cmd))
      local out = p:read("a")
      p:close()
      if out ~= "ok" and #failures < 5 then
        failures[#failures + 1] = ("after %d tables of garbage: %s"):format(n, out)
      end
    end
    assert(#failures == 0, ("require failed in fresh states (of %d):\n  "):format(runs)
      .. table.concat(failures, "\n  "))
  end)

  it(CHUNKS .. " plugin chunks loaded, run and dropped: each group has exactly its own ticks", function()
    local N = CHUNKS
    local m <close> = perfmon.monitor{ "ticks", "jank" }
    local s0 = m:snapshot()
    local expected, timed = {}, {}
    local keep = {} -- the handles: a group outlives its dropped chunk and env
    for i = 1, N do
      local g = perfmon.group{ name = "gc-plugin-" .. i, kind = "plugin" }
      keep[i] = g
      local env = new_env()
      local work, main_ticks = load_plugin(i, g, env, ("=gc_plugin_%05d"):format(i))
      local k = 1 + i % 7
      local spent = 0
      -- one event per chunk: CPU time is renormalised event by event
      perfmon.event(function()
        for _ = 1, k do
          -- some CPU everywhere; a known spin now and then
          local s, t = work(30, i % 1000 == 0 and 2 or nil)
          assert.equals(465, s)
          spent = spent + t
        end
      end)
      expected[g.id] = k + main_ticks
      if i % 1000 == 0 then timed[g.id] = spent * 1e6 end
      if i % 10 == 0 then
        -- a chunk in no group at all: its calls must go to nobody
        local orphan = assert(load((i % 20 == 0) and SRC_ENVLESS or SRC_GLOBAL,
          ("=gc_orphan_%05d"):format(i), "t", new_env()))()
        for _ = 1, 3 do orphan(30) end
      end
      if i % 100 == 0 then collectgarbage() end
    end
    collectgarbage()
    collectgarbage()
    local d = m:snapshot():subtract(s0)
    assert_exact_ticks(d, expected)
    for id, want in pairs(timed) do
      assert_near(d.groups[id].cpu_us, want, d.groups[id].name)
    end
  end)

  it("many short-lived coroutines made in plugins and collected: ticks stay exact", function()
    -- work(n, other) makes coroutines of every kind (finished, suspended
    -- and dropped, failed, wrapped), and resumes `other`, a coroutine left
    -- suspended by the previous plugin: that resume enters the previous
    -- plugin's group once.
    local SRC_CO = [[
local create, resume, yield, wrap, status =
  coroutine.create, coroutine.resume, coroutine.yield, coroutine.wrap, coroutine.status
local function body(a) local b = yield(a + 1) local c = yield(b * 2) return c end
local function gen(x) while true do x = yield(x + 1) end end
local function failing(a) yield(a) error("boom", 0) end
function work(n, other)
  local s = 0
  for j = 1, n do
    local co = create(body)
    local ok, v = resume(co, j)
    assert(ok and v == j + 1)
    if j % 2 == 0 then
      resume(co, 5)
      local ok2, c = resume(co, 7)
      assert(ok2 and c == 7 and status(co) == "dead")
    end
    local w = wrap(gen)
    s = s + w(1) + w(2)
    local f = create(failing)
    resume(f, 1)
    assert(not resume(f))
  end
  if other then assert(resume(other, 0)) end
  kept = create(gen)
  resume(kept, 0)
  return s
end
return work
]]
    local N = CHUNKS // 5
    local m <close> = perfmon.monitor{ "ticks", "jank" }
    local s0 = m:snapshot()
    local expected = {}
    local prev, prev_id
    local keep = {} -- the handles: a group outlives its dropped chunk and env
    for i = 1, N do
      local g = perfmon.group{ name = "co-plugin-" .. i, kind = "plugin" }
      keep[i] = g
      local env = new_env()
      local work
      if i % 2 == 0 then
        work = assert(perfmon.load(SRC_CO, ("=co_plugin_%05d"):format(i), env, g))()
      else
        local main = assert(load(SRC_CO, ("=co_plugin_%05d"):format(i), "t", env))
        perfmon.attach(env, g)
        work = main()
      end
      local k = 1 + i % 4
      expected[g.id] = 1 + k  -- the chunk, then k calls
      for c = 1, k do
        assert.equals(5 * 3, work(3, c == 1 and prev or nil))
      end
      if prev then expected[prev_id] = expected[prev_id] + 1 end
      prev, prev_id = env.kept, g.id
      if i % 3 == 0 then
        -- resumed from outside any group: enters the plugin's group
        assert(coroutine.resume(prev, 0))
        expected[g.id] = expected[g.id] + 1
      end
      if i % 50 == 0 then collectgarbage() end
    end
    prev = nil
    collectgarbage()
    collectgarbage()
    local d = m:snapshot():subtract(s0)
    assert_exact_ticks(d, expected)
  end)

  it("a monitor closed after everything was dropped and collected, then a new one: still exact", function()
    local survivors, expected1 = {}, {}
    local keep = {} -- the handles: a group outlives its dropped chunk and env
    local m1 = perfmon.monitor{ "ticks", "jank" }
    local s0 = m1:snapshot()
    for i = 1, 600 do
      local g = perfmon.group{ name = "era1-" .. i, kind = "plugin" }
      keep[#keep + 1] = g
      local env = new_env()
      local work, main_ticks = load_plugin(i, g, env, ("=era1_%05d"):format(i))
      local k = 1 + i % 3
      for _ = 1, k do work(20) end
      expected1[g.id] = k + main_ticks
      if i % 10 == 0 then
        -- kept alive into the next monitor, with a suspended coroutine
        local co = coroutine.create(work)
        survivors[#survivors + 1] = { g = g, work = work, env = env, co = co }
      end
      if i % 100 == 0 then collectgarbage() end
    end
    collectgarbage()
    collectgarbage()
    local d1 = m1:snapshot():subtract(s0)
    assert_exact_ticks(d1, expected1)
    m1:close()
    assert.is_nil(raw_gethook())

    -- unmonitored: counts for nobody
    for i = 1, 300 do
      local g = perfmon.group{ name = "between-" .. i, kind = "plugin" }
      local work = load_plugin(i, g, new_env(), ("=between_%05d"):format(i))
      work(20)
    end
    for _, s in ipairs(survivors) do s.work(20) end
    collectgarbage()
    collectgarbage()

    local m2 <close> = perfmon.monitor{ "ticks", "jank" }
    local s1 = m2:snapshot()
    local expected2 = {}
    for i, s in ipairs(survivors) do
      local k = 1 + i % 4
      for _ = 1, k do s.work(20) end
      assert(coroutine.resume(s.co, 20))  -- a coroutine made before this monitor
      expected2[s.g.id] = k + 1
    end
    for i = 1, 600 do
      local g = perfmon.group{ name = "era2-" .. i, kind = "plugin" }
      keep[#keep + 1] = g
      local work, main_ticks = load_plugin(i + 1, g, new_env(), ("=era2_%05d"):format(i))
      local k = 1 + i % 5
      for _ = 1, k do work(20) end
      expected2[g.id] = k + main_ticks
      if i % 100 == 0 then collectgarbage() end
    end
    survivors = nil
    collectgarbage()
    collectgarbage()
    local d2 = m2:snapshot():subtract(s1)
    assert_exact_ticks(d2, expected2)
  end)
end)
