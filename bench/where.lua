--- bench/where.lua: what it costs for warnings to say where a plugin's
-- time went (perfmon.where, the plugin watcher's profiler), as a bench:
-- figures to read, not timed tests.
--
-- 1. Steady state: the editor workload (bench/workloads/editor.lua), each
--    keystroke one perfmon.event, under a plugin watcher with no profiler
--    (profiler = false) and under one with its own (the default: a sample
--    every 10 ms of CPU on the "tick" timer), exact and sampled.  Slices of
--    the workload in rounds of the four modes back to back, forward and
--    reversed (bench/stats.lua); the medians of the per-pair ratios of
--    each mode with its profiler to the same mode without, and their IQRs.
--    A plugin watcher is opened before each slice and closed after it,
--    outside the time measured.
-- 2. At a warning: where.find over a full ring of samples of the same
--    workload, the plugin watcher's own (3000: its 30 s window at 10 ms)
--    and one like Lite XL's profiler (30000: 30 s at 1 kHz): CPU ms a
--    call, the median of REPS.
--
-- Run it with bench/where (builds first); by hand:
--   LUA_PATH_5_4="lua/?.lua;lua/?/init.lua;bench/?.lua;;" LUA_CPATH_5_4="build/?.so;;" \
--     lua5.4 bench/where.lua [ROUNDS]

package.path = "bench/?.lua;" .. package.path
local perfmon = require("perfmon")
local PluginWatcher = require("perfmon.plugin_watcher")
local Profiler = require("perfmon.profiler")
local where = require("perfmon.where")
local stats = require("stats")

local ROUNDS = tonumber(arg[1] or "40") -- even: whole pairs
local SLICES, REPS = 8, 15

local editor = require("workloads.editor")
local edit = editor.setup(math.floor(editor.units / SLICES))
local function drive(f, ev) return perfmon.event(f, ev) end

----------------------------------------------------------------------------
-- 1. Steady state
----------------------------------------------------------------------------

local MODES = { "exact", "exact+where", "sampled", "sampled+where" }
local OPTS = {
  exact = { profiler = false },
  ["exact+where"] = {},
  sampled = { mode = "sampled", profiler = false },
  ["sampled+where"] = { mode = "sampled" },
}

local samples_seen = 0
local function time(mode)
  local opts = { on_warning = function() end, cpu_percent = 100 }
  for k, v in pairs(OPTS[mode]) do opts[k] = v end
  local pw = PluginWatcher.new(opts)
  local t0 = os.clock()
  edit.run(drive)
  local t = os.clock() - t0
  if pw.own_profiler then samples_seen = samples_seen + pw.own_profiler:results().samples end
  pw:close()
  return t
end

edit.run(drive) -- warm up
local times = stats.interleave(MODES, ROUNDS, time)
print(("editor workload, 1/%d slices, %d rounds (%d pairs); plugin watcher's own "
  .. "profiler: 10 ms on the %s timer"):format(SLICES, ROUNDS, ROUNDS // 2,
  (function() local p = Profiler.new() p:start(10000, 1, { timer = "tick" })
    local t = p:results().timer p:stop() return t end)()))
print(("%-16s %12s %14s %12s"):format("mode", "slice ms", "with/without", "IQR"))
for _, m in ipairs(MODES) do
  local base = m:match("^(%a+)%+where$")
  local q = base and stats.paired(times, m, base)
  print(("%-16s %12.1f %14s %12s"):format(m, stats.median(times[m]) * 1000,
    q and ("%.3f"):format(q.median) or "", q and stats.iqr(q) or ""))
end
print(("(%d samples taken by the plugin watchers' profilers over %d slices with one)")
  :format(samples_seen, ROUNDS * 2))

----------------------------------------------------------------------------
-- 2. At a warning
----------------------------------------------------------------------------

print()
print(("%-34s %10s %12s"):format("where.find over a ring of", "samples", "CPU ms/call"))
local group = edit.groups[2] -- a plugin's: every sample is read whichever is asked for
for _, n in ipairs { 3000, 30000 } do
  local p = Profiler.new()
  p:start(100, n) -- fast, to fill the ring soon; the stacks are the workload's
  local mon <close> = perfmon.monitor { "jank" }
  repeat edit.run(drive) until where.find(p, group, 0).window_samples >= n
  p:stop()
  local libs = where.libraries(mon:snapshot())
  local ms, found = {}, nil
  for r = 1, REPS do
    local t0 = os.clock()
    found = where.find(p, group, 0, nil, libs)
    ms[r] = (os.clock() - t0) * 1000
  end
  print(("%-34s %10d %12.1f"):format(n == 3000 and "the plugin watcher's own (30 s)"
    or "Lite XL's (30 s at 1 kHz)", found.window_samples, stats.median(ms)))
end
