-- spec/sethook_spec.lua -- a program that sets its own debug hook while
-- perfmon monitors (a debugger, a coverage tool).
--
-- Lua has one debug hook per thread, and perfmon's monitors need it.  The
-- behaviour is defined, never a silent loss of data:
--   * a monitor refuses to open while another hook is set;
--   * while a monitor is open, debug.sethook of a hook function refuses,
--     saying why; debug.gethook does not return perfmon's hook, and
--     debug.sethook without a function leaves it, so that copying a
--     thread's hook, debug.sethook(co, debug.gethook()), copies nothing;
--   * a hook set anyway (through a debug.sethook kept from before, or from
--     C) is noticed at the next snapshot or event boundary: snapshots say
--     hook_lost = true, the thread's groups stop being charged, and the
--     other hook is left in place, also when the monitors close;
--   * a coroutine that carries a debugger's hook keeps it when perfmon
--     would give it its own (and the snapshot says hook_lost).
-- (docs/reliability.md, "debug.sethook".)

local perfmon = require("perfmon")

local raw_sethook = debug.sethook -- kept before any monitor opens
local raw_gethook = debug.gethook

local function plugin(name)
  local g = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  local api = assert(perfmon.load([[
    local api = {}
    function api.spin(ms)
      local t = os.clock() + ms / 1000
      while os.clock() < t do end
    end
    function api.call(f, ...) return (f(...)) end
    function api.gen() while true do coroutine.yield(1) end end
    return api
  ]], "=" .. name, env, g))()
  return g, api
end

local function spin(ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do end
end

local function foreign() end

-- Leaves no hook behind, whatever a test did.
local function reset()
  raw_sethook()
  assert.is_nil(debug.gethook())
end

describe("debug.sethook while perfmon monitors", function()
  after_each(reset)

  it("refuses to open a monitor over another hook", function()
    raw_sethook(foreign, "c")
    local ok, err = pcall(perfmon.monitor, { "jank" })
    assert.is_false(ok)
    assert.matches("a debug hook is already set", err)
    assert.equals(foreign, debug.gethook())
  end)

  it("refuses debug.sethook while a monitor is open, and says why", function()
    local g, p = plugin("sh_refuse")
    local m <close> = perfmon.monitor{ "ticks" }
    local ok, err = pcall(debug.sethook, foreign, "c")
    assert.is_false(ok)
    assert.matches("debug.sethook: perfmon is monitoring this Lua state", err)
    debug.sethook() -- the program has no hook to clear: perfmon's stays
    assert.equals("external hook", raw_gethook())
    assert.is_nil(debug.gethook()) -- perfmon's is not the program's
    local before = m:snapshot()
    p.spin(1)
    p.spin(1)
    local d = m:snapshot():subtract(before)
    assert.equals(2, d.groups[g.id].ticks) -- nothing was lost
    assert.is_nil(d.hook_lost)
  end)

  -- The refusal asks perfmon how many monitors are open; near the C stack
  -- limit that question itself fails, and the answer must still be no.
  it("refuses debug.sethook at every depth of the C stack", function()
    local m <close> = perfmon.monitor{ "ticks" }
    local function nest(n, f) -- n more C levels (a pcall each), then f()
      if n == 0 then return f() end
      return pcall(nest, n - 1, f)
    end
    local function try_sethook() pcall(debug.sethook, foreign, "c") end
    for n = 150, 230 do
      nest(n, try_sethook)
      assert.equals("external hook", raw_gethook(), "at " .. n .. " nested pcalls")
    end
  end)

  it("lets a program copy a thread's hook onto a new coroutine (Prosody's util.async)", function()
    local g, p = plugin("sh_copy")
    local m <close> = perfmon.monitor{ "jank", "ticks" }
    local before = m:snapshot()
    local ok, err = pcall(function()
      local co = coroutine.create(function() p.spin(20) end)
      debug.sethook(co, debug.gethook()) -- util/async.lua, for each runner
      assert(coroutine.resume(co))
    end)
    assert.is_true(ok, err)
    local d = m:snapshot():subtract(before)
    assert.is_nil(d.hook_lost)
    assert.equals(1, d.groups[g.id].ticks)
    assert.is_true(d.groups[g.id].cpu_us >= 15000, d.groups[g.id].cpu_us .. " µs of 20 ms")
  end)

  it("hides its hook from debug.gethook on every thread, and shows a debugger's", function()
    local m = perfmon.monitor{ "ticks" }
    local mine = coroutine.create(function() end) -- inherits perfmon's hook
    local theirs = coroutine.create(function() end)
    raw_sethook(theirs, foreign, "r", 7)
    assert.equals("external hook", raw_gethook(mine))
    assert.is_nil(debug.gethook(mine))
    assert.is_nil(debug.gethook())
    assert.same({ foreign, "r", 7 }, { debug.gethook(theirs) })
    debug.sethook(theirs) -- a debugger's hook may go
    assert.is_nil(raw_gethook(theirs))
    m:close()
    assert.equals(raw_gethook, debug.gethook)
  end)

  it("gives debug.sethook back when the last monitor closes", function()
    local m1 = perfmon.monitor{ "ticks" }
    local m2 = perfmon.monitor{ "jank" }
    m1:close()
    assert.is_false(pcall(debug.sethook, foreign, "c")) -- m2 still open
    m2:close()
    assert.equals(raw_sethook, debug.sethook)
    debug.sethook(foreign, "c")
    assert.equals(foreign, debug.gethook())
  end)

  it("lets a debug.sethook kept while monitoring work once monitoring ends", function()
    local m = perfmon.monitor{ "ticks" }
    local kept = debug.sethook
    m:close()
    kept(foreign, "c")
    assert.equals(foreign, debug.gethook())
  end)

  it("reports a hook set anyway, stops charging the thread, and leaves that hook in place", function()
    local g, p = plugin("sh_lost")
    local m = perfmon.monitor{ "jank", "ticks" }
    local s0 = m:snapshot()
    assert.is_nil(s0.hook_lost)
    -- plugin code installs a debugger with the function kept from before
    p.call(raw_sethook, foreign, "c")
    local s1 = m:snapshot()
    assert.is_true(s1.hook_lost)
    assert.is_true(perfmon.info().hook_lost)
    -- host code after the loss is noticed is not charged to the plugin
    spin(30)
    local s2 = m:snapshot()
    assert.is_true(s2.hook_lost)
    local d = s2:subtract(s1)
    assert.is_true(d.hook_lost)
    assert.is_true(d.groups[g.id].cpu_us < 5000,
      ("the plugin was charged %d µs of host code"):format(d.groups[g.id].cpu_us))
    assert.truthy(perfmon.json(s2):find('"hook_lost":true', 1, true))
    m:close()
    assert.equals(foreign, debug.gethook()) -- perfmon did not remove it
  end)

  it("notices the loss at an event boundary too", function()
    local _, p = plugin("sh_event")
    local m <close> = perfmon.monitor{ "ticks" }
    perfmon.event(p.call, raw_sethook, foreign, "c")
    perfmon.event(p.spin, 1)
    assert.is_true(m:snapshot().hook_lost)
  end)

  it("notices that its hook was removed from the main thread", function()
    local m <close> = perfmon.monitor{ "ticks" }
    raw_sethook()
    assert.is_true(m:snapshot().hook_lost)
  end)

  it("leaves a debugger's hook on a coroutine in place", function()
    local _, p = plugin("sh_co")
    local co = coroutine.create(p.gen)
    raw_sethook(co, foreign, "c")
    local m = perfmon.monitor{ "jank" }
    assert.is_true(coroutine.resume(co))
    assert.equals(foreign, debug.gethook(co))
    assert.is_true(m:snapshot().hook_lost)
    m:close()
    assert.equals(foreign, debug.gethook(co))
  end)

  it("starts clean when monitoring restarts", function()
    local m = perfmon.monitor{ "ticks" }
    raw_sethook(foreign, "c")
    assert.is_true(m:snapshot().hook_lost)
    m:close()
    raw_sethook()
    local m2 <close> = perfmon.monitor{ "ticks" }
    assert.is_nil(m2:snapshot().hook_lost)
    assert.is_false(perfmon.info().hook_lost)
  end)

  it("reports no loss when nothing took the hook", function()
    local _, p = plugin("sh_clean")
    local m <close> = perfmon.monitor{ "jank", "ticks" }
    local co = coroutine.wrap(p.gen)
    for _ = 1, 3 do perfmon.event(co) end
    perfmon.event(function() pcall(error, "x") end)
    assert.is_nil(m:snapshot().hook_lost)
    assert.is_false(perfmon.info().hook_lost)
  end)
end)
