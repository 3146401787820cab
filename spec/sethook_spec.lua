-- spec/sethook_spec.lua -- a program that sets its own debug hook while
-- perfmon monitors (a debugger, a coverage tool, Prosody's util.async).
--
-- Lua has one debug hook per thread, and perfmon's monitors need it.  The
-- hook is shared:
--   * a hook set with debug.sethook while a monitor is open, or set before
--     it opened, or found on a coroutine perfmon meets, is called from
--     perfmon's for exactly the events and counts it asked for, and perfmon
--     keeps measuring;
--   * debug.gethook returns the program's hook, never perfmon's, so that
--     debug.sethook(co, debug.gethook()) copies nothing of perfmon's;
--   * when the last monitor closes the program's hooks stay, as it set them;
--   * a hook set behind perfmon's back (a debug.sethook kept from before,
--     or C code) is noticed at the next snapshot or event boundary:
--     snapshots say hook_lost = true, the thread's groups stop being
--     charged, and that hook is left in place.
-- (docs/reliability.md, "debug.sethook".)

local perfmon = require("perfmon")
local alone = require("spec.support.truth").alone

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
    function api.work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
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

  -- The events a hook counts while fn runs: the ground truth, run with
  -- no monitor, and the same under a monitor must agree exactly.
  local function count_events(fn, mask, count)
    local n = { call = 0, ["tail call"] = 0, ["return"] = 0, line = 0, count = 0 }
    debug.sethook(function(event) n[event] = n[event] + 1 end, mask, count)
    fn()
    debug.sethook()
    return n
  end

  local function work()
    local s = 0
    for i = 1, 50 do s = s + (i % 3 == 0 and math.abs(-i) or i) end
    return s
  end

  it("calls a hook set while a monitor is open for exactly its events, and keeps measuring", function()
    local g, p = plugin("sh_chain")
    for _, case in ipairs{ { "crl" }, { "l" }, { "c" }, { "r" }, { "", 7 }, { "cl", 3 } } do
      local truth = count_events(function() p.call(work) p.work(100) end, case[1], case[2])
      local m <close> = perfmon.monitor{ "ticks" }
      local before = m:snapshot()
      local got = count_events(function() p.call(work) p.work(100) end, case[1], case[2])
      local d = m:snapshot():subtract(before)
      m:close()
      for _, event in ipairs{ "call", "tail call", "return", "line", "count" } do
        assert.equals(truth[event], got[event], ("%s events for mask %q"):format(event, case[1]))
      end
      assert.equals(2, d.groups[g.id].ticks) -- perfmon lost nothing
      assert.is_nil(d.hook_lost)
    end
  end)

  it("opens a monitor over another hook, calls it, and leaves it when the last closes", function()
    local g, p = plugin("sh_before")
    local lines = 0
    local function tool(event) if event == "line" then lines = lines + 1 end end
    local function lines_of(fn) lines = 0 fn() return lines end
    raw_sethook(tool, "l")
    local truth = lines_of(work)
    local m = perfmon.monitor{ "ticks" }
    assert.same({ tool, "l", 0 }, { debug.gethook() })
    local got = lines_of(work)
    local d = m:snapshot()
    m:close()
    assert.equals(truth, got)
    assert.equals(tool, raw_gethook())
    assert.is_nil(d.hook_lost)
    local m2 <close> = perfmon.monitor{ "ticks" }
    local s0 = m2:snapshot()
    p.spin(1)
    assert.equals(1, m2:snapshot():subtract(s0).groups[g.id].ticks)
  end)

  it("keeps its hook at every depth of the C stack", function()
    alone(pending)
    local _ <close> = perfmon.monitor{ "ticks" }
    local function nest(n, f) -- n more C levels (a pcall each), then f()
      if n == 0 then return f() end
      return pcall(nest, n - 1, f)
    end
    local function try_sethook() pcall(debug.sethook, foreign, "c") end
    for n = 150, 230 do
      nest(n, try_sethook)
      assert.equals("external hook", raw_gethook(), "at " .. n .. " nested pcalls")
      debug.sethook()
    end
  end)

  it("shares the hook with the profiler and a program's line hook", function()
    local Profiler = require("perfmon.profiler")
    local truth = count_events(work, "l").line
    local _ <close> = perfmon.monitor{ "ticks" }
    local prof = Profiler.new()
    prof:start(100)
    local got = count_events(function()
      local t = os.clock() + 0.05
      while os.clock() < t do work() end
    end, "l")
    prof:stop()
    assert.is_true(prof:results().samples > 10, prof:results().samples .. " samples")
    assert.is_true(got.line > 10 * truth, got.line .. " lines")
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
    alone(pending)
    local m = perfmon.monitor{ "ticks" }
    local mine = coroutine.create(function() end) -- inherits perfmon's hook
    local theirs = coroutine.create(function() end)
    raw_sethook(theirs, foreign, "r", 7)
    assert.equals("external hook", raw_gethook(mine))
    assert.is_nil(debug.gethook(mine))
    assert.is_nil(debug.gethook())
    assert.same({ foreign, "r", 7 }, { debug.gethook(theirs) })
    debug.sethook(theirs) -- a debugger's hook goes; perfmon's takes its place
    assert.is_nil(debug.gethook(theirs))
    assert.equals("external hook", raw_gethook(theirs))
    m:close()
    assert.equals(raw_gethook, debug.gethook)
  end)

  -- A sample request (a sampled monitor's, the profiler's) sets a count
  -- hook on the running thread from a signal handler, at any instant, also
  -- inside debug.gethook: it must never show, or util.async's copy raises
  -- "bad argument #2 to 'sethook' (function expected, got string)".
  it("hides a sample request's hook from debug.gethook, at any instant", function()
    alone(pending)
    local Profiler = require("perfmon.profiler")
    -- util/async.lua's copy, over and over, for 0.3 s of CPU time and
    -- until samples() has risen (a loaded kernel holds the tick timer's
    -- signals back): how many copies saw a hook, and whether it rose
    local function copies(samples)
      local shown, s0, t0 = 0, samples(), os.clock()
      repeat
        for _ = 1, 200 do
          local co = coroutine.create(function() end)
          if debug.gethook() ~= nil then shown = shown + 1 end
          debug.sethook(co, debug.gethook())
        end
        local t = os.clock() - t0
      until t > 2 or t > 0.3 and samples() > s0
      return shown, samples() > s0
    end
    for _, timer in ipairs { "cpu", "tick" } do
      local m = perfmon.monitor{ "jank", mode = "sampled", rate_us = 100, timer = timer }
      local shown, sampled = copies(function() return perfmon.info().samples end)
      m:close()
      assert.equals(0, shown, timer .. " timer")
      assert.is_true(sampled, "no sample on the " .. timer .. " timer in 2 s of CPU time")
    end
    local p = Profiler.new()
    p:start(100)
    local ok, shown, sampled = pcall(copies, function() return p:results().samples end)
    p:stop()
    assert.is_true(ok, shown)
    assert.equals(0, shown, "the profiler")
    assert.is_true(sampled, "no profiler sample in 2 s of CPU time")
    assert.equals(raw_gethook, debug.gethook) -- the library's own again
    raw_sethook(foreign, "r", 7) -- a program's hook shows while sampling
    local m = perfmon.monitor{ "jank", mode = "sampled" }
    assert.same({ foreign, "r", 7 }, { debug.gethook() })
    m:close()
    raw_sethook()
  end)

  it("gives debug.sethook back when the last monitor closes, with the program's hook", function()
    alone(pending)
    local m1 = perfmon.monitor{ "ticks" }
    local m2 = perfmon.monitor{ "jank" }
    m1:close()
    debug.sethook(foreign, "c") -- m2 still open: chained
    assert.equals("external hook", raw_gethook())
    m2:close()
    assert.equals(raw_sethook, debug.sethook)
    assert.equals(raw_gethook, debug.gethook)
    assert.same({ foreign, "c", 0 }, { debug.gethook() })
  end)

  it("keeps debug.sethook shared when a monitor closes where no call can be made", function()
    alone(pending)
    local _ <close> = perfmon.monitor{ "ticks" }
    local shared = debug.sethook
    local depth = 0
    -- the handler fails, so Lua calls it again, deeper each time, until the
    -- C stack runs out ("error in error handling"); at each depth a monitor
    -- opens and closes, the last ones where no other call could be made
    local ok, err = xpcall(error, function(e)
      depth = depth + 1
      do local inner <close> = perfmon.monitor{ "jank" } end -- luacheck: ignore
      error(e, 0)
    end, "x")
    assert.is_false(ok)
    assert.equals("error in error handling", err)
    assert.is_true(depth > 100)
    assert.equals(1, perfmon.info().exact_monitors)
    assert.equals(shared, debug.sethook)
    debug.sethook(foreign, "c") -- chained, as while any exact monitor is open
    debug.sethook()
    assert.equals("external hook", raw_gethook()) -- perfmon's, still there
  end)

  it("gives the debug library's own functions back when perfmon was required again meanwhile", function()
    alone(pending)
    local m = perfmon.monitor{ "ticks" }
    package.loaded.perfmon = nil -- a host that reloads its modules
    local again = require("perfmon")
    package.loaded.perfmon = perfmon
    assert.is_not.equal(perfmon, again)
    assert.is_not.equal(raw_sethook, debug.sethook)
    m:close()
    assert.equals(raw_sethook, debug.sethook)
    assert.equals(raw_gethook, debug.gethook)
  end)

  it("lets a debug.sethook kept while monitoring work once monitoring ends", function()
    local m = perfmon.monitor{ "ticks" }
    local kept = debug.sethook
    m:close()
    kept(foreign, "c")
    assert.equals(foreign, debug.gethook())
  end)

  it("reports a hook set anyway, stops charging the thread, and leaves that hook in place", function()
    alone(pending)
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
    alone(pending)
    local _, p = plugin("sh_event")
    local m <close> = perfmon.monitor{ "ticks" }
    perfmon.event(p.call, raw_sethook, foreign, "c")
    perfmon.event(p.spin, 1)
    assert.is_true(m:snapshot().hook_lost)
  end)

  it("notices that its hook was removed from the main thread", function()
    alone(pending)
    local m <close> = perfmon.monitor{ "ticks" }
    raw_sethook()
    assert.is_true(m:snapshot().hook_lost)
  end)

  it("calls a debugger's hook on a coroutine it meets, measures the coroutine, and leaves the hook", function()
    local g, p = plugin("sh_co")
    local calls = 0
    local function debugger(event) if event == "call" then calls = calls + 1 end end
    -- made before the monitor, with the debugger's hook, and started
    local function made()
      local co = coroutine.create(function() while true do p.work(100) coroutine.yield() end end)
      raw_sethook(co, debugger, "c")
      assert(coroutine.resume(co))
      return co
    end
    local plain, cot = made(), made()
    calls = 0
    assert(coroutine.resume(plain))
    local truth = calls
    calls = 0
    local m = perfmon.monitor{ "ticks" }
    local s0 = m:snapshot()
    assert(coroutine.resume(cot))
    local d = m:snapshot():subtract(s0)
    assert.equals(debugger, debug.gethook(cot))
    assert.is_nil(d.hook_lost)
    assert.equals(1, d.groups[g.id].ticks)
    m:close()
    assert.equals(truth, calls)
    assert.equals(debugger, debug.gethook(cot))
  end)

  it("gives every coroutine alive its hook when monitoring begins, where the heap can be read", function()
    alone(pending)
    local core = require("perfmon.core")
    local co = coroutine.create(function() coroutine.yield() end)
    assert(coroutine.resume(co)) -- suspended, made before the monitor
    assert.is_false(core.owns_hook(co))
    local _ <close> = perfmon.monitor{ "ticks" }
    -- where it cannot, the hook comes with the next resume
    assert.equals(perfmon.info().chunks_found == "heap", core.owns_hook(co))
    assert(coroutine.resume(co))
    assert.is_true(core.owns_hook(co))
  end)

  it("starts clean when monitoring restarts", function()
    alone(pending)
    local m = perfmon.monitor{ "ticks" }
    raw_sethook(foreign, "c")
    assert.is_true(m:snapshot().hook_lost)
    m:close()
    raw_sethook()
    local m2 <close> = perfmon.monitor{ "ticks" }
    assert.is_nil(m2:snapshot().hook_lost)
    assert.is_false(perfmon.info().hook_lost)
  end)

  it("rejects bad arguments to the core functions behind it, naming them", function()
    alone(pending)
    -- called as the modules call them: perfmon.core is a face, which
    -- Lua's search for a function's name does not enter (modules_spec)
    local core = require("perfmon.core")
    local ok, err = pcall(function() return core.owns_hook("main") end)
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'owns_hook' %(thread expected, got string%)", err)
    ok, err = pcall(function() return core.hook_functions(raw_sethook) end)
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'hook_functions' %(table expected, got function%)", err)
    ok, err = pcall(function() return core.hook_functions({ sethook = raw_sethook }) end)
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'hook_functions' %(no function gethook in it%)", err)
    local _ <close> = perfmon.monitor{ "ticks" }
    ok, err = pcall(debug.sethook, foreign, {})
    assert.is_false(ok)
    assert.matches("bad argument #2 to '[%w.]*sethook' %(string expected, got table%)", err)
    ok, err = pcall(debug.sethook, "not a function", "c")
    assert.is_false(ok)
    assert.matches("bad argument #1 to '[%w.]*sethook' %(function expected, got string%)", err)
    assert.equals("external hook", raw_gethook()) -- perfmon's, unchanged
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
