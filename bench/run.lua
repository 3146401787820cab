--- bench/run.lua: what perfmon costs.
--
-- Runs each workload in five modes:
--   none      no hook at all
--   noop      a call/return hook that does nothing (build/noophook.so): the
--             floor any call/return hook pays
--   exact     a monitor holding "jank" and "ticks", every plugin attached to
--             its own group, each event of the workload run by perfmon.event
--   sampled   the same monitor opened with mode = "sampled": no call/return
--             hook, the groups charged from samples of the thread's CPU time
--             (perfmon.info().sampled_timer: "cpu", or "tick" where the
--             kernel refuses a perf event; PERFMON_SAMPLED_TIMER=tick asks
--             for it).  A core without that mode rejects the field or
--             ignores it and opens an exact monitor, whose call/return hook
--             gives it away; the column then reads n/a rather than a second
--             copy of exact.
--   profiler  perfmon.profiler at 1 kHz on its "tick" timer, no monitor
-- The plugins are loaded once, into their own sandboxes and groups, and run
-- the same code in every mode; only the hook or timer and the event driver
-- (perfmon.event, or a plain call) differ.
--
-- The machine is shared and its speed drifts by up to 2x over seconds, so
-- medians of each mode's own series mostly measure the drift.  The ratios
-- are taken side by side instead: each timed run is a slice, 1/K of the
-- full-size workload (--slices, K = 8: ~50 ms), and a round runs the five
-- modes back to back on slices, forward (none, noop, exact, sampled,
-- profiler) in odd rounds and reversed in even ones.  A pair of adjacent
-- rounds gives one ratio per mode pair, the ratio of the two rounds' sums:
-- every mode's mean position in the pair is the same, so a drift linear
-- over the pair cancels.  The figures are medians over the pairs of each
-- mode's ratio to none and of exact's and sampled's to noop, each with the
-- interquartile range of its per-pair ratios to show how much pairs
-- disagree.  Times in ms are median slice times scaled back to a full-size
-- run.  The profiler table (1 kHz, editor workload: the precise timer, the
-- tick timer, each with and without the exact monitor) is measured the same
-- way; then memory figures.  --quick over every workload takes ~15 s on
-- the 2-core VM of docs/performance.md.
--
-- Run it with bench/run, which builds first; by hand:
--   LUA_PATH_5_4="lua/?.lua;lua/?/init.lua;;" LUA_CPATH_5_4="build/?.so;;" \
--     lua5.4 bench/run.lua [--reps N] [--slices K] [--quick] [--only NAME,...]
-- bench/instructions counts instructions of the same runs under callgrind.

-- While a monitor is open, perfmon's debug.gethook hides perfmon's own hook;
-- the library's, kept before perfmon loads, shows it (the sampled check).
local raw_gethook = debug.gethook

local USAGE = [==[
usage: lua5.4 bench/run.lua [--reps N] [--slices K] [--quick] [--only NAME[,NAME...]]
                            [--mode MODE] [--rate-us N]
  --reps N     per mode and workload, time N full-size runs' worth of work
               (default 7; 3 with --quick), as N*K slices of 1/K size each
               in N*K rounds (rounded up to an even number, at least 12)
  --slices K   cut a full-size run into K slices (default 8: ~50 ms each at
               full size, ~12 ms with --quick); a workload whose unit of work
               is larger than 1/K (tables: one event) uses one unit a slice
  --quick      workloads at 1/4 size (a "full-size run" is then a quarter of
               one) and 3 repetitions, for a check in under 30 s
  --rate-us N  the sampled monitor's rate_us (default: the monitors' own,
               4000); 1000000 leaves the brackets and their commits
               with almost no signal
  --only LIST  run only these workloads (fib, editor, coroutines, tables,
               groups1000); the memory section always runs
  --mode MODE  run the workloads in one mode only (none, noop, exact, sampled;
               profiler: perfmon.profiler at 1 kHz on its precise timer and
               no monitor; tick: the same on its "tick" timer, the table's
               profiler column; perfmon: the old name of exact; bare: as
               none with perfmon never loaded, the plugins loaded by plain
               load() into the same sandboxes, groups1000 left out), N whole
               runs (not slices), print each run's time and nothing else:
               for a profiler, e.g.
               perf record lua5.4 bench/run.lua --only editor --mode exact]==]

local WORKLOADS = { "fib", "editor", "coroutines", "tables", "groups1000" }

local opts = { reps = nil, slices = 8, quick = false, only = nil, mode = nil, rate_us = nil }
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--quick" then
      opts.quick = true
    elseif a == "--reps" or a == "--slices" or a == "--rate-us" then
      local n = tonumber(arg[i + 1])
      if not n or n < 1 or n % 1 ~= 0 then
        io.stderr:write("bench: ", a, " needs a positive integer\n", USAGE, "\n")
        os.exit(2)
      end
      opts[a:sub(3):gsub("-", "_")] = n
      i = i + 1
    elseif a == "--only" and arg[i + 1] then
      opts.only = {}
      for name in arg[i + 1]:gmatch("[^,]+") do opts.only[name] = true end
      i = i + 1
    elseif a == "--mode" and ({ none = 1, noop = 1, exact = 1, sampled = 1, profiler = 1,
                                tick = 1, perfmon = 1, bare = 1 })[arg[i + 1]] then
      opts.mode = arg[i + 1] == "perfmon" and "exact" or arg[i + 1]
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

-- bare: perfmon is never loaded, so that bench/instructions can tell what
-- loading it costs (its allocator wrapper) from what a monitor costs
local BARE = opts.mode == "bare"
local perfmon = not BARE and require("perfmon") or nil
local noophook = require("noophook")
local plugin = require("plugin")
local stats = require("stats")
local median, best, iqr = stats.median, stats.best, stats.iqr
plugin.bare = BARE

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
for _, name in ipairs(WORKLOADS) do
  if BARE and name == "groups1000" then
    if opts.only and opts.only[name] then
      io.stderr:write("bench: groups1000 makes perfmon groups: it has no bare run\n")
      os.exit(2)
    end
  else
    workloads[#workloads + 1] = require("workloads." .. name)
  end
end

----------------------------------------------------------------------------
-- Modes and timing
----------------------------------------------------------------------------

local function direct(fn, ...) return fn(...) end

-- The monitor of each monitor mode.
local MONITORS = {
  exact = { "jank", "ticks" },
  sampled = { "jank", "ticks", mode = "sampled", rate_us = opts.rate_us },
}

-- The timer of the sampled monitors ("cpu" or "tick"), once one opened.
local SAMPLED_TIMER

-- Whether this core has the sampled mode, and if not why not: a monitor
-- opened with it must set no call/return hook.  An older core raises on the
-- field or ignores it.
local function has_sampled()
  local ok, mon = pcall(perfmon.monitor, MONITORS.sampled)
  if not ok then return false, "perfmon.monitor raised: " .. tostring(mon) end
  local _, mask = raw_gethook()
  SAMPLED_TIMER = perfmon.info().sampled_timer
  mon:close()
  if (mask or ""):find("[cr]") then
    return false, "mode = \"sampled\" was ignored: the monitor set a call/return hook"
  end
  return true
end
-- Asked only where sampled is timed, so that a --mode run opens no monitor
-- but its own.
local SAMPLED, NO_SAMPLED = false, nil
if not opts.mode or opts.mode == "sampled" then SAMPLED, NO_SAMPLED = has_sampled() end
if opts.mode == "sampled" and not SAMPLED then
  io.stderr:write("bench: --mode sampled: this core has no sampled mode (", NO_SAMPLED, ")\n")
  os.exit(2)
end

-- The table's columns, in round order; MODES, the ones timed, leave out
-- sampled on a core without it.
local COLUMNS = { "none", "noop", "exact", "sampled", "profiler" }
local MODES = {}
for _, mode in ipairs(COLUMNS) do
  if mode ~= "sampled" or SAMPLED then MODES[#MODES + 1] = mode end
end

local function assert_no_hook(where)
  if debug.gethook() ~= nil then
    error(("bench: a hook is still set %s: %s"):format(where, tostring(debug.gethook())))
  end
end

-- Runs w once under perfmon.profiler at 1 kHz, with or without the exact
-- monitor, on timer ("precise" or "tick"; default precise); returns its
-- CPU seconds, checksum, sampling periods and samples taken.
local function profiled(w, with_monitor, timer)
  collectgarbage("collect")
  local p = require("perfmon.profiler").new()
  local mon = with_monitor and perfmon.monitor(MONITORS.exact)
  p:start(1000, nil, { timer = timer })
  local t0 = os.clock()
  local sum = w.run(with_monitor and perfmon.event or direct)
  local t1 = os.clock()
  p:stop()
  if mon then mon:close() end
  assert_no_hook("after the profiler")
  return t1 - t0, sum, p:results().samples, #p:samples()
end

-- Runs w once in mode; returns its CPU seconds and checksum.  With check,
-- a monitor mode also takes snapshots around the run and returns their
-- difference and the cycle-counter reads it made (untimed use only).
local function run_mode(w, mode, check)
  if mode == "profiler" then
    local t, sum = profiled(w, false, "tick")
    return t, sum
  end
  collectgarbage("collect")
  assert_no_hook("before a run")
  local t0, t1, sum, d, reads
  if mode == "none" or mode == "bare" then
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
    local mon = perfmon.monitor(MONITORS[mode])
    local before = check and mon:snapshot()
    reads = perfmon.info().cycle_reads
    t0 = os.clock()
    sum = w.run(perfmon.event)
    t1 = os.clock()
    reads = perfmon.info().cycle_reads - reads
    if check then d = mon:snapshot():subtract(before) end
    mon:close()
  end
  assert_no_hook("after mode " .. mode)
  return t1 - t0, sum, d, reads
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

local info = BARE and { clock = "(perfmon not loaded)" } or perfmon.info()
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
  print('modes: none, noop (a no-op call/return hook), exact (monitor{ "jank", "ticks" }),')
  print(('       sampled (the same with mode = "sampled", rate_us = %s, on the %s timer),')
    :format(opts.rate_us or "4000", SAMPLED_TIMER or "n/a"))
  print('       profiler (1 kHz, tick timer, no monitor)')
  if not SAMPLED then
    print("sampled: n/a (this core has no sampled mode)")
    print("         (" .. NO_SAMPLED .. ")")
  end
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
  assert(not BARE or package.loaded.perfmon == nil, "bench: --mode bare loaded perfmon")
  os.exit(0)
end

-- What a monitor's warm-up slice charged: d, the snapshots' difference, t
-- its os.clock time.
local function charged(inst, d, t)
  local n, ticks = 0, 0
  for _, g in ipairs(inst.groups) do
    local st = d.groups[g.id]
    if st and st.cpu_us > 0 then n = n + 1 end
    if st then ticks = ticks + st.ticks end
  end
  return ("%d/%d groups charged, %d ticks, cpu_us %.1f (os.clock %.1f) ms")
    :format(n, #inst.groups, ticks, d.process.cpu_us / 1000, t * 1000)
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
    local sums = {}
    inst.checks = {}
    for _, mode in ipairs(MODES) do
      local t, sum, d, reads = run_mode(inst, mode, true)
      sums[mode] = sum
      if d then inst.checks[mode] = charged(inst, d, t) end
      if mode == "exact" then inst.reads = reads * inst.factor end
    end
    for _, mode in ipairs(MODES) do
      if sums[mode] ~= sums.none then
        error(("bench: %s gives %s under %s but %s with no hook")
          :format(w.name, tostring(sums[mode]), mode, tostring(sums.none)))
      end
    end
    inst.sum = sums.none
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

-- A table row: the workload, then the cells, each in a field of fmt.
local function tabulate(name, fmt, cells)
  local out = { ("%-11s"):format(name) }
  for _, c in ipairs(cells) do out[#out + 1] = fmt:format(c) end
  return (table.concat(out):gsub("%s+$", ""))
end

-- "median [q1-q3]" of a stats.paired result; n/a for a mode not timed.
local function ratio(q) return q and ("%.2f [%s]"):format(q.median, iqr(q)) or "n/a" end

-- The monitors' modes, compared with the no-op hook too: the floor under
-- exact's hook, and what sampled saves by having none.
local MONITOR_MODES = { "exact", "sampled" }

if #results > 0 then
  for _, r in ipairs(results) do
    r.median, r.fastest, r.spread = {}, {}, 0
    for _, mode in ipairs(MODES) do
      local xs = r.times[mode]
      r.median[mode], r.fastest[mode] = median(xs), best(xs)
      r.spread = math.max(r.spread, (stats.max(xs) - r.fastest[mode]) / r.median[mode])
    end
    r.vs_none, r.vs_noop = {}, {}
    for _, mode in ipairs(MODES) do
      if mode ~= "none" then r.vs_none[mode] = stats.paired(r.times, mode, "none") end
    end
    for _, mode in ipairs(MONITOR_MODES) do
      if r.times[mode] then r.vs_noop[mode] = stats.paired(r.times, mode, "noop") end
    end
  end

  print("time of a full-size run, ms")
  local head = table.move(COLUMNS, 1, #COLUMNS, 1, {})
  head[#head + 1] = "spread"
  print(tabulate("workload", " %9s", head))
  for _, r in ipairs(results) do
    local cells = {}
    for i, mode in ipairs(COLUMNS) do
      cells[i] = r.median[mode] and ("%.1f"):format(ms(r.median[mode] * r.factor)) or "n/a"
    end
    cells[#cells + 1] = ("%.0f%%"):format(r.spread * 100)
    print(tabulate(r.name, " %9s", cells))
  end
  print()
  print("x none: median [IQR] of the per-pair ratios")
  print(tabulate("workload", "  %-17s", table.move(COLUMNS, 2, #COLUMNS, 1, {})))
  for _, r in ipairs(results) do
    local cells = {}
    for i = 2, #COLUMNS do cells[i - 1] = ratio(r.vs_none[COLUMNS[i]]) end
    print(tabulate(r.name, "  %-17s", cells))
  end
  print()
  print("x noop: median [IQR] of the per-pair ratios, and fastest slice / fastest noop slice")
  print(tabulate("workload", "  %-17s", { "exact", "sampled", "best exact", "best sampled" }))
  for _, r in ipairs(results) do
    local cells = {}
    for i, mode in ipairs(MONITOR_MODES) do
      cells[i] = ratio(r.vs_noop[mode])
      cells[#MONITOR_MODES + i] = r.fastest[mode] and ("%.2f"):format(r.fastest[mode] / r.fastest.noop)
        or "n/a"
    end
    print(tabulate(r.name, "  %-17s", cells))
  end
  print()
  -- The floor under the exact mode: each change of group, coroutine switch
  -- and commit reads the cycle counter, at its cost back to back here.
  local read_ns = noophook.cycle_read_ns(1000000)
  print(("the exact mode's floor: cycle-counter reads a full-size run, at %.1f ns a read back to back"):format(read_ns))
  print(tabulate("workload", " %12s", { "reads", "ms", "noop ms", "floor" }))
  for _, r in ipairs(results) do
    if r.reads and r.median.noop then
      local noop_ms = ms(r.median.noop * r.factor)
      local read_ms = r.reads * read_ns / 1e6
      print(tabulate(r.name, " %12s", { ("%.0f"):format(r.reads), ("%.1f"):format(read_ms),
        ("%.1f"):format(noop_ms), ("%.2f"):format((noop_ms + read_ms) / noop_ms) }))
    end
  end
  print("  floor = (noop ms + the reads' ms) / noop ms: exact / noop with nothing but the reads")
  print()
  print("ms = median time of a slice x (full size / slice size): a full-size run's CPU time (os.clock);")
  print("  spread = largest (max - min) / median of a mode's slice times, drift included")
  print("ratios = median over pairs of adjacent rounds (a round: every mode on a slice, back to back,")
  print("  reversed every other round) of the ratio of the pair's two-run sums; [IQR] = 25th-75th")
  print("  percentile of those per-pair ratios (their spread, not an error bar of the median)")
  print("best = fastest slice of the mode / fastest noop slice (what interference inflates least)")
  for _, r in ipairs(results) do
    print(("  %-11s %s"):format(r.name, r.what))
    print(("  %-11s %d rounds (%d pairs) of slices of 1/%.3g"):format("", r.rounds, r.rounds // 2,
      r.factor))
    for _, mode in ipairs(MONITOR_MODES) do
      if r.checks[mode] then
        print(("  %-11s %s warm-up: %s"):format("", mode, r.checks[mode]))
      end
    end
    if r.calls then
      -- The increments come from the paired ratios, not from differences of
      -- medians of separate series, which the drift dominates.
      local ns = r.median.none / r.calls * 1e9
      local more = {}
      for i = 2, #MODES do
        more[i - 1] = ("%s %+.1f"):format(MODES[i], ns * (r.vs_none[MODES[i]].median - 1))
      end
      print(("  %-11s %d calls a full-size run: %.1f ns/call with no hook, and more a call (ns):")
        :format("", math.floor(r.calls * r.factor + 0.5), ns))
      print(("  %-11s %s"):format("", table.concat(more, ", ")))
    end
  end
  print()
end

----------------------------------------------------------------------------
-- The sampling profiler at 1 kHz on the editor workload
----------------------------------------------------------------------------

-- none, the profiler (perfmon.profiler, p:start(1000), no monitor), the
-- profiler on its "tick" timer (p:start(1000, nil, { timer = "tick" })),
-- the exact monitor, and each profiler under it, on editor slices in
-- paired rounds like the tables above; the profilers are compared with
-- none, the profilers under the monitor with the monitor alone.  "timer
-- signal alone" is the floor of the precise timer: the same 1 kHz SIGPROF
-- timer with a handler that only reads the thread's CPU clock, which on a
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
  local function with_profiler(mode, with_monitor, timer)
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
    profiler = function() return with_profiler("profiler", false, "precise") end,
    tick = function() return with_profiler("tick", false, "tick") end,
    exact = function() return checked(run_mode(editor, "exact")) end,
    both = function() return with_profiler("both", true, "precise") end,
    both_tick = function() return with_profiler("both_tick", true, "tick") end,
  }
  local modes = { "none", "floor", "profiler", "tick", "exact", "both", "both_tick" }
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
  row("exact monitor", "exact", "none")
  row("exact + profiler", "both", "exact")
  row("exact + tick timer", "both_tick", "exact")
  print(("  %d rounds (%d pairs) of the %d modes on slices of 1/%.3g, order reversed every other round;")
    :format(editor.rounds, editor.rounds // 2, #modes, editor.factor))
  print("  ms = median slice x (full size / slice size); ratio = median over pairs of adjacent rounds of")
  print("  the ratio of the pair's sums; IQR = 25th-75th percentile of those ratios; best = fastest / fastest")
  local names = { profiler = "profiler", tick = "tick timer", both = "exact + profiler",
                  both_tick = "exact + tick timer" }
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
