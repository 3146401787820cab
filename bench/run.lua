--- bench/run.lua: what perfmon costs.
--
-- Runs each workload in three modes:
--   none     no hook at all
--   noop     a call/return hook that does nothing (build/noophook.so): the
--            floor any call/return hook pays
--   perfmon  a monitor holding "jank" and "ticks", every plugin attached to
--            its own group, each event of the workload run by perfmon.event
-- The plugins are loaded once, into their own sandboxes and groups, and run
-- the same code in all three modes; only the hook and the event driver
-- (perfmon.event, or a plain call) differ.
--
-- The machine is shared and its speed drifts by up to 2x over seconds, so
-- medians of each mode's own series mostly measure the drift.  The ratios
-- are taken side by side instead: each timed run is a slice, 1/K of the
-- full-size workload (--slices, K = 8: ~50 ms), and a round runs the three
-- modes back to back on slices, forward (none, noop, perfmon) in odd rounds
-- and reversed in even ones.  A pair of adjacent rounds gives one ratio per
-- mode pair, the ratio of the two rounds' sums: every mode's mean position
-- in the pair is the same, so a drift linear over the pair cancels.  The
-- figures are medians over the pairs, with the interquartile range of
-- perfmon/noop to show how much pairs disagree.  Times in ms are median slice
-- times scaled back to a full-size run.  The profiler table (1 kHz, editor
-- workload) is measured the same way; then memory figures.
--
-- Run it with bench/run, which builds first; by hand:
--   LUA_PATH_5_4="lua/?.lua;lua/?/init.lua;;" LUA_CPATH_5_4="build/?.so;;" \
--     lua5.4 bench/run.lua [--reps N] [--slices K] [--quick] [--only NAME,...]
-- bench/instructions counts instructions of the same runs under callgrind.

local USAGE = [==[
usage: lua5.4 bench/run.lua [--reps N] [--slices K] [--quick] [--only NAME[,NAME...]]
                            [--mode MODE]
  --reps N     per mode and workload, time N full-size runs' worth of work
               (default 7; 3 with --quick), as N*K slices of 1/K size each
               in N*K rounds (rounded up to an even number, at least 12)
  --slices K   cut a full-size run into K slices (default 8: ~50 ms each at
               full size, ~12 ms with --quick); a workload whose unit of work
               is larger than 1/K (tables: one event) uses one unit a slice
  --quick      workloads at 1/4 size (a "full-size run" is then a quarter of
               one) and 3 repetitions, for a check in under 30 s
  --only LIST  run only these workloads (fib, editor, coroutines, tables,
               groups1000); the memory section always runs
  --mode MODE  run the workloads in one mode only (none, noop, perfmon,
               profiler: perfmon.profiler at 1 kHz and no monitor, or tick:
               the same on its "tick" timer), N whole runs (not slices),
               print each run's time and nothing else: for a profiler, e.g.
               perf record lua5.4 bench/run.lua --only editor --mode perfmon]==]

local WORKLOADS = { "fib", "editor", "coroutines", "tables", "groups1000" }

local opts = { reps = nil, slices = 8, quick = false, only = nil, mode = nil }
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--quick" then
      opts.quick = true
    elseif a == "--reps" or a == "--slices" then
      local n = tonumber(arg[i + 1])
      if not n or n < 1 or n % 1 ~= 0 then
        io.stderr:write("bench: ", a, " needs a positive integer\n", USAGE, "\n")
        os.exit(2)
      end
      opts[a:sub(3)] = n
      i = i + 1
    elseif a == "--only" and arg[i + 1] then
      opts.only = {}
      for name in arg[i + 1]:gmatch("[^,]+") do opts.only[name] = true end
      i = i + 1
    elseif a == "--mode" and ({ none = 1, noop = 1, perfmon = 1, profiler = 1, tick = 1 })[arg[i + 1]] then
      opts.mode = arg[i + 1]
      i = i + 1
    elseif a == "-h" or a == "--help" then
      print(USAGE)
      os.exit(0)
    else
      io.stderr:write("bench: unknown argument: ", a, "\n", USAGE, "\n")
      os.exit(2)
    end
    i = i + 1
  end
  opts.reps = opts.reps or (opts.quick and 3 or 7)
end
-- Workload sizes are multiplied by this.
local SCALE = opts.quick and 0.25 or 1
-- Fewer pairs of rounds than this give no median nor quartiles worth the
-- name (tables at --quick: 2 events a run, one a slice).
local MIN_ROUNDS = 12

io.stdout:setvbuf("line")

-- bench/'s own modules: stats, plugin, workloads.*
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path

local perfmon = require("perfmon")
local noophook = require("noophook")
local plugin = require("plugin")
local stats = require("stats")
local median, best, iqr = stats.median, stats.best, stats.iqr

-- Units of work (calls, keystrokes, events) in a full-size run and in a
-- slice of one: at least one, as an event cannot be split.
local function size(n) return math.max(1, math.floor(n * SCALE + 0.5)) end
local function slice_size(full) return math.max(1, math.floor(full / opts.slices + 0.5)) end

----------------------------------------------------------------------------
-- Workloads, one a file in bench/workloads/.  Each returns
--   { name, what = a line describing a full-size run, units = how many
--     units of work (fib calls, keystrokes, items, events, rounds) a
--     full-size run does before SCALE, setup = function(count) }
-- setup(count) loads the plugins once (bench/plugin.lua) and returns an
-- instance doing count units a run:
--   { run = function(drive) ... return checksum end, groups = {...},
--     calls = n (optional: Lua calls per run, for ns per call),
--     memory = {...} (optional: groups1000's figures for the memory section) }
-- run(drive) makes whatever coroutines it needs (so that they inherit the
-- hook of the mode) and runs each event as drive(handler, ...).
----------------------------------------------------------------------------

local workloads = {}
for i, name in ipairs(WORKLOADS) do workloads[i] = require("workloads." .. name) end

----------------------------------------------------------------------------
-- Modes and timing
----------------------------------------------------------------------------

local function direct(fn, ...) return fn(...) end

local MODES = { "none", "noop", "perfmon" }

local function assert_no_hook(where)
  if debug.gethook() ~= nil then
    error(("bench: a hook is still set %s: %s"):format(where, tostring(debug.gethook())))
  end
end

-- Runs w once in mode; returns its CPU seconds and checksum.  With check,
-- the perfmon mode also takes snapshots around the run (untimed use only).
local function run_mode(w, mode, check)
  collectgarbage("collect")
  assert_no_hook("before a run")
  local t0, t1, sum, d
  if mode == "none" then
    t0 = os.clock()
    sum = w.run(direct)
    t1 = os.clock()
  elseif mode == "noop" then
    noophook.set()
    t0 = os.clock()
    sum = w.run(direct)
    t1 = os.clock()
    noophook.clear()
  else
    local mon = perfmon.monitor{ "jank", "ticks" }
    local before = check and mon:snapshot()
    t0 = os.clock()
    sum = w.run(perfmon.event)
    t1 = os.clock()
    if check then d = mon:snapshot():subtract(before) end
    mon:close()
  end
  assert_no_hook("after mode " .. mode)
  return t1 - t0, sum, d
end

-- Runs w once under perfmon.profiler at 1 kHz, with or without a monitor,
-- on timer ("precise" or "tick"; default precise); returns its CPU
-- seconds, checksum, sampling periods and samples taken.
local function profiled(w, with_monitor, timer)
  collectgarbage("collect")
  local p = require("perfmon.profiler").new()
  local mon = with_monitor and perfmon.monitor{ "jank", "ticks" }
  p:start(1000, nil, { timer = timer })
  local t0 = os.clock()
  local sum = w.run(with_monitor and perfmon.event or direct)
  local t1 = os.clock()
  p:stop()
  if mon then mon:close() end
  assert_no_hook("after the profiler")
  return t1 - t0, sum, p:results().samples, #p:samples()
end

-- Rounds for opts.reps full-size runs' worth of slices (factor slices a
-- run), in whole pairs.
local function rounds_for(factor)
  return math.max(MIN_ROUNDS, 2 * math.ceil(opts.reps * factor / 2))
end

----------------------------------------------------------------------------
-- The machine line
----------------------------------------------------------------------------

local function read_file(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function cpu_model()
  local s = read_file("/proc/cpuinfo") or ""
  local model = s:match("model name%s*:%s*([^\n]+)") or s:match("Hardware%s*:%s*([^\n]+)")
  local n = 0
  for _ in s:gmatch("\nprocessor%s*:") do n = n + 1 end
  if s:match("^processor%s*:") then n = n + 1 end
  return (model or "unknown CPU"), n
end

local function loadavg()
  return ((read_file("/proc/loadavg") or "?"):match("^(%S+ %S+ %S+)")) or "?"
end

local function git_state()
  local p = io.popen("git rev-parse --short HEAD 2>/dev/null && git status --porcelain -- src lua 2>/dev/null")
  if not p then return "?" end
  local out = p:read("a")
  p:close()
  local head, rest = out:match("^(%S+)\n?(.*)$")
  if not head then return "not a git checkout" end
  local dirty = 0
  for _ in rest:gmatch("[^\n]+") do dirty = dirty + 1 end
  return dirty > 0 and ("%s + %d changed file(s) in src/ lua/"):format(head, dirty) or head
end

local info = perfmon.info()
local model, ncpu = cpu_model()
print(("machine: %s, %d CPU(s), load %s | %s (headers %s) | clock %s%s | perfmon %s")
  :format(model, ncpu, loadavg(), _VERSION, noophook.release, tostring(info.clock),
          info.path ~= nil and (" | path " .. tostring(info.path)) or "",
          git_state()))
if opts.mode then
  print(("run: %d full-size runs per workload in mode %s; %s sizes; os.clock CPU time")
    :format(opts.reps, opts.mode, opts.quick and "--quick (1/4)" or "full"))
else
  print(("run: %d full-size runs' worth per mode, as slices of 1/%d in rounds of the modes back to back,")
    :format(opts.reps, opts.slices))
  print(("     order alternating, after a warm-up slice per mode; %s sizes; os.clock CPU time")
    :format(opts.quick and "--quick (1/4)" or "full"))
end
print()

----------------------------------------------------------------------------
-- Timing
----------------------------------------------------------------------------

if opts.only then
  local known = {}
  for _, w in ipairs(workloads) do known[w.name] = true end
  for name in pairs(opts.only) do
    if not known[name] then
      io.stderr:write("bench: unknown workload: ", name, "\n", USAGE, "\n")
      os.exit(2)
    end
  end
end

if opts.mode then -- one mode, for a profiler: full-size runs, no tables
  for _, w in ipairs(workloads) do
    if not opts.only or opts.only[w.name] then
      local inst = w.setup(size(w.units))
      for rep = 1, opts.reps do
        local t
        if opts.mode == "profiler" or opts.mode == "tick" then
          t = profiled(inst, false, opts.mode == "tick" and "tick" or "precise")
        else
          t = run_mode(inst, opts.mode)
        end
        print(("%s %s run %d: %.1f ms"):format(w.name, opts.mode, rep, t * 1000))
      end
    end
  end
  os.exit(0)
end

local results = {}
local thousand_memory -- groups1000's figures, for the memory section
local started = os.clock()
for _, w in ipairs(workloads) do
  if not opts.only or opts.only[w.name] then
    local full = size(w.units)
    local slice = slice_size(full)
    local inst = w.setup(slice)
    inst.name, inst.what = w.name, w.what
    -- A slice's time times factor is a full-size run's (factor is K unless
    -- the unit of work is too big to cut that fine).
    inst.factor = full / slice
    inst.rounds = rounds_for(inst.factor)
    -- Warm-up: a slice per mode, untimed; checksums must agree.
    local sums, check, check_t = {}, nil, nil
    for _, mode in ipairs(MODES) do
      local t, sum, d = run_mode(inst, mode, true)
      sums[mode] = sum
      if d then check, check_t = d, t end
    end
    for _, mode in ipairs(MODES) do
      if sums[mode] ~= sums.none then
        error(("bench: %s gives %s under %s but %s with no hook")
          :format(w.name, tostring(sums[mode]), mode, tostring(sums.none)))
      end
    end
    inst.sum = sums.none
    local charged, ticks = 0, 0
    for _, g in ipairs(inst.groups) do
      local st = check.groups[g.id]
      if st and st.cpu_us > 0 then charged = charged + 1 end
      if st then ticks = ticks + st.ticks end
    end
    inst.check = ("%d/%d groups charged, %d ticks, process cpu_us %.1f ms (os.clock %.1f ms)")
      :format(charged, #inst.groups, ticks, check.process.cpu_us / 1000, check_t * 1000)
    inst.times = stats.interleave(MODES, inst.rounds, function(mode)
      local t, sum = run_mode(inst, mode)
      assert(sum == inst.sum, "bench: checksum changed between runs")
      return t
    end)
    results[#results + 1] = inst
    thousand_memory = thousand_memory or inst.memory
    io.stderr:write(("bench: %s done (%.0f s so far)\n"):format(w.name, os.clock() - started))
  end
end

local function ms(t) return t * 1000 end

if #results > 0 then
  print(("%-11s %9s %9s %9s  %9s %9s %9s  %6s  %8s  %9s"):format(
    "workload", "none ms", "noop ms", "perfmon", "perf/noop", "perf/none", "noop/none", "spread",
    "best p/n", "p/n IQR"))
  for _, r in ipairs(results) do
    local m, fastest = {}, {}
    local spread = 0
    for _, mode in ipairs(MODES) do
      local xs = r.times[mode]
      m[mode], fastest[mode] = median(xs), best(xs)
      spread = math.max(spread, (stats.max(xs) - fastest[mode]) / m[mode])
    end
    r.median = m
    r.pn = stats.paired(r.times, "perfmon", "noop")
    r.pz = stats.paired(r.times, "perfmon", "none")
    r.nz = stats.paired(r.times, "noop", "none")
    print(("%-11s %9.1f %9.1f %9.1f  %9.2f %9.2f %9.2f  %5.0f%%  %8.2f  %9s"):format(
      r.name, ms(m.none * r.factor), ms(m.noop * r.factor), ms(m.perfmon * r.factor),
      r.pn.median, r.pz.median, r.nz.median, spread * 100,
      fastest.perfmon / fastest.noop, iqr(r.pn)))
  end
  print()
  print("ms = median time of a slice x (full size / slice size): a full-size run's CPU time (os.clock);")
  print("ratios = median over pairs of adjacent rounds (a round: none, noop, perfmon on a slice each,")
  print("  back to back, reversed every other round) of the ratio of the pair's two-run sums;")
  print("p/n IQR = 25th-75th percentile of those per-pair perf/noop ratios (their spread, not an error")
  print("  bar of the median); spread = largest (max - min) / median of a mode's slice times, drift included;")
  print("best p/n = fastest perfmon slice / fastest noop slice (what interference from other work inflates least)")
  for _, r in ipairs(results) do
    print(("  %-11s %s"):format(r.name, r.what))
    print(("  %-11s %d rounds (%d pairs) of slices of 1/%.3g; perfmon warm-up (a slice): %s")
      :format("", r.rounds, r.pn.n, r.factor, r.check))
    if r.calls then
      -- The increments come from the paired ratios, not from differences of
      -- medians of separate series, which the drift dominates.
      local ns = r.median.none / r.calls * 1e9
      print(("  %-11s %d calls a full-size run: %.1f ns/call no hook, +%.1f ns no-op hook, +%.1f ns perfmon")
        :format("", math.floor(r.calls * r.factor + 0.5), ns, ns * (r.nz.median - 1),
                ns * (r.pz.median - 1)))
    end
  end
  print()
end

----------------------------------------------------------------------------
-- The sampling profiler at 1 kHz on the editor workload
----------------------------------------------------------------------------

-- none, the profiler (perfmon.profiler, p:start(1000), no monitor), the
-- profiler on its "tick" timer (p:start(1000, nil, { timer = "tick" })),
-- perfmon, and each profiler under perfmon's monitor, on editor slices in
-- paired rounds like the table above; the profilers are compared with
-- none, the profilers under the monitor with perfmon alone.  "timer signal
-- alone" is the floor of the precise timer: the same 1 kHz SIGPROF timer
-- with a handler that only reads the thread's CPU clock, which on a
-- virtual machine costs a few percent by itself (each tick is a timer
-- interrupt, a signal frame and a return).  The tick timer has no such
-- floor: the kernel checks it at its scheduler tick, which comes anyway.
local editor
for _, r in ipairs(results) do
  if r.name == "editor" then editor = r end
end
if editor then
  local function checked(t, sum)
    assert(sum == editor.sum, "bench: checksum changed under the profiler")
    return t
  end
  -- The floor of any time-based sampler: the same timer and signal with a
  -- handler that only reads the thread's CPU clock (noophook.timer_start).
  local function floor(w)
    collectgarbage("collect")
    noophook.timer_start(1000)
    local t0 = os.clock()
    local sum = w.run(direct)
    local t1 = os.clock()
    noophook.timer_stop()
    return t1 - t0, sum
  end
  local periods, taken, cpu = {}, {}, {}
  local function sampled(mode, with_monitor, timer)
    local t, sum, n, k = profiled(editor, with_monitor, timer)
    for list, v in pairs{ [periods] = n, [taken] = k, [cpu] = t } do
      list[mode] = list[mode] or {}
      table.insert(list[mode], v)
    end
    return checked(t, sum)
  end
  local time = {
    none = function() return checked(run_mode(editor, "none")) end,
    floor = function() return checked(floor(editor)) end,
    profiler = function() return sampled("profiler", false, "precise") end,
    tick = function() return sampled("tick", false, "tick") end,
    perfmon = function() return checked(run_mode(editor, "perfmon")) end,
    both = function() return sampled("both", true, "precise") end,
    both_tick = function() return sampled("both_tick", true, "tick") end,
  }
  local modes = { "none", "floor", "profiler", "tick", "perfmon", "both", "both_tick" }
  if not noophook.timer_start then table.remove(modes, 2) end
  profiled(editor, false) -- warm-up
  profiled(editor, true, "tick")
  local t = stats.interleave(modes, editor.rounds, function(mode) return time[mode]() end)
  local m, fastest = {}, {}
  for k, xs in pairs(t) do m[k], fastest[k] = median(xs), best(xs) end
  print("profiler at 1 kHz (perfmon.profiler, p:start(1000); tick: p:start(1000, nil, { timer = \"tick\" })),")
  print("editor workload")
  print(("%-22s %9s %9s  %8s  %9s  %8s"):format("mode", "ms", "vs", "ratio", "IQR", "best"))
  print(("%-22s %9.1f"):format("none", ms(m.none * editor.factor)))
  local function row(name, k, base)
    local q = stats.paired(t, k, base)
    print(("%-22s %9.1f %9s  %8.3f  %9s  %8.3f"):format(name, ms(m[k] * editor.factor), base,
      q.median, iqr(q), fastest[k] / fastest[base]))
  end
  if noophook.timer_start then row("timer signal alone", "floor", "none") end
  row("profiler", "profiler", "none")
  row("profiler, tick timer", "tick", "none")
  row("perfmon", "perfmon", "none")
  row("perfmon + profiler", "both", "perfmon")
  row("perfmon + tick timer", "both_tick", "perfmon")
  print(("  %d rounds (%d pairs) of the %d modes on slices of 1/%.3g, order reversed every other round;")
    :format(editor.rounds, editor.rounds // 2, #modes, editor.factor))
  print("  ms = median slice x (full size / slice size); ratio = median over pairs of adjacent rounds of")
  print("  the ratio of the pair's sums; IQR = 25th-75th percentile of those ratios; best = fastest / fastest")
  local names = { profiler = "profiler", tick = "tick timer", both = "perfmon + profiler",
                  both_tick = "perfmon + tick timer" }
  print("  sampling periods counted, of the ms of CPU from start to stop (1 a ms at most: periods")
  print("  after the last signal before stop are not counted), and samples taken, a slice on average:")
  for _, k in ipairs{ "profiler", "tick", "both", "both_tick" } do
    local n, taken_n = stats.mean(periods[k]), stats.mean(taken[k])
    print(("  %-22s %5.1f periods of %5.1f ms (%3.0f%%), in %5.1f samples (%.1f periods a sample)")
      :format(names[k], n, ms(stats.mean(cpu[k])), 100 * n / ms(stats.mean(cpu[k])), taken_n,
              taken_n > 0 and n / taken_n or 0))
  end
  print()
end

----------------------------------------------------------------------------
-- Memory
----------------------------------------------------------------------------

print("memory")
info = perfmon.info()
print(("  bytes_per_group %d (a group and its environment record, perfmon's C side)")
  :format(info.bytes_per_group))

-- A 200,000-frame non-tail recursion in a plugin, under a monitor.
do
  local depth = 200000
  local env = plugin.load("deep", [[
    local function down(n)
      if n == 0 then return 0 end
      return 1 + down(n - 1)
    end
    function run(n) return down(n) end ]])
  collectgarbage("collect")
  local before = perfmon.info()
  local mon = perfmon.monitor{ "jank", "ticks" }
  local t0 = os.clock()
  local ok, got = pcall(perfmon.event, env.run, depth)
  local t1 = os.clock()
  local after = perfmon.info()
  mon:close()
  if not ok or got ~= depth then
    print(("  deep recursion of %d frames FAILED under perfmon: %s"):format(depth, tostring(got)))
  else
    print(("  deep recursion, %d frames: shadow_capacity %d frames, bytes %d (%.1f MB; %d before), %.0f ms")
      :format(depth, after.shadow_capacity, after.bytes, after.bytes / 2^20, before.bytes,
              (t1 - t0) * 1000))
  end
  print(("  after the monitor closed: shadow_capacity %d, bytes %d")
    :format(perfmon.info().shadow_capacity, perfmon.info().bytes))
end

if thousand_memory then
  local m = thousand_memory
  print(("  groups1000: Lua heap +%.1f KB for 1000 perfmon.group, +%.1f KB for their 1000 chunks and sandboxes,")
    :format(m.groups_kb, m.chunks_kb))
  print(("              +%.1f KB after a monitored round; perfmon.info().bytes %d before, %d monitored, %d after close")
    :format(m.monitor_kb, m.bytes_before, m.bytes_monitored, m.bytes_after))
  print(("              (%d groups in the state; perfmon's group records, not in bytes: ~%d x %d B = %.0f KB)")
    :format(m.ngroups, m.ngroups, info.bytes_per_group, m.ngroups * info.bytes_per_group / 1024))
else
  print("  groups1000: not run (--only)")
end
