-- The sample window: perfmon.monitor{ ..., mode = "sampled", window_ms }
-- samples at its rate for window_ms of wall time, and monitor:window()
-- reads what its samples charged in that window alone, even inside an
-- event that outlasts it.  Exact figures are checked on the engine's fake
-- clocks (tests/engine, sample_window); here the real clocks, against the
-- CPU time the plugin's own loop reads with os.clock.

local perfmon = require("perfmon")
local core = require("perfmon.core")
local truth = require("spec.support.truth")

-- A plugin whose loop notes (wall µs, CPU µs) as it goes: the CPU time
-- spent between two instants of the monotonic clock is read from them.
local function plugin(name)
  local g = perfmon.group { name = name, kind = "plugin" }
  local env = setmetatable({ wall_us = core.wall_us }, { __index = _G })
  perfmon.attach(env, g)
  local spin = assert(load([[
    return function(ms, marks)
      local t = os.clock() + ms / 1000
      repeat
        local c = os.clock()
        marks[#marks + 1] = { wall_us(), c * 1e6 }
      until c >= t
    end]], "=" .. name, "t", env))()
  return g, spin
end

-- The CPU µs the marks show between the monotonic instants a and b.
local function cpu_between(marks, a, b)
  local first, last
  for _, m in ipairs(marks) do
    if m[1] >= a and not first then first = m end
    if m[1] <= b then last = m end
  end
  return last[2] - first[2]
end

-- The CPU µs from the last mark at or before a to the first at or after
-- b: at least what ran between a and b, where cpu_between is at most.
local function cpu_around(marks, a, b)
  local first, last
  for _, m in ipairs(marks) do
    if m[1] <= a then first = m end
    if m[1] >= b and not last then last = m end
  end
  return (last or marks[#marks])[2] - first[2]
end

describe("a windowed sampled monitor", function()
  it("is refused for an exact monitor, with a bad window_ms, or beside another", function()
    local ok, err = pcall(perfmon.monitor, { "jank", window_ms = 100 })
    assert.is_false(ok)
    assert.matches('window_ms is for a monitor of mode "sampled"', err, 1, true)
    for _, bad in ipairs { 0, -5, 0 / 0, 1e12, "100", true } do
      ok, err = pcall(perfmon.monitor, { "jank", mode = "sampled", window_ms = bad })
      assert.is_false(ok)
      assert.matches("bad argument #1 to 'perfmon.monitor' %(window_ms: a positive number of ms "
        .. "below 1e%+12 expected, got ", err)
    end
    local m <close> = perfmon.monitor { "jank", mode = "sampled", window_ms = 100 }
    assert.equals(100, m.window_ms)
    ok, err = pcall(perfmon.monitor, { "jank", mode = "sampled", window_ms = 100 })
    assert.is_false(ok)
    assert.matches("a monitor with window_ms is open already (one at a time)", err, 1, true)
    local plain <close> = perfmon.monitor { "jank", mode = "sampled" }
    assert.has_error(function() plain:window() end, "monitor:window: the monitor has no window_ms")
    m:close()
    assert.has_error(function() m:window() end, "monitor:window: the monitor is closed")
  end)

  it("ends at its window inside a longer event, its figures those of the window", function()
    truth.alone(pending)
    local g, spin = plugin("windowed")
    local _ <close> = perfmon.monitor { "jank", mode = "sampled" }
    local marks = {}
    local m <close> = perfmon.monitor { "jank", mode = "sampled", rate_us = 1000, window_ms = 500 }
    local w
    perfmon.event(function()
      spin(10, marks)
      -- one event, twice the window and on until the window is over: it
      -- ends at the first sample past its end, which a thread the machine
      -- keeps off the CPU may not have had by then (a sample every ms of
      -- its CPU time; on the tick timer, at a tick that finds it running,
      -- fewer beside busy processes); 2 s of CPU at most
      local t = core.wall_us() + 1000e3
      repeat spin(5, marks) until core.wall_us() >= t
      local until_us = m:window().until_us
      repeat spin(5, marks)
      until not m:window().open or cpu_between(marks, until_us, math.huge) >= 2e6
      w = m:window() -- inside the event, past the window
    end)
    assert.is_false(w.open)
    assert.near(500e3, w.until_us - w.since_us, 1)
    assert.is_true(w.last_us >= w.since_us and w.last_us <= w.until_us)
    if w.samples == 0 then -- it covers nothing, and says so
      assert.equals(w.since_us, w.last_us)
      assert.equals(0, w.cpu_us)
      assert.is_nil(next(w.groups))
      pending("no sample came in the window's 500 ms: the machine kept this thread off the CPU")
      return
    end
    -- its figures cover it up to its last sample: the CPU time the
    -- plugin's loop read from the window's start to then (the plugin runs
    -- alone: every sample in the window is its own)
    local want = cpu_between(marks, w.since_us, w.last_us)
    local st = w.groups[g.id]
    truth.assert_near(st.cpu_us, want, "the plugin's CPU time in the window")
    truth.assert_near(st.self_us, want, "its self time in the window")
    assert.equals(0, w.missed_us)
    assert.is_true(st.samples > 0 and st.samples <= w.samples)
    -- the rate was the window's: more samples than the base rate gives
    if core.info().sampled_timer == "cpu" then
      assert(w.samples > 2 * want / 4000, ("%d samples in %.1f ms"):format(w.samples, want / 1000))
    end
    -- read again later, the figures stay those of the window
    local again = m:window()
    assert.equals(w.groups[g.id].cpu_us, again.groups[g.id].cpu_us)
    m:close()
  end)

  it("says what an exact monitor, which samples do not charge, kept from it", function()
    truth.alone(pending)
    local g, spin = plugin("missed")
    -- the window's CPU time counts from its opening, inside the monitor's,
    -- which walks every thread (3.6 ms with 20,000 coroutines alive; in
    -- spec.all.shuffled, one process with every spec, the window read
    -- 80 ms where marks taken after the opening said 58): the marks
    -- bracket it, one before the monitor opens and one after
    local marks, w = { { core.wall_us(), os.clock() * 1e6 } }, nil
    local m <close> = perfmon.monitor { "jank", mode = "sampled", rate_us = 1000, window_ms = 1e6 }
    marks[2] = { core.wall_us(), os.clock() * 1e6 }
    local exact = perfmon.monitor { "jank" }
    -- 60 ms of CPU, and on until a sample came (the tick timer's may
    -- not, beside busy processes); 2 s at most
    perfmon.event(function()
      repeat
        spin(20, marks)
        w = m:window()
      until (w.samples > 0 and marks[#marks][2] - marks[1][2] >= 60e3)
        or marks[#marks][2] - marks[1][2] >= 2e6
    end)
    exact:close()
    assert.is_true(w.open)
    assert.is_nil(w.groups[g.id]) -- no group charged, and said so:
    assert.is_true(w.samples > 0)
    -- the window's CPU time up to its last sample, all missed but for
    -- samples before the exact monitor opened
    local ran = cpu_between(marks, w.since_us, w.last_us)
    local around = cpu_around(marks, w.since_us, w.last_us)
    local lo = ran * (1 - truth.TOLERANCE) - truth.SLACK_US
    local hi = around * (1 + truth.TOLERANCE) + truth.SLACK_US
    assert(w.cpu_us >= lo and w.cpu_us <= hi,
      ("the window's CPU time: %.1f ms, the marks say %.1f to %.1f ms (%.1f .. %.1f)"):format(
        w.cpu_us / 1000, ran / 1000, around / 1000, lo / 1000, hi / 1000))
    assert.is_true(w.cpu_us - w.missed_us <= 0.25 * ran + 3000,
      ("%.1f ms of %.1f not missed"):format((w.cpu_us - w.missed_us) / 1000, w.cpu_us / 1000))
  end)

  it("ends when its monitor closes before the window is over", function()
    truth.alone(pending)
    local m = perfmon.monitor { "jank", mode = "sampled", window_ms = 1e6 }
    m:close()
    local t = core.wall_us()
    local w = core.window()
    assert.is_false(w.open)
    assert.is_true(w.until_us <= t and w.until_us >= w.since_us)
    -- and another may open
    local _ <close> = perfmon.monitor { "jank", mode = "sampled", window_ms = 1 }
    assert.is_true(core.window().open)
  end)
end)
