-- self_spec.lua: self time, the CPU time a group spends in the innermost
-- frame, beside inclusive time (while it is anywhere on the stack).
--
-- Ground truth: each plugin times its own busy loops with os.clock and
-- keeps the sum (M.spent), so a dispatcher that calls a slow plugin knows
-- its own share exactly.  The tolerances are truth's (25% + 3 ms), always
-- narrower than the time the callee would add to the caller's self time.

local perfmon = require("perfmon")
local watcher = require("perfmon.watcher")
local plugin_watcher = require("perfmon.plugin_watcher")
local truth = require("spec.support.truth")
local assert_near = truth.assert_near

local MS = 1000

-- A plugin: its own group, environment and chunk; extra goes into its
-- environment.  Its `spin(ms)` busy-loops and adds what it took to
-- M.spent.
local seq = 0
local function plugin(name, body, extra)
  seq = seq + 1
  local g = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable(extra or {}, { __index = _G })
  local src = "local M = { spent = 0 }\n"
    .. "local function spin(ms) local t0 = os.clock() local t = t0 + ms / 1000 "
    .. "while os.clock() < t do end M.spent = M.spent + (os.clock() - t0) * 1e6 end\n"
    .. body .. "\nreturn M"
  local main = assert(perfmon.load(src, ("=self_spec/%d/%s"):format(seq, name), env, g))
  return g, main()
end

-- The slow plugin and the dispatcher that calls it after own_ms of its own.
local function pair()
  local gs, slow = plugin("slow", "function M.run(ms) spin(ms) end")
  local gd, dispatch = plugin("dispatch", [[
    function M.run(own_ms, ms) spin(own_ms) slow.run(ms) end]], { slow = slow })
  return gs, slow, gd, dispatch
end

local function measure(mon, fn)
  local before = mon:snapshot()
  fn()
  return mon:snapshot():subtract(before)
end

local function st(d, g)
  return assert(d.groups[g.id], "group " .. g.name .. " missing from the snapshot")
end

describe("self time", function()
  it("charges a dispatcher its own work, and the plugin it calls its own", function()
    local gs, slow, gd, dispatch = pair()
    local mon <close> = perfmon.monitor{ "jank" }
    local d = measure(mon, function()
      for _ = 1, 10 do
        perfmon.event(function() dispatch.run(2, 8) end)
      end
    end)
    assert_near(st(d, gd).cpu_us, dispatch.spent + slow.spent, "dispatch, inclusive")
    assert_near(st(d, gd).self_us, dispatch.spent, "dispatch, self")
    assert_near(st(d, gs).self_us, slow.spent, "slow, self")
    assert_near(st(d, gs).cpu_us, slow.spent, "slow, inclusive")
    -- the process's self time is all of its time; groups that share no code
    -- never sum past it
    assert.are.equal(d.process.cpu_us, d.process.self_us)
    assert.is_true(st(d, gd).self_us + st(d, gs).self_us <= d.process.cpu_us + 100)
    for _, g in ipairs{ gd, gs } do
      local s = st(d, g)
      assert.is_true(s.self_us <= s.cpu_us + 1, g.name .. ": self above inclusive")
      -- each is whole µs, truncated
      assert.is_true(math.abs(s.self_user_us + s.self_system_us - s.self_us) <= 2)
    end
  end)

  it("gives a callback's time to the plugin it calls back, through a C function", function()
    -- table.sort is C: it runs in the caller's set; the comparator it calls
    -- is another plugin's code
    local gc, cmp = plugin("cmp", [[
      function M.less(a, b) spin(0.2) return a < b end]])
    local gs, sorter = plugin("sorter", [[
      function M.run(n)
        spin(10)
        local t = {}
        for i = 1, n do t[i] = (i * 7919) % n end
        table.sort(t, less)
      end]], { less = cmp.less })
    local mon <close> = perfmon.monitor{ "jank" }
    local d = measure(mon, function() perfmon.event(function() sorter.run(40) end) end)
    assert_near(st(d, gc).self_us, cmp.spent, "cmp, self")
    assert_near(st(d, gs).self_us, sorter.spent, "sorter, self (not its callback's)")
    assert_near(st(d, gs).cpu_us, sorter.spent + cmp.spent, "sorter, inclusive")
  end)

  it("gives the inner frames of a recursion back into a group to that group", function()
    -- A calls B, B calls back into A: A's stopwatch runs once, but the
    -- innermost set moves A -> B -> A -> B -> A
    local gb, b = plugin("B", [[
      function M.run(ms, back) spin(ms) back() spin(ms) end]])
    local ga, a = plugin("A", [[
      function M.run() spin(3) b.run(4, function() spin(5) end) spin(3) end]], { b = b })
    local mon <close> = perfmon.monitor{ "jank" }
    local d = measure(mon, function()
      for _ = 1, 5 do perfmon.event(a.run) end
    end)
    assert_near(st(d, ga).self_us, a.spent, "A, self (its 6 ms and its callback's 5)")
    assert_near(st(d, gb).self_us, b.spent, "B, self")
    assert_near(st(d, ga).cpu_us, a.spent + b.spent, "A, inclusive")
  end)

  it("follows coroutines: a resumed plugin's work is its own, not its resumer's", function()
    local gc, co_plugin = plugin("co", [[
      function M.body() for _ = 1, 6 do spin(3) coroutine.yield() end end]])
    local gd, dispatch = plugin("dispatch", [[
      function M.run() local co = coroutine.wrap(body)
        for _ = 1, 6 do spin(1) co() end end]], { body = co_plugin.body })
    local mon <close> = perfmon.monitor{ "jank" }
    local d = measure(mon, function() perfmon.event(dispatch.run) end)
    assert_near(st(d, gc).self_us, co_plugin.spent, "co, self")
    assert_near(st(d, gd).self_us, dispatch.spent, "dispatch, self (not the coroutine's)")
    assert_near(st(d, gd).cpu_us, dispatch.spent + co_plugin.spent, "dispatch, inclusive")
  end)

  it("returns self time to the caller when the callee raises", function()
    local gs, failing = plugin("failing", [[
      function M.run(ms) spin(ms) error("boom") end]])
    local gd, dispatch = plugin("dispatch", [[
      function M.run() spin(2) pcall(failing.run, 6) spin(4) end]], { failing = failing })
    local mon <close> = perfmon.monitor{ "jank" }
    local d = measure(mon, function()
      for _ = 1, 5 do perfmon.event(dispatch.run) end
    end)
    assert_near(st(d, gd).self_us, dispatch.spent, "dispatch, self (its work after the error too)")
    assert_near(st(d, gs).self_us, failing.spent, "failing, self")
  end)

  it("charges no self time for what a nested loop runs to the code that spun it", function()
    local gb, b = plugin("B", "function M.run(ms) spin(ms) end")
    local ga, a = plugin("A", [[
      function M.run() spin(10) nested() spin(5) end]], {
      nested = function()
        perfmon.nested_loop(function() perfmon.event(function() b.run(30) end) end)
      end,
    })
    local mon <close> = perfmon.monitor{ "jank" }
    local d = measure(mon, function() perfmon.event(a.run) end)
    assert_near(st(d, gb).self_us, b.spent, "B, self")
    -- A's frame was cancelled by the nested loop: its 5 ms after it are in
    -- neither its inclusive nor its self time
    assert_near(st(d, ga).self_us, 10 * MS, "A, self (before the nested loop)")
    assert.is_true(st(d, ga).self_us <= st(d, ga).cpu_us + 1)
  end)

  it("keeps a histogram of self time per event", function()
    local gs, slow, gd, dispatch = pair()
    local mon <close> = perfmon.monitor{ "jank" }
    local d = measure(mon, function()
      for _ = 1, 4 do perfmon.event(function() dispatch.run(1.5, 40) end) end
    end)
    local dd, ds = st(d, gd), st(d, gs)
    -- every event took the dispatcher >= 32 ms inclusive, < 16 ms self
    assert.are.equal(4, dd.events)
    assert.are.equal(4, dd.durations[6])
    assert.are.equal(4, dd.self_durations[1])
    assert.are.equal(0, dd.self_durations[5])
    assert.are.equal(4, ds.self_durations[6])
    assert_near(dd.self_event_us, dispatch.spent, "dispatch, self_event_us")
    assert_near(ds.self_event_us, slow.spent, "slow, self_event_us")
    -- subtract and json carry them
    local j = perfmon.json(d)
    assert.truthy(j:find('"self_durations"', 1, true))
    assert.truthy(j:find('"self_us"', 1, true))
  end)
end)

describe("the watcher on self time", function()
  local DEFAULTS = watcher.configure()
  after_each(function()
    watcher.configure{ jank_threshold_us = DEFAULTS.jank_threshold_us,
      buffering_delay_ms = DEFAULTS.buffering_delay_ms }
  end)

  -- Three events of a dispatcher that runs 1 ms itself and calls the slow
  -- plugin for 40 ms: the alerts of every group, by id.
  local function alerts_of(dispatch)
    local got = {}
    local function listener(batch)
      for _, a in ipairs(batch) do got[a.source.id] = a.details end
    end
    watcher.add_listener("*", listener)
    for _ = 1, 3 do perfmon.event(function() dispatch.run(1, 40) end) end
    watcher.flush()
    watcher.remove_listener("*", listener)
    return got
  end

  it("alerts the plugin whose own code janked, not the dispatcher that called it", function()
    local gs, slow, gd, dispatch = pair()
    watcher.configure{ jank_threshold_us = 20000, buffering_delay_ms = 0 }
    local got = alerts_of(dispatch)
    -- ground truth: the dispatcher's own time stayed far below the threshold
    assert.is_true(dispatch.spent < 3 * 5 * MS, "dispatch ran " .. dispatch.spent .. " µs")
    assert.is_true(slow.spent >= 3 * 30 * MS, "slow ran " .. slow.spent .. " µs")
    assert.is_nil(got[gd.id], "an alert for the dispatcher")
    local ds = assert(got[gs.id], "no alert for slow")
    assert.are.equal("jank", ds.reason)
    assert.is_true(ds.highest_self_us >= 30000)
    assert.are.equal(ds.count, ds.self_count)
    assert.is_true(ds.count >= 1)
  end)

  it("alerts on inclusive time when asked, saying how much of it was the group's own", function()
    local gs, _, gd, dispatch = pair()
    watcher.configure{ jank_threshold_us = 20000, buffering_delay_ms = 0, time = "inclusive" }
    local got = alerts_of(dispatch)
    watcher.configure{ time = "self" }
    local dd, ds = assert(got[gd.id], "no alert for dispatch"), assert(got[gs.id], "no alert for slow")
    assert.is_true(dd.highest_jank_us >= 30000)
    assert.is_true(dd.highest_self_us < 20000, "dispatch's self: " .. dd.highest_self_us)
    assert.are.equal(0, dd.self_count)
    assert.is_true(dd.count >= 1)
    assert.is_true(ds.highest_self_us >= 30000)
    assert.is_true(ds.self_count >= 1)
  end)

  it("puts a profiler's jank marker on the plugin, not on the dispatcher", function()
    local Profiler = require("perfmon.profiler")
    local _, slow, _, dispatch = pair()
    watcher.configure{ jank_threshold_us = 20000, buffering_delay_ms = 0 }
    local _ <close> = perfmon.monitor{ "jank" }
    local p = Profiler.new()
    p:start(1000, nil, { timer = "tick" })
    for _ = 1, 3 do perfmon.event(function() dispatch.run(1, 40) end) end
    watcher.flush()
    p:stop()
    assert.is_true(slow.spent >= 3 * 30 * MS and dispatch.spent < 3 * 5 * MS)
    local named = {}
    for _, m in ipairs(p.markers) do named[m.group] = (named[m.group] or 0) + 1 end
    assert.is_nil(named.dispatch, "a jank marker on the dispatcher")
    assert.is_true((named.slow or 0) >= 1, "no jank marker on the slow plugin")
    local gecko = require("cjson").decode(p:to_gecko())
    local data = gecko.threads[1].markers.data[1][6]
    assert.are.equal("slow", data.group)
    assert.is_true(data.highest_self >= 20, "highest_self " .. tostring(data.highest_self))
  end)

  it("makes plugin_watcher warn about the slow plugin, not the dispatcher that calls it", function()
    local _, _, _, dispatch = pair()
    local function run(opts)
      local warned = {}
      opts.on_warning = function(w) warned[w.group.name] = true end
      opts.alerts, opts.kind = 2, "plugin"
      watcher.configure{ jank_threshold_us = 20000, buffering_delay_ms = 0 }
      local _ <close> = plugin_watcher.new(opts)
      for _ = 1, 4 do perfmon.event(function() dispatch.run(1, 40) end) end
      watcher.flush()
      return warned
    end
    local on_self = run{}
    assert.is_true(on_self.slow)
    assert.is_nil(on_self.dispatch)
    local inclusive = run{ time = "inclusive" }
    assert.is_true(inclusive.slow)
    assert.is_true(inclusive.dispatch)
    assert.has_error(function() plugin_watcher.new{ on_warning = print, time = "both" } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('time' must be \"self\" or \"inclusive\", got \"both\")")
  end)
end)
