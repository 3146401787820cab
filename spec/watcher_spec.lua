-- watcher_spec.lua: perfmon.watcher's alerts and perfmon.plugin_watcher's
-- warnings, checked against what the plugins really did (busy loops timed
-- with os.clock, waits timed by the spec).

local perfmon = require("perfmon")
local watcher = require("perfmon.watcher")
local PluginWatcher = require("perfmon.plugin_watcher")
local core = require("perfmon.core")
local truth = require("spec.support.truth")

local MS = 1000
local SPIN = "local function spin(ms) local t = os.clock() + ms / 1000 "
  .. "while os.clock() < t do end end\n"

local seq = 0
local function plugin(name, kind)
  seq = seq + 1
  local g = perfmon.group { name = name, kind = kind or "plugin" }
  local env = setmetatable({}, { __index = _G })
  local main = assert(perfmon.load(SPIN .. "return spin", ("=watcher_spec/%d/%s"):format(seq, name), env, g))
  return g, main()
end

local function sleep(ms) -- off the CPU: a blocking wait
  os.execute(("sleep %.3f"):format(ms / 1000))
end

-- Registered listeners and tickers, removed after each test so that the
-- next starts from a watcher nobody listens to.
local registered
local function listen(target, fn)
  watcher.add_listener(target, fn)
  registered[#registered + 1] = { target, fn }
  return fn
end

local DEFAULTS = watcher.configure()
local monitors_before -- perfmon.busted's, in a run through it

before_each(function()
  monitors_before = core.info().monitors
  registered = {}
  watcher.configure { buffering_delay_ms = 0, jank_threshold_us = DEFAULTS.jank_threshold_us,
    blocking_threshold_us = DEFAULTS.blocking_threshold_us, on_error = DEFAULTS.on_error,
    input_window_ms = DEFAULTS.input_window_ms }
end)

after_each(function()
  for _, r in ipairs(registered) do pcall(watcher.remove_listener, r[1], r[2]) end
  perfmon.animation(false)
  assert.equal(monitors_before, core.info().monitors, "a monitor was left open")
end)

describe("watcher alerts", function()
  it("alerts on the janky plugin with its real jank, and never on the quiet one", function()
    local janky, jspin = plugin("janky")
    local quiet, qspin = plugin("quiet")
    local heard = {}
    listen(janky, function(source, details) heard[#heard + 1] = { source = source, details = details } end)
    local quiet_heard = 0
    listen(quiet, function() quiet_heard = quiet_heard + 1 end)
    for _ = 1, 3 do
      perfmon.event(function() jspin(90); qspin(2) end)
    end
    assert.equal(3, #heard)
    assert.equal(0, quiet_heard)
    for _, h in ipairs(heard) do
      assert.same({ id = janky.id, name = "janky", kind = "plugin", memberships = { 0 } }, h.source)
      assert.equal("jank", h.details.reason)
      truth.assert_near(h.details.highest_jank_us, 90 * MS, "highest_jank_us")
      assert.equal(0, h.details.highest_blocking_us)
      assert.is_false(h.details.visible)
      assert.equal(1, h.details.count)
      assert.near(os.time() * 1e6, h.details.time_us, 5e6)
    end
  end)

  it("respects the jank threshold", function()
    local g, spin = plugin("threshold")
    watcher.configure { jank_threshold_us = 30 * MS }
    local n = 0
    listen(g, function() n = n + 1 end)
    perfmon.event(function() spin(8) end) -- well under
    assert.equal(0, n)
    perfmon.event(function() spin(45) end) -- well over
    assert.equal(1, n)
  end)

  it("reports highest_jank_us since the last alert, not just the alerting event", function()
    truth.alone(pending)
    local g, spin = plugin("highest")
    watcher.configure { jank_threshold_us = 40 * MS, buffering_delay_ms = 60000 }
    local got
    listen(g, function(_, d) got = d end)
    perfmon.event(function() spin(20) end) -- below the threshold
    perfmon.event(function() spin(100) end) -- alerts
    perfmon.event(function() spin(60) end) -- alerts again, merged
    assert.is_nil(got) -- still buffered
    local n, next_ms = watcher.poll()
    assert.equal(0, n)
    assert.is_true(next_ms > 50000 and next_ms <= 60000, "next_ms " .. tostring(next_ms))
    assert.same({ 1, nil }, { watcher.flush() })
    truth.assert_near(got.highest_jank_us, 100 * MS, "highest_jank_us")
    assert.equal(2, got.count) -- two events over the threshold, one alert
  end)

  it("alerts on blocking time reaching the blocking threshold", function()
    local g = perfmon.group { name = "blocker", kind = "plugin" }
    local env = setmetatable({ perfmon = perfmon, sleep = sleep }, { __index = _G })
    local save = assert(perfmon.load("return function() perfmon.blocking(sleep, 120) end",
      "=watcher_spec/blocker", env, g))()
    local got
    listen(g, function(_, d) got = d end)
    local t0 = core.wall_us()
    perfmon.event(save)
    local waited = core.wall_us() - t0
    assert.is_table(got)
    assert.equal("blocking", got.reason)
    assert.is_true(got.highest_blocking_us >= 120 * MS and got.highest_blocking_us <= waited,
      ("highest_blocking_us %d not within [120 ms, %.0f µs]"):format(got.highest_blocking_us, waited))
    assert.is_true(got.highest_jank_us < 64 * MS) -- sleeping is not jank
  end)

  it("buffers alerts and hands the universal listener one batch", function()
    truth.alone(pending)
    local a, aspin = plugin("batch-a")
    local b, bspin = plugin("batch-b")
    watcher.configure { buffering_delay_ms = 60000 }
    local batches = {}
    listen("*", function(list) batches[#batches + 1] = list end)
    perfmon.event(function() aspin(70) end)
    perfmon.event(function() bspin(70) end)
    perfmon.event(function() aspin(70) end)
    assert.equal(0, #batches)
    watcher.configure { buffering_delay_ms = 50 }
    local t = core.wall_us() + 60 * MS
    while core.wall_us() < t do end
    assert.equal(2, watcher.poll())
    assert.equal(1, #batches)
    local ids = {}
    for _, alert in ipairs(batches[1]) do ids[#ids + 1] = alert.source.id end
    assert.same({ a.id, b.id }, ids) -- one entry per group, in order of arrival
  end)

  it("delivers buffered alerts at an event's end once the delay has passed", function()
    local g, spin = plugin("delayed")
    watcher.configure { buffering_delay_ms = 30 }
    local n = 0
    listen(g, function() n = n + 1 end)
    perfmon.event(function() spin(70) end)
    assert.equal(0, n)
    local t = core.wall_us() + 40 * MS
    while core.wall_us() < t do end
    perfmon.event(function() end)
    assert.equal(1, n)
  end)

  it("stops calling a removed listener, and refuses to remove an unknown one", function()
    truth.alone(pending)
    local g, spin = plugin("removal")
    local n = 0
    local fn = function() n = n + 1 end
    watcher.add_listener(g, fn)
    perfmon.event(function() spin(70) end)
    assert.equal(1, n)
    watcher.remove_listener(g, fn)
    perfmon.event(function() spin(70) end)
    assert.equal(1, n)
    assert.equal(0, core.info().monitors) -- the watcher's monitor is gone
    assert.has_error(function() watcher.remove_listener(g, fn) end,
      "bad argument #2 to 'perfmon.watcher.remove_listener' (not a listener of this target)")
    assert.has_error(function() watcher.remove_listener("*", fn) end,
      "bad argument #2 to 'perfmon.watcher.remove_listener' (not a listener of this target)")
  end)

  it("isolates a failing listener: the others and the host go on", function()
    local g, spin = plugin("failing")
    local errors, after = {}, 0
    watcher.configure { on_error = function(err, target) errors[#errors + 1] = { err, target } end }
    listen(g, function() error("listener bug") end)
    listen(g, function() after = after + 1 end)
    listen("*", function() error("universal bug") end)
    local ok = pcall(perfmon.event, function() spin(70) end)
    assert.is_true(ok)
    assert.equal(1, after)
    assert.equal(2, #errors)
    assert.matches("listener bug", errors[1][1])
    assert.equal(g, errors[1][2])
    assert.matches("universal bug", errors[2][1])
    assert.equal("*", errors[2][2])
  end)

  it("survives a failing error handler", function()
    local g, spin = plugin("failing-handler")
    watcher.configure { on_error = function() error("handler bug") end }
    local after = 0
    listen(g, function() error("listener bug") end)
    listen(g, function() after = after + 1 end)
    perfmon.event(function() spin(70) end)
    assert.equal(1, after)
  end)

  it("never charges a listener's time to the group it hears about", function()
    local g, spin = plugin("heard")
    local m <close> = perfmon.monitor { "jank" }
    local before = m:snapshot()
    listen(g, function() spin(60) end) -- the listener runs the group's own code
    perfmon.event(function() spin(80) end)
    local d = m:snapshot():subtract(before)
    truth.assert_near(d.groups[g.id].cpu_us, 80 * MS, "the group, without its listener")
    assert.is_true(d.process.cpu_us >= 130 * MS, "the process still counts the listener")
  end)

  it("marks jank visible after user input or during an animation", function()
    local g, spin = plugin("visible")
    watcher.configure { input_window_ms = 50 }
    local seen = {}
    listen(g, function(_, d) seen[#seen + 1] = d.visible end)
    perfmon.event(function() spin(70) end) -- no input, no animation
    perfmon.user_input()
    perfmon.event(function() spin(70) end) -- right after input
    local t = core.wall_us() + 80 * MS
    while core.wall_us() < t do end
    perfmon.event(function() spin(70) end) -- input too long ago
    perfmon.event(function() perfmon.animation(true); spin(70) end)
    perfmon.event(function() spin(70) end) -- the animation still runs
    perfmon.animation(false)
    perfmon.event(function() spin(70) end)
    assert.same({ false, true, false, true, true, false }, seen)
  end)

  it("detects nothing while nobody listens", function()
    local g, spin = plugin("unheard")
    local _ <close> = perfmon.monitor { "jank" }
    perfmon.event(function() spin(70) end)
    local fn = listen(g, function() error("an alert from before it listened") end)
    perfmon.event(function() end)
    assert.same({}, core.alerts())
    watcher.remove_listener(g, fn)
    registered = {}
  end)

  it("delivers through perfmon.event_end and watcher.poll, not inside an event", function()
    local g, spin = plugin("markers")
    local n = 0
    listen(g, function() n = n + 1 end)
    perfmon.event_begin()
    spin(70)
    local delivered, wait = watcher.poll() -- inside the event: nothing yet,
    assert.equal(0, delivered)
    assert.is_nil(wait) -- and nothing waits
    perfmon.event_end()
    assert.equal(1, n)
  end)

  it("goes sampled when switched to mode auto beside sampled monitors only, its own exact one aside", function()
    truth.alone(pending)
    local _ <close> = perfmon.monitor { "jank", mode = "sampled" }
    watcher.configure { mode = "exact" }
    local fn = function() end
    watcher.add_listener("*", fn)
    assert.equal(1, core.info().exact_monitors) -- the watcher's
    watcher.configure { mode = "auto" }
    local info = core.info()
    watcher.remove_listener("*", fn)
    assert.equal(0, info.exact_monitors)
    assert.equal(2, info.sampled_monitors)
  end)

  it("rejects bad arguments, naming them", function()
    local g = perfmon.group { name = "args", kind = "plugin" }
    local fn = function() end
    assert.has_error(function() watcher.add_listener(5, fn) end,
      "bad argument #1 to 'perfmon.watcher.add_listener' (perfmon.group or \"*\" expected, got number)")
    assert.has_error(function() watcher.add_listener("all", fn) end,
      "bad argument #1 to 'perfmon.watcher.add_listener' (perfmon.group or \"*\" expected, got string)")
    assert.has_error(function() watcher.add_listener(g, "fn") end,
      "bad argument #2 to 'perfmon.watcher.add_listener' (function expected, got string)")
    assert.has_error(function() watcher.remove_listener(nil, fn) end,
      "bad argument #1 to 'perfmon.watcher.remove_listener' (perfmon.group or \"*\" expected, got nil)")
    assert.has_error(function() watcher.configure(3) end,
      "bad argument #1 to 'perfmon.watcher.configure' (table expected, got number)")
    assert.has_error(function() watcher.configure { jank_treshold_us = 1 } end,
      "bad argument #1 to 'perfmon.watcher.configure' (unknown setting \"jank_treshold_us\" (settings: "
      .. "blocking_threshold_us, buffering_delay_ms, input_window_ms, jank_threshold_us, mode, on_error, "
      .. "time))")
    assert.has_error(function() watcher.configure { time = "both" } end,
      "bad argument #1 to 'perfmon.watcher.configure' ('time' must be \"self\" or \"inclusive\", got \"both\")")
    assert.has_error(function() watcher.configure { jank_threshold_us = -1 } end,
      "bad argument #1 to 'perfmon.watcher.configure' ('jank_threshold_us' must be a number of µs in [0, 1e+15), got -1)")
    assert.has_error(function() watcher.configure { buffering_delay_ms = 0 / 0 } end)
    assert.has_error(function() watcher.configure { on_error = true } end,
      "bad argument #1 to 'perfmon.watcher.configure' ('on_error' must be a function, got boolean)")
    assert.has_error(function() watcher.configure { mode = "sample" } end,
      "bad argument #1 to 'perfmon.watcher.configure' ('mode' must be \"auto\", \"exact\" or \"sampled\", got \"sample\")")
    assert.has_error(function() watcher.configure { mode = 1 } end,
      "bad argument #1 to 'perfmon.watcher.configure' ('mode' must be \"auto\", \"exact\" or \"sampled\", got number)")
    assert.has_error(function() watcher.add_ticker(fn, 0) end,
      "bad argument #2 to 'perfmon.watcher.add_ticker' (positive number of ms below 1e+12 expected, got 0)")
    assert.has_error(function() watcher.add_ticker(fn, 0 / 0) end) -- it would never tick
    assert.has_error(function() watcher.remove_ticker(fn) end,
      "bad argument #1 to 'perfmon.watcher.remove_ticker' (not a ticker)")
    assert.has_error(function() perfmon.animation("on") end)
    local ok, err = pcall(perfmon.animation)
    assert.is_false(ok)
    assert.matches("bad argument #1 to '.*animation' %(boolean expected, got no value%)", err)
    assert.equal(DEFAULTS.jank_threshold_us, watcher.configure().jank_threshold_us) -- unchanged
  end)

  -- The core refused what configure had accepted: add_listener then failed
  -- with "bad argument #2 to 'watch'" and every later configure{} raised.
  it("accepts exactly the core's bounds for the thresholds, and keeps working after a refusal", function()
    assert.has_error(function() watcher.configure { jank_threshold_us = math.maxinteger } end,
      "bad argument #1 to 'perfmon.watcher.configure' ('jank_threshold_us' must be a number of µs in [0, 1e+15), got "
      .. math.maxinteger .. ")")
    assert.has_error(function() watcher.configure { blocking_threshold_us = core.watch_max_us } end,
      "bad argument #1 to 'perfmon.watcher.configure' ('blocking_threshold_us' must be a number of µs in [0, 1e+15), got 1e+15)")
    -- times 1000 this integer wraps around to a small positive number
    assert.has_error(function() watcher.configure { input_window_ms = 0x4000000000000001 } end,
      "bad argument #1 to 'perfmon.watcher.configure' ('input_window_ms' must be a number of ms in [0, 1e+12), got "
      .. 0x4000000000000001 .. ")")
    assert.equal(DEFAULTS.jank_threshold_us, watcher.configure().jank_threshold_us)
    local g, spin = plugin("bounds")
    local n = 0
    listen(g, function() n = n + 1 end) -- raised "bad argument #2 to 'watch'"
    assert.same(DEFAULTS.jank_threshold_us, watcher.configure {}.jank_threshold_us)
    perfmon.event(function() spin(70) end)
    assert.equal(1, n)
    -- the largest values configure accepts, the core accepts too
    local top = watcher.configure { jank_threshold_us = core.watch_max_us - 1,
      blocking_threshold_us = core.watch_max_us - 1, input_window_ms = core.watch_max_us / 1000 - 1,
      buffering_delay_ms = core.watch_max_us / 1000 - 1 }
    assert.equal(core.watch_max_us - 1, top.jank_threshold_us)
    perfmon.event(function() spin(70) end)
    assert.equal(1, n) -- nothing reaches a threshold of 31 years
  end)

  it("configures all or nothing: a refused call changes no setting", function()
    truth.alone(pending)
    local g, spin = plugin("all-or-nothing")
    local n = 0
    listen(g, function() n = n + 1 end)
    local before = watcher.configure()
    -- jank_threshold_us alone is fine: it must not be applied either
    assert.has_error(function()
      watcher.configure { jank_threshold_us = 10 * MS, blocking_threshold_us = math.maxinteger }
    end)
    assert.has_error(function() watcher.configure { buffering_delay_ms = 60000, on_error = 3 } end)
    assert.same(before, watcher.configure())
    perfmon.event(function() spin(25) end) -- over 10 ms, under the threshold kept
    assert.equal(0, n)
    perfmon.event(function() spin(70) end)
    assert.equal(1, n) -- and delivered at once: the delay kept is 0
  end)

  it("reports an error object whose __tostring fails, and the other listeners still hear the batch", function()
    truth.alone(pending)
    local g, spin = plugin("bad-error-object")
    local raises = setmetatable({}, { __tostring = function() error("__tostring bug") end })
    local not_a_string = setmetatable({}, { __tostring = function() return 42 end })
    local lines = {}
    local stderr = io.stderr
    io.stderr = { write = function(_, s) lines[#lines + 1] = s end }
    local ok, err = pcall(function()
      local heard, batches = 0, {}
      listen(g, function() error(raises) end)
      listen(g, function() heard = heard + 1 end)
      listen("*", function() error(not_a_string) end)
      listen("*", function(batch) batches[#batches + 1] = batch end)
      perfmon.event(function() spin(70) end) -- the default on_error
      assert.equal(1, heard)
      assert.equal(1, #batches)
      assert.equal(g.id, batches[1][1].source.id)
      -- a handler that fails with such an object too: the fallback reports both
      watcher.configure { on_error = function(e) error(e, 0) end }
      perfmon.event(function() spin(70) end)
      assert.equal(2, heard)
      assert.equal(2, #batches)
    end)
    io.stderr = stderr
    assert(ok, err)
    assert.same({
      ("perfmon.watcher: listener for %s failed: (error object is a table value)\n"):format(tostring(g)),
      'perfmon.watcher: listener for "*" failed: (error object is a table value)\n',
      "perfmon.watcher: error handler failed: (error object is a table value)"
        .. " (handling: (error object is a table value))\n",
      "perfmon.watcher: error handler failed: (error object is a table value)"
        .. " (handling: (error object is a table value))\n",
    }, lines)
  end)

  it("names the caller's line in argument errors", function()
    local ok, err = pcall(watcher.add_listener, 5, print)
    assert.is_false(ok)
    local line = debug.getinfo(1, "l").currentline
    local ok2, err2 = pcall(function() watcher.add_listener(5, print) end)
    assert.is_false(ok2)
    assert.matches("watcher_spec.lua:" .. line + 1 .. ":", err2)
    assert.is_string(err)
  end)
end)

describe("plugin watcher", function()
  local pws
  before_each(function() pws = {} end)
  after_each(function() for _, pw in ipairs(pws) do pw:close() end end)
  local function new(opts)
    local pw = PluginWatcher.new(opts)
    pws[#pws + 1] = pw
    return pw
  end

  it("warns once when a plugin raises N alerts within the window", function()
    local janky, jspin = plugin("pw-janky")
    local quiet, qspin = plugin("pw-quiet")
    local warnings = {}
    new { on_warning = function(w) warnings[#warnings + 1] = w end, alerts = 3, alerts_window_ms = 60000 }
    for i = 1, 5 do
      perfmon.event(function() jspin(70); qspin(1) end)
      if i == 2 then assert.equal(0, #warnings) end -- two alerts are not a pattern
    end
    assert.equal(1, #warnings) -- the third alert warns; the 4th and 5th are within the window
    local w = warnings[1]
    assert.equal("alerts", w.reason)
    assert.equal(janky.id, w.group.id)
    assert.equal(3, w.alerts)
    assert.equal(60000, w.window_ms)
    assert.matches("plugin 'pw%-janky' is slowing things down: it janked 3 times", w.message)
    assert.are_not.equal(quiet.id, w.group.id)
  end)

  it("forgets alerts older than the window", function()
    local _, spin = plugin("pw-spread")
    local warnings = 0
    -- The window is wall time: the second and third alerts are an event's
    -- wall time apart, 25 ms of CPU (over a threshold of 20) stretched up
    -- to 40 times on a loaded machine (over 14 times seen here at a load of
    -- 18 on 2 CPUs).
    watcher.configure { jank_threshold_us = 20 * MS }
    new { on_warning = function() warnings = warnings + 1 end, alerts = 2, alerts_window_ms = 1000 }
    perfmon.event(function() spin(25) end)
    sleep(1100)
    perfmon.event(function() spin(25) end)
    assert.equal(0, warnings) -- two alerts, but over 1100 ms apart
    perfmon.event(function() spin(25) end)
    assert.equal(1, warnings)
  end)

  it("ignores the plugins on the ignore list and other kinds", function()
    local _, ispin = plugin("pw-ignored")
    local _, lspin = plugin("pw-later")
    local _, kspin = plugin("pw-library", "library")
    local warned = {}
    local pw = new { on_warning = function(w) warned[w.group.name] = true end, alerts = 1, ignore = { "pw-ignored" } }
    pw:ignore("pw-later")
    perfmon.event(function() ispin(70); lspin(70); kspin(70) end)
    assert.same({}, warned)
  end)

  it("warns about a plugin that keeps the CPU busy in short events", function()
    local busy, bspin = plugin("pw-busy")
    local _, qspin = plugin("pw-calm")
    local warnings = {}
    -- The busy plugin takes ~99% of the wall time on an idle machine, and
    -- over 2% on one so loaded that the process gets a fiftieth of a core
    -- (under a twentieth seen here at a load of 18 on 2 CPUs); the calm one
    -- never more than 0.5%.
    new { on_warning = function(w) warnings[#warnings + 1] = w end, cpu_percent = 2, cpu_window_ms = 200 }
    local t = core.wall_us() + 800 * MS
    while core.wall_us() < t do
      perfmon.event(function() bspin(4); qspin(0.02) end) -- never janking
    end
    -- at most once per 200 ms window, in 800 ms
    assert.is_true(#warnings >= 1 and #warnings <= 4, #warnings .. " warnings")
    local w = warnings[1]
    assert.equal("cpu", w.reason)
    assert.equal(busy.id, w.group.id)
    assert.is_true(w.cpu_percent >= 2 and w.cpu_percent <= 101, "cpu_percent " .. w.cpu_percent)
    for _, x in ipairs(warnings) do assert.equal(busy.id, x.group.id) end
  end)

  it("takes a snapshot to warn, not to poll: a busy group it does not watch costs one", function()
    local busy, bspin = plugin("pw-snap-busy")
    local _, lspin = plugin("pw-snap-library", "library")
    local warnings = {}
    local pw = new { on_warning = function(w) warnings[#warnings + 1] = w end, cpu_percent = 2, cpu_window_ms = 200 }
    local snapshots, snapshot = 0, pw.monitor.snapshot
    pw.monitor.snapshot = function(m) snapshots = snapshots + 1 return snapshot(m) end
    local polls, t = 0, core.wall_us() + 800 * MS
    while core.wall_us() < t do
      perfmon.event(function() bspin(2); lspin(2) end) -- both busy, never janking
      pw:poll()
      polls = polls + 1
    end
    assert.is_true(#warnings >= 1 and #warnings <= 4, #warnings .. " warnings")
    for _, w in ipairs(warnings) do assert.equal(busy.id, w.group.id) end
    -- one for each warning, and one that found the library's kind unwatched
    assert.is_true(snapshots >= #warnings and snapshots <= #warnings + 1,
      ("%d snapshots for %d warnings in %d polls"):format(snapshots, #warnings, polls))
    assert.is_true(polls > 2 * snapshots, polls .. " polls")
  end)

  it("warns in sampled mode, then diagnoses at a higher rate, ended at its window inside a long event", function()
    truth.alone(pending)
    local janky, jspin = plugin("pw-window-janky")
    local quiet, qspin = plugin("pw-window-quiet")
    local warnings, diagnoses = {}, {}
    local pw = new { on_warning = function(w) warnings[#warnings + 1] = w end, alerts = 3,
      mode = "sampled", escalate_ms = 150, diagnosis_rate_us = 500,
      on_diagnosis = function(d) diagnoses[#diagnoses + 1] = d end }
    local sampled = core.info().sampled_monitors
    -- the third alert warns; the checks follow at once, before a poll could
    -- end the window on a machine slow enough to take 150 ms an event
    for _ = 1, 6 do
      perfmon.event(function() jspin(70); qspin(2) end)
      if #warnings > 0 then break end
    end
    assert.equal(1, #warnings)
    assert.is_true(warnings[1].diagnosing)
    assert.equal(0, core.info().exact_monitors) -- no call/return hook
    assert.equal(sampled + 1, core.info().sampled_monitors)
    local inside
    perfmon.event(function() -- one event, twice the window
      local t = core.wall_us() + 300 * MS
      repeat jspin(10); qspin(1) until core.wall_us() >= t
      inside = core.window() -- the window is over, the event is not
    end)
    assert.is_false(inside.open)
    pw:poll()
    assert.equal(sampled, core.info().sampled_monitors) -- closed
    assert.equal(1, #diagnoses)
    local d = diagnoses[1]
    assert.equal("sampled", d.mode)
    assert.equal(500, d.rate_us)
    assert.equal(janky.id, d.group.id)
    -- the window, not the event: its figures cover it to its last sample
    assert.near(150e3, d.window.until_us - d.window.since_us, 1)
    assert.is_true(d.window_ms > 0 and d.window_ms <= 150, "window " .. d.window_ms)
    assert.is_false(d.window.open)
    -- the window's figures: janky's self time some ten times quiet's, and
    -- at most the window's CPU time
    local q = d.window.groups[quiet.id]
    assert.is_true(d.stats.self_us > 3 * (q and q.self_us or 0))
    assert.is_true(d.stats.cpu_us <= d.window.cpu_us)
    assert.is_true(d.stats.samples > 0)
    -- its events: those that ended by the poll, the long one's too
    assert.is_true(d.stats.events >= 1)
  end)

  it("diagnoses with an exact monitor for escalate_ms on request", function()
    truth.alone(pending)
    local janky, jspin = plugin("pw-sampled-janky")
    local quiet, qspin = plugin("pw-sampled-quiet")
    local warnings, diagnoses, before = {}, {}, watcher.configure().mode
    new { on_warning = function(w) warnings[#warnings + 1] = w end, alerts = 3,
      mode = "sampled", escalate_ms = 150, diagnosis = "exact",
      on_diagnosis = function(d) diagnoses[#diagnoses + 1] = d end }
    assert.equal("sampled", watcher.configure().mode)
    local info = core.info()
    assert.equal(0, info.exact_monitors)
    assert.is_true(info.sampled_monitors >= 2) -- the watcher's and the plugin watcher's
    -- 90 ms: over the 64 ms threshold by six of the sampled monitor's 4 ms
    -- samples.  The third alert warns and starts the diagnosis, which
    -- lasts escalate_ms of wall time: checked at once, before another
    -- event (on a loaded machine, longer than that) could outlast it.
    for _ = 1, 6 do
      perfmon.event(function() jspin(90); qspin(2) end)
      if #warnings > 0 then break end
    end
    assert.equal(1, #warnings)
    assert.equal(janky.id, warnings[1].group.id)
    assert.is_true(warnings[1].diagnosing)
    assert.equal(1, core.info().exact_monitors) -- the diagnosis runs
    local t = core.wall_us() + 200 * MS
    while core.wall_us() < t do perfmon.event(function() jspin(20); qspin(2) end) end
    pws[1]:poll()
    assert.equal(0, core.info().exact_monitors) -- and is over
    assert.equal(1, #diagnoses)
    local d = diagnoses[1]
    assert.equal(janky.id, d.group.id)
    assert.equal("exact", d.mode)
    assert.is_nil(d.rate_us)
    assert.is_nil(d.window)
    assert.is_true(d.window_ms >= 150, "window " .. d.window_ms)
    -- exact figures: janky's self time in the window, within the tolerance
    -- of its 20 ms a event, and quiet's well below
    assert.is_true(d.stats.self_us > 5 * d.snapshot.groups[quiet.id].self_us)
    assert.equal(d.stats.events, d.snapshot.groups[quiet.id].events)
    pws[1]:close()
    assert.equal(before, watcher.configure().mode) -- put back
  end)

  it("diagnoses a group warned about every window once per rediagnose_ms", function()
    truth.alone(pending)
    local busy, bspin = plugin("pw-rediagnose-busy")
    local warnings, diagnoses = {}, {}
    -- Busy in every event, so warned about once per 100 ms window of wall
    -- time (cpu_percent 2, as in the test above, for a loaded machine).
    local pw = new { on_warning = function(w)
        w.at = core.wall_us()
        warnings[#warnings + 1] = w
      end,
      mode = "sampled", cpu_percent = 2, cpu_window_ms = 100, escalate_ms = 100,
      rediagnose_ms = 600, on_diagnosis = function(d) diagnoses[#diagnoses + 1] = d end }
    local start = core.wall_us()
    while core.wall_us() < start + 1000 * MS and #warnings < 40 do
      perfmon.event(function() bspin(4) end)
      pw:poll()
    end
    assert.is_true(#warnings >= 4, #warnings .. " warnings")
    -- A diagnosis opens where none of the group's began in the last
    -- 600 ms; the other warnings say when the last one began.
    local opener, opened = nil, 0
    for i, w in ipairs(warnings) do
      assert.equal(busy.id, w.group.id)
      if w.diagnosing then
        assert.is_nil(w.diagnosed_us)
        assert.is_true(opener == nil or w.at - opener.at >= 600 * MS, "warning " .. i)
        opener, opened = w, opened + 1
      else
        assert.is_false(w.diagnosing, "warning " .. i)
        assert.is_not_nil(opener, "warning " .. i)
        assert.is_true(w.diagnosed_us <= opener.at and w.diagnosed_us >= start, "warning " .. i)
        assert.is_true(w.at - w.diagnosed_us < 600 * MS + 50 * MS, "warning " .. i)
      end
    end
    assert.is_true(warnings[1].diagnosing)
    -- 1000 ms of warnings: the first's diagnosis, at most one more
    assert.is_true(opened <= 2 and opened < #warnings, opened .. " of " .. #warnings)
    assert.is_true(#diagnoses >= 1 and #diagnoses <= opened, #diagnoses .. " diagnoses")
    assert.equal(busy.id, diagnoses[1].group.id)
    pw:close()
  end)

  it("samples at its rate_us in sampled mode", function()
    truth.alone(pending)
    local pw = new { on_warning = print, mode = "sampled", rate_us = 1000 }
    assert.equal(1000, pw.monitor.rate_us)
    pw:close()
    pw = new { on_warning = print, mode = "sampled" }
    assert.equal(4000, pw.monitor.rate_us) -- perfmon.monitor's default
    pw:close()
  end)

  it("puts the watcher's mode back when plugin watchers of two modes close in either order", function()
    local before, monitors = watcher.configure().mode, core.info().monitors
    local a = PluginWatcher.new { on_warning = print, mode = "sampled" }
    local b = PluginWatcher.new { on_warning = print, mode = "exact" }
    assert.equal("exact", watcher.configure().mode) -- the last one's
    a:close() -- not the last opened
    b:close()
    assert.equal(before, watcher.configure().mode)
    assert.equal(monitors, core.info().monitors)
  end)

  it("leaves the watcher's mode as it was when its monitor fails to open", function()
    local real, before = perfmon.monitor, watcher.configure().mode
    perfmon.monitor = function() error("perfmon: timer_create failed", 2) end -- as a sampled one can
    local ok, err = pcall(PluginWatcher.new, { on_warning = print, mode = "sampled" })
    perfmon.monitor = real
    assert.is_false(ok)
    assert.matches("perfmon: timer_create failed$", err)
    assert.equal(before, watcher.configure().mode)
    local pw = new { on_warning = print, mode = "exact" } -- and the next one puts it back too
    pw:close()
    assert.equal(before, watcher.configure().mode)
  end)

  it("rejects bad options, naming them", function()
    assert.has_error(function() PluginWatcher.new { on_warning = print, mode = "fast" } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('mode' must be \"exact\" or \"sampled\", got \"fast\")")
    assert.has_error(function() PluginWatcher.new { on_warning = print, escalate_ms = 100 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('escalate_ms' needs mode = \"sampled\" (an exact watcher has the exact figures))")
    assert.has_error(function() PluginWatcher.new { on_warning = print, mode = "sampled", escalate_ms = -1 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('escalate_ms' must be a positive number of ms below 1e+12, got -1)")
    assert.has_error(function() PluginWatcher.new { on_warning = print, mode = "sampled", on_diagnosis = 1 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('on_diagnosis' must be a function, got number)")
    assert.has_error(function()
      PluginWatcher.new { on_warning = print, mode = "sampled", escalate_ms = 100, diagnosis = "hook" }
    end, "bad argument #1 to 'perfmon.plugin_watcher.new' ('diagnosis' must be \"sampled\" or \"exact\", got \"hook\")")
    assert.has_error(function() PluginWatcher.new { on_warning = print, mode = "sampled", diagnosis = "exact" } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('diagnosis' needs 'escalate_ms' (the diagnosis's window))")
    assert.has_error(function()
      PluginWatcher.new { on_warning = print, mode = "sampled", escalate_ms = 100, diagnosis_rate_us = 50 }
    end, "bad argument #1 to 'perfmon.plugin_watcher.new' ('diagnosis_rate_us' must be a whole number in [100, 1000000], got 50)")
    assert.has_error(function()
      PluginWatcher.new { on_warning = print, mode = "sampled", escalate_ms = 100, diagnosis = "exact",
        diagnosis_rate_us = 500 }
    end, "bad argument #1 to 'perfmon.plugin_watcher.new' ('diagnosis_rate_us' is for diagnosis = \"sampled\" (an exact one takes no samples))")
    assert.has_error(function()
      PluginWatcher.new { on_warning = print, mode = "sampled", rediagnose_ms = 60000 }
    end, "bad argument #1 to 'perfmon.plugin_watcher.new' ('rediagnose_ms' needs 'escalate_ms' (the diagnosis's window))")
    assert.has_error(function()
      PluginWatcher.new { on_warning = print, mode = "sampled", escalate_ms = 100, rediagnose_ms = 50 }
    end, "bad argument #1 to 'perfmon.plugin_watcher.new' ('rediagnose_ms' must be at least 'escalate_ms' (100), got 50)")
    assert.has_error(function() PluginWatcher.new { on_warning = print, rate_us = 1000 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('rate_us' needs mode = \"sampled\" (an exact watcher takes no samples))")
    for _, bad in ipairs { 99, 1000001, 1000.5 } do
      assert.has_error(function() PluginWatcher.new { on_warning = print, mode = "sampled", rate_us = bad } end,
        ("bad argument #1 to 'perfmon.plugin_watcher.new' ('rate_us' must be a whole number in [100, 1000000], got %s)"):format(bad))
    end
    assert.has_error(function() PluginWatcher.new { on_warning = print, mode = "sampled", rate_us = "1000" } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('rate_us' must be a number, got string)")
    assert.equal(0, core.info().sampled_monitors) -- nothing left open
    assert.has_error(function() PluginWatcher.new() end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' (table expected, got nil)")
    assert.has_error(function() PluginWatcher.new {} end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('on_warning' must be a function, got nil)")
    assert.has_error(function() PluginWatcher.new { on_warning = print, alerts = "3" } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('alerts' must be a number, got string)")
    assert.has_error(function() PluginWatcher.new { on_warning = print, cpu_percent = 0 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('cpu_percent' must be a number in (0, 100], got 0)")
    assert.has_error(function() PluginWatcher.new { on_warning = print, ignore = { 1 } } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('ignore' must hold names: index 1 is a number)")
    local pw = new { on_warning = print }
    assert.has_error(function() pw:ignore(3) end, "bad argument #1 to 'plugin_watcher:ignore' (string expected, got number)")
    pw:close()
    pw:close()
    assert.has_error(function() pw:poll() end, "plugin_watcher:poll: the plugin watcher is closed")
  end)

  it("refuses unknown options and out-of-range numbers, listing the valid options", function()
    truth.alone(pending)
    local line = debug.getinfo(1, "l").currentline
    local ok, err = pcall(function() PluginWatcher.new { on_warning = print, alert = 5 } end) -- a typo
    assert.is_false(ok)
    assert.equal(("spec/watcher_spec.lua:%d: bad argument #1 to 'perfmon.plugin_watcher.new' (unknown option \"alert\" "
      .. "(options: alerts, alerts_window_ms, cpu_percent, cpu_window_ms, diagnosis, diagnosis_rate_us, escalate_ms, ignore, "
      .. "kind, mode, on_diagnosis, on_warning, "
      .. "profile_rate_us, profiler, rate_us, rediagnose_ms, time))")
      :format(line + 1), err:match("spec/watcher_spec%.lua:.*"))
    assert.has_error(function() new { on_warning = print, cpu_percent = 500 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('cpu_percent' must be a number in (0, 100], got 500)")
    assert.has_error(function() new { on_warning = print, alerts = 0.5 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('alerts' must be a whole number >= 1, got 0.5)")
    assert.has_error(function() new { on_warning = print, alerts = 0 / 0 } end)
    assert.has_error(function() new { on_warning = print, cpu_window_ms = 1e300 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('cpu_window_ms' must be a positive number of ms below 1e+12, got 1e+300)")
    assert.has_error(function() new { on_warning = print, kind = 3 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('kind' must be a group kind or \"*\", got number)")
    assert.has_error(function() new { on_warning = print, profiler = true } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('profiler' must be a perfmon.profiler or false, got boolean)")
    assert.has_error(function() new { on_warning = print, profile_rate_us = 5 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('profile_rate_us' must be a whole number in [10, 60000000], got 5)")
    assert.has_error(function() new { on_warning = print, profiler = false, profile_rate_us = 1000 } end,
      "bad argument #1 to 'perfmon.plugin_watcher.new' ('profile_rate_us' is the rate of the plugin watcher's own "
      .. "profiler, which it does not run with 'profiler' given)")
    assert.equal(0, core.info().monitors) -- none of them started
    local pw = new { on_warning = print, alerts = 2.0, cpu_percent = 100, kind = "*" }
    assert.equal(2, pw.alerts)
  end)

  it("names the mistake when a method is called with a dot", function()
    truth.alone(pending)
    local pw = new { on_warning = print }
    assert.has_error(function() pw.close() end,
      "bad argument #1 to 'plugin_watcher:close' (plugin watcher expected, got nil (call it as x:close()))")
    assert.has_error(function() pw.poll() end,
      "bad argument #1 to 'plugin_watcher:poll' (plugin watcher expected, got nil (call it as x:poll()))")
    assert.has_error(function() pw.ignore("linter") end,
      "bad argument #1 to 'plugin_watcher:ignore' (plugin watcher expected, got string (call it as x:ignore()))")
    pw:poll() -- still open and working
    pw:close()
    assert.equal(0, core.info().monitors)
  end)

  it("closes with <close>, releasing the watcher", function()
    truth.alone(pending)
    do
      local _ <close> = PluginWatcher.new { on_warning = print }
      assert.is_true(core.info().monitors >= 2)
    end
    assert.equal(0, core.info().monitors)
  end)
end)
