--- bench/diagnosis.lua: what the plugin watcher's diagnosis costs, beside
-- plain sampled mode (issue 37: within 10% of it), as figures to read, not
-- a timed test.
--
-- The same slices of work, in rounds of the modes back to back (so that
-- the machine's load falls on all of them alike), each slice's CPU time
-- read with os.clock, one event per unit of work:
--   none       no monitor
--   sampled    a sampled monitor at its default rate (4 ms): the plugin
--              watcher's sampled mode without a warning
--   diag 1ms   the same and the sampled diagnosis, a windowed monitor at
--              1 ms (diagnosis_rate_us's default), its window open
--   diag 0.5ms the same at 0.5 ms
--   exact      the same sampled monitor and an exact one: the diagnosis
--              with diagnosis = "exact" (the call/return hook)
-- on a call-heavy plugin (recursive fib: a call every few instructions)
-- and on one that makes few calls (loops of arithmetic).  Printed: the
-- median CPU time of a slice in each mode, and the medians of the ratios
-- within each round, with their interquartile range.
--
-- Run it with bench/diagnosis (builds first); by hand:
--   LUA_PATH_5_4="lua/?.lua;lua/?/init.lua;bench/?.lua;;" LUA_CPATH_5_4="build/?.so;;" \
--     lua5.4 bench/diagnosis.lua [ROUNDS]

package.path = "bench/?.lua;" .. package.path
local perfmon = require("perfmon")
local plugin = require("plugin")

local ROUNDS = tonumber(arg[1] or "30")
local SLICE_S = 0.06 -- CPU seconds of work per slice, about

local _, _, fib = plugin.load("fib", [[
  local function fib(n)
    if n < 2 then return n end
    return fib(n - 1) + fib(n - 2)
  end
  return fib]])
local _, _, loop = plugin.load("loop", [[
  return function(n)
    local s = 0
    for i = 1, n do s = s + i % 7 end
    return s
  end]])

local WORKLOADS = {
  { name = "call-heavy (fib(20) an event)", unit = function() return fib(20) end },
  { name = "few calls (a 200k-step loop an event)", unit = function() return loop(200000) end },
}

local function open(probes) return perfmon.monitor(probes) end
local MODES = {
  { name = "none", open = function() return {} end },
  { name = "sampled", open = function() return { open { "jank", mode = "sampled" } } end },
  { name = "diag 1ms", open = function()
    return { open { "jank", mode = "sampled" },
      open { "jank", mode = "sampled", rate_us = 1000, window_ms = 600000 } }
  end },
  { name = "diag 0.5ms", open = function()
    return { open { "jank", mode = "sampled" },
      open { "jank", mode = "sampled", rate_us = 500, window_ms = 600000 } }
  end },
  { name = "exact", open = function()
    return { open { "jank", mode = "sampled" }, open { "jank" } }
  end },
}

-- Units per slice: as many as take SLICE_S with no monitor.
local function calibrate(unit)
  local n, t0 = 0, os.clock()
  repeat
    unit()
    n = n + 1
  until os.clock() - t0 >= SLICE_S
  return n
end

local function slice(mode, unit, n)
  local mons = mode.open()
  local t0 = os.clock()
  for _ = 1, n do perfmon.event(unit) end
  local t = os.clock() - t0
  for i = #mons, 1, -1 do mons[i]:close() end
  return t
end

local function quantile(xs, q)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  local pos = 1 + (#s - 1) * q
  local lo = math.floor(pos)
  local hi = math.min(lo + 1, #s)
  return s[lo] + (s[hi] - s[lo]) * (pos - lo)
end

print(("bench/diagnosis: %d rounds of the %d modes back to back, %s timer"):format(ROUNDS, #MODES,
  (function()
    local m = perfmon.monitor { "jank", mode = "sampled" }
    local timer = perfmon.info().sampled_timer
    m:close()
    return timer
  end)()))
for _, w in ipairs(WORKLOADS) do
  local n = calibrate(w.unit)
  local times = {}
  for _, m in ipairs(MODES) do times[m.name] = {} end
  for r = 1, ROUNDS do
    -- the order turns each round: no mode always runs first
    for k = 0, #MODES - 1 do
      local m = MODES[(r + k) % #MODES + 1]
      local t = times[m.name]
      t[#t + 1] = slice(m, w.unit, n)
    end
  end
  print(("\n%s: %d units a slice"):format(w.name, n))
  print(("%-11s %10s %14s %18s"):format("mode", "ms/slice", "x sampled", "x none"))
  for _, m in ipairs(MODES) do
    local vs_sampled, vs_none = {}, {}
    for i, t in ipairs(times[m.name]) do
      vs_sampled[i] = t / times.sampled[i]
      vs_none[i] = t / times.none[i]
    end
    print(("%-11s %10.1f %7.3f (%.3f-%.3f) %7.3f (%.3f-%.3f)"):format(m.name,
      1000 * quantile(times[m.name], 0.5),
      quantile(vs_sampled, 0.5), quantile(vs_sampled, 0.25), quantile(vs_sampled, 0.75),
      quantile(vs_none, 0.5), quantile(vs_none, 0.25), quantile(vs_none, 0.75)))
  end
end
